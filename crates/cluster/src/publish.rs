//! Publishing: URL lists routed to shard subjects, and crawl-log records to the events
//! stream. A URL counts as published only once JetStream acknowledged its message (stored,
//! and replicated when the stream has replicas).

use std::collections::{BTreeMap, VecDeque};

use async_nats::jetstream::{self, context::PublishAckFuture};

use crate::broker::{events_subject, url_subject, BoxError, BrokerError};
use crate::message::{encode_record, UrlRecord};
use crate::shard::{RouteError, ShardMap};

/// Largest message body the publisher builds: well under nats-server's default 1 MiB
/// `max_payload`.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Default of [`Publisher::with_max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;

/// Routes URLs to the subjects of their shards.
#[derive(Clone)]
pub struct Publisher {
    js: jetstream::Context,
    shard_map: ShardMap,
    max_url_len: usize,
    max_in_flight: usize,
}

/// What a publish call did.
#[derive(Debug, Default)]
pub struct PublishReport {
    /// URLs in acknowledged messages.
    pub published: usize,
    /// Acknowledged messages.
    pub messages: usize,
    /// URLs per shard (acknowledged).
    pub per_shard: BTreeMap<u32, usize>,
    /// URLs not routed: the frontier would refuse them (not a URL, too long, ...).
    pub unroutable: Vec<RouteError>,
}

/// A publish call that could not get every message acknowledged. `unacked` holds exactly
/// the URLs whose messages were not acknowledged: publish them again after a pause (a
/// message may have been stored before its acknowledgement was lost; the owner's seen-set
/// absorbs such duplicates).
#[derive(Debug, thiserror::Error)]
#[error("{} URL(s) not acknowledged ({} published): {error}", unacked.len(), report.published)]
pub struct PublishFailure {
    pub error: BrokerError,
    pub unacked: Vec<UrlRecord>,
    pub report: PublishReport,
}

struct Pending {
    shard: u32,
    records: Vec<UrlRecord>,
}

