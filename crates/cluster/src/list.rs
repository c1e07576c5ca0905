//! A URL list published to the owners' shard subjects in parts (`frontierd publish`): the
//! caller reads the list ([`ListSource`]), this publishes each part, retries for a while
//! the URLs the broker did not acknowledge, and says which lines went in when it gives up.
//! It prints nothing: each part's outcome is returned, and retries are reported to the
//! caller as [`Retrying`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::broker::{reconnect_delay, BrokerError};
use crate::message::UrlRecord;
use crate::publish::Publisher;

/// URLs per part (one publish call).
pub const LIST_PART_URLS: usize = 10_000;

/// One part of a URL list, as its reader found it.
#[derive(Debug, Default)]
pub struct ListPart {
    /// The URLs, each with its line number in the list.
    pub urls: Vec<(usize, String)>,
    /// Lines the reader refused already.
    pub rejected: Vec<ListRejection>,
    /// The last line read for this part.
    pub last_line: usize,
}

/// A line of the list not published, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRejection {
    pub line: usize,
    /// The line as echoed back.
    pub input: String,
    pub reason: String,
}

/// Reads a URL list in parts (the list format is the caller's).
pub trait ListSource {
    /// The next part, with up to `max_urls` URLs; `None` at the end of the list.
    fn next_part(&mut self, max_urls: usize) -> std::io::Result<Option<ListPart>>;
}

/// Something this crate waits out before trying again, for the caller to show.
#[derive(Debug)]
pub enum Retrying<'a> {
    /// Connecting or setting up the streams failed: another try after `pause`.
    Broker {
        error: &'a BrokerError,
        pause: Duration,
    },
    /// Some URLs of a part were not acknowledged: they are published again.
    Unacked { urls: usize, error: &'a BrokerError },
}

/// Why publishing a list stopped; every message says which lines were published.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("reading {name} after line {after}")]
    Read {
        name: String,
        after: usize,
        source: std::io::Error,
    },
    #[error(
        "{unacked} URL(s) of lines {first}-{last} not acknowledged after {retry_for:?}: {error} (lines 1-{lines_done} and {published} URLs in all were published)",
        first = .lines_done + 1
    )]
    NotAcknowledged {
        unacked: usize,
        last: usize,
        retry_for: Duration,
        error: Box<BrokerError>,
        /// Lines of the parts before, all published.
        lines_done: usize,
        /// URLs published in all, this part's included.
        published: usize,
    },
}

/// What one part came to.
#[derive(Debug, Default)]
pub struct PartPublished {
    /// URLs of the part published (acknowledged by the broker).
    pub published: usize,
    /// Lines not published, in line order: refused by the reader, or URLs the frontier
    /// would refuse (never sent).
    pub rejected: Vec<ListRejection>,
}

/// Publishes a list read from `S`, part after part.
pub struct ListPublisher<S> {
    publisher: Publisher,
    source: S,
    name: String,
    retry_for: Duration,
    published: usize,
    lines_done: usize,
}

impl<S: ListSource> ListPublisher<S> {
    /// `name` names the list in errors; URLs not acknowledged are published again for up
    /// to `retry_for`.
    pub fn new(
        publisher: Publisher,
        source: S,
        name: String,
        retry_for: Duration,
    ) -> ListPublisher<S> {
        ListPublisher {
            publisher,
            source,
            name,
            retry_for,
            published: 0,
            lines_done: 0,
        }
    }

    /// URLs published so far.
    pub fn published(&self) -> usize {
        self.published
    }

    /// Read and publish the next part; `None` at the end of the list.
    pub async fn next_part(
        &mut self,
        on_retry: &mut dyn FnMut(Retrying<'_>),
    ) -> Result<Option<PartPublished>, ListError> {
        let part = match self.source.next_part(LIST_PART_URLS) {
            Ok(Some(part)) => part,
            Ok(None) => return Ok(None),
            Err(source) => {
                return Err(ListError::Read {
                    name: self.name.clone(),
                    after: self.lines_done,
                    source,
                })
            }
        };
        let mut rejected = part.rejected;
        let line_of: HashMap<&str, usize> =
            part.urls.iter().map(|(n, u)| (u.as_str(), *n)).collect();
        let unroutable = |rejected: &mut Vec<ListRejection>, errors: Vec<crate::RouteError>| {
            for e in errors {
                let line = line_of.get(e.url.as_str()).copied().unwrap_or(0);
                rejected.push(ListRejection {
                    line,
                    input: e.url,
                    reason: e.reason.to_string(),
                });
            }
        };
        let mut todo: Vec<UrlRecord> = part
            .urls
            .iter()
            .map(|(_, u)| UrlRecord::seed(u.clone()))
            .collect();
        let mut published = 0;
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            match self.publisher.publish(std::mem::take(&mut todo)).await {
                Ok(report) => {
                    published += report.published;
                    unroutable(&mut rejected, report.unroutable);
                    break;
                }
                Err(failure) => {
                    published += failure.report.published;
                    attempt += 1;
                    if started.elapsed() >= self.retry_for {
                        return Err(ListError::NotAcknowledged {
                            unacked: failure.unacked.len(),
                            last: part.last_line,
                            retry_for: self.retry_for,
                            error: Box::new(failure.error),
                            lines_done: self.lines_done,
                            published: self.published + published,
                        });
                    }
                    on_retry(Retrying::Unacked {
                        urls: failure.unacked.len(),
                        error: &failure.error,
                    });
                    unroutable(&mut rejected, failure.report.unroutable);
                    todo = failure.unacked;
                    tokio::time::sleep(reconnect_delay(attempt)).await;
                }
            }
        }
        rejected.sort_by_key(|r| r.line);
        self.published += published;
        self.lines_done = part.last_line;
        Ok(Some(PartPublished {
            published,
            rejected,
        }))
    }
}
