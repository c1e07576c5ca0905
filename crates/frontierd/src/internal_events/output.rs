//! What the crawl writes: crawl log lines (and reopening the file), WARC exchanges.

use std::path::Path;

use crawl::Outcome;

use super::{chain, label, InternalEvent};
use crate::metrics::Metrics;

/// A batch of crawl log lines was written (one write; [`frontierd_outputs::CrawlLog`]).
pub struct CrawlLogLinesWritten<'a> {
    /// Each line's outcome.
    pub outcomes: &'a [Outcome],
}

impl InternalEvent for CrawlLogLinesWritten<'_> {
    fn emit(self, m: &Metrics) {
        tracing::trace!(lines = self.outcomes.len(), "crawl log lines written");
        // one look-up in the metric family per outcome, not per line
        let mut counts: Vec<(Outcome, u64)> = Vec::new();
        for &outcome in self.outcomes {
            match counts.iter_mut().find(|(o, _)| *o == outcome) {
                Some((_, n)) => *n += 1,
                None => counts.push((outcome, 1)),
            }
        }
        for (outcome, n) in counts {
            m.crawl_outcomes
                .get_or_create(&label("outcome", outcome.as_str()))
                .inc_by(n);
        }
    }
}

/// A batch of crawl log lines could not be written (disk full, ...). Logged once per
/// episode (the first failure after a success), counted every time, a line each.
pub struct CrawlLogWriteFailed<'a> {
    /// Lines not written.
    pub lines: usize,
    /// The first of them.
    pub first_url: &'a str,
    pub error: &'a std::io::Error,
    pub first_in_episode: bool,
}

impl InternalEvent for CrawlLogWriteFailed<'_> {
    fn emit(self, m: &Metrics) {
        if self.first_in_episode {
            tracing::error!(lines = self.lines, first_url = %self.first_url, error = %self.error, "crawl log write failed (further failures are counted in frontierd_crawl_log_write_failures_total until a line is written again)");
        } else {
            tracing::debug!(lines = self.lines, first_url = %self.first_url, error = %self.error, "crawl log write failed");
        }
        m.crawl_log_write_failures.inc_by(self.lines as u64);
    }
}

/// An output (the crawl log, the WARC files) takes writes again after failing.
pub struct OutputWritesResumed {
    pub output: &'static str,
}

impl InternalEvent for OutputWritesResumed {
    fn emit(self, _: &Metrics) {
        tracing::info!(output = self.output, "{} writes work again", self.output);
    }
}

/// SIGHUP: the crawl log continues in a new file at the configured path.
pub struct CrawlLogReopened<'a> {
    pub path: &'a Path,
}

impl InternalEvent for CrawlLogReopened<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(path = %self.path.display(), "SIGHUP: crawl log reopened");
        m.crawl_log_reopens.inc();
    }
}

/// An exchange was archived.
pub struct ExchangeArchived<'a> {
    pub url: &'a str,
    /// Compressed bytes written (a new file's warcinfo record included).
    pub bytes: u64,
}

impl InternalEvent for ExchangeArchived<'_> {
    fn emit(self, m: &Metrics) {
        tracing::trace!(url = %self.url, bytes = self.bytes, "exchange archived");
        m.warc_bytes.inc_by(self.bytes);
    }
}

/// An exchange could not be archived: its page is fetched again later (its attempt counts).
/// Logged once per episode (the first failure after a success), counted every time.
pub struct WarcWriteFailed<'a> {
    pub url: &'a str,
    pub error: &'a warc::WarcError,
    pub first_in_episode: bool,
}

impl InternalEvent for WarcWriteFailed<'_> {
    fn emit(self, m: &Metrics) {
        if self.first_in_episode {
            tracing::error!(error = chain(self.error), url = %self.url, "WARC write failed: pages are fetched again later (further failures are counted in frontierd_warc_write_failures_total until a write succeeds)");
        } else {
            tracing::debug!(error = chain(self.error), url = %self.url, "WARC write failed");
        }
        m.warc_write_failures.inc();
    }
}

/// SIGTERM or SIGINT arrived: the stop begins.
pub struct StopSignal {
    pub name: &'static str,
}

impl InternalEvent for StopSignal {
    fn emit(self, _: &Metrics) {
        tracing::info!("{} received", self.name);
    }
}

/// SIGHUP could not move the crawl log on: the new file could not be opened (lines keep
/// going to the old one), or the old one could not be finished.
pub enum CrawlLogReopenFailed<'a> {
    NotReopened { error: &'a anyhow::Error },
    OldNotFinished { error: &'a std::io::Error },
}

impl InternalEvent for CrawlLogReopenFailed<'_> {
    fn emit(self, _: &Metrics) {
        match self {
            CrawlLogReopenFailed::NotReopened { error } => tracing::error!(
                error = format!("{error:#}"),
                "SIGHUP: crawl log not reopened, still writing to the old file"
            ),
            CrawlLogReopenFailed::OldNotFinished { error } => tracing::error!(
                error = %error,
                "SIGHUP: finishing the old crawl log file failed"
            ),
        }
    }
}