impl Publisher {
    /// `max_url_len` as the frontier's (URLs it would refuse are reported, not published).
    pub fn new(js: jetstream::Context, shard_map: ShardMap, max_url_len: usize) -> Publisher {
        Publisher {
            js,
            shard_map,
            max_url_len,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }

    /// Messages one publish call keeps awaiting acknowledgement (at least 1). async-nats
    /// holds one of its context's in-flight permits (`max_ack_inflight`, 5,000 by default)
    /// per unacknowledged publish and blocks until one is free, so a call that held them all,
    /// or several calls sharing a context, would wait on themselves forever: keep this times
    /// the concurrent publish calls below the context's capacity.
    pub fn with_max_in_flight(mut self, max_in_flight: usize) -> Publisher {
        self.max_in_flight = max_in_flight.max(1);
        self
    }

    pub fn shard_map(&self) -> &ShardMap {
        &self.shard_map
    }

    /// Route `records` by shard and publish them, one message per shard (split at
    /// [`MAX_MESSAGE_BYTES`]), all messages in flight at once, then wait for every
    /// acknowledgement.
    pub async fn publish(&self, records: Vec<UrlRecord>) -> Result<PublishReport, PublishFailure> {
        let mut report = PublishReport::default();
        let mut by_shard: BTreeMap<u32, Vec<UrlRecord>> = BTreeMap::new();
        for r in records {
            match self.shard_map.shard_of_url(&r.url, self.max_url_len) {
                Ok(shard) => by_shard.entry(shard).or_default().push(r),
                Err(e) => report.unroutable.push(e),
            }
        }
        let mut in_flight: VecDeque<(Pending, PublishAckFuture)> = VecDeque::new();
        let mut unsent: Vec<UrlRecord> = Vec::new();
        let mut first_error: Option<BrokerError> = None;
        for (shard, records) in by_shard {
            for (body, chunk) in chunks(records) {
                if first_error.is_some() {
                    unsent.extend(chunk);
                    continue;
                }
                if in_flight.len() >= self.max_in_flight {
                    if let Some((pending, ack)) = in_flight.pop_front() {
                        settle(pending, ack, &mut report, &mut unsent, &mut first_error).await;
                    }
                }
                let subject = url_subject(shard);
                match self.js.publish(subject.clone(), body.into()).await {
                    Ok(ack) => in_flight.push_back((
                        Pending {
                            shard,
                            records: chunk,
                        },
                        ack,
                    )),
                    Err(e) => {
                        unsent.extend(chunk);
                        first_error = Some(BrokerError::Publish {
                            subject,
                            source: Box::new(e),
                        });
                    }
                }
            }
        }
        for (pending, ack) in in_flight {
            settle(pending, ack, &mut report, &mut unsent, &mut first_error).await;
        }
        match first_error {
            None => Ok(report),
            Some(error) => Err(PublishFailure {
                error,
                unacked: unsent,
                report,
            }),
        }
    }
}

/// Wait for one message's acknowledgement and account for it.
async fn settle(
    pending: Pending,
    ack: PublishAckFuture,
    report: &mut PublishReport,
    unsent: &mut Vec<UrlRecord>,
    first_error: &mut Option<BrokerError>,
) {
    match ack.await {
        Ok(_) => {
            report.published += pending.records.len();
            report.messages += 1;
            *report.per_shard.entry(pending.shard).or_default() += pending.records.len();
        }
        Err(e) => {
            if first_error.is_none() {
                *first_error = Some(BrokerError::Publish {
                    subject: url_subject(pending.shard),
                    source: Box::new(e),
                });
            }
            unsent.extend(pending.records);
        }
    }
}

/// Split one shard's records into bodies of at most [`MAX_MESSAGE_BYTES`] (a single record
/// bigger than that goes alone; the frontier's URL cap keeps it far below `max_payload`).
fn chunks(records: Vec<UrlRecord>) -> Vec<(Vec<u8>, Vec<UrlRecord>)> {
    let mut out = Vec::new();
    let mut body = Vec::new();
    let mut chunk = Vec::new();
    for r in records {
        let mut line = Vec::new();
        encode_record(&r, &mut line);
        if !chunk.is_empty() && body.len() + line.len() > MAX_MESSAGE_BYTES {
            out.push((std::mem::take(&mut body), std::mem::take(&mut chunk)));
        }
        body.extend_from_slice(&line);
        chunk.push(r);
    }
    if !chunk.is_empty() {
        out.push((body, chunk));
    }
    out
}

/// Publishes this node's crawl-log records to `frontierd.events.<node_id>` (a limits
/// stream: records stay for `events_max_age` whoever reads them).
#[derive(Clone)]
pub struct EventPublisher {
    js: jetstream::Context,
    subject: String,
}

impl EventPublisher {
    pub fn new(js: jetstream::Context, node_id: &str) -> EventPublisher {
        EventPublisher {
            js,
            subject: events_subject(node_id),
        }
    }

    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Publish one record (the daemon's crawl-log JSON line) and wait for its
    /// acknowledgement; returns its stream sequence.
    pub async fn publish(&self, record: Vec<u8>) -> Result<u64, BrokerError> {
        let err = |e: BoxError| BrokerError::Publish {
            subject: self.subject.clone(),
            source: e,
        };
        let ack = self
            .js
            .publish(self.subject.clone(), record.into())
            .await
            .map_err(|e| err(Box::new(e)))?;
        Ok(ack.await.map_err(|e| err(Box::new(e)))?.sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::parse_batch;

    #[test]
    fn chunks_stay_under_the_cap_and_keep_every_record_in_order() {
        let records: Vec<UrlRecord> = (0..20_000)
            .map(|i| UrlRecord::seed(format!("http://h.test/{i}/{}", "p".repeat(40))))
            .collect();
        let parts = chunks(records.clone());
        assert!(parts.len() > 1);
        let mut back = Vec::new();
        for (body, chunk) in parts {
            assert!(body.len() <= MAX_MESSAGE_BYTES);
            let parsed = parse_batch(&body);
            assert_eq!(parsed.records, chunk);
            back.extend(chunk);
        }
        assert_eq!(back, records);
    }
}
