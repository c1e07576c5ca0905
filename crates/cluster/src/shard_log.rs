//! A shard's log in the broker (`frontierd.shardlog.<shard>`, stream `FRONTIERD_SHARD_LOG`):
//! what the shard's holder queued and what it finished, so that the shard's next owner
//! knows both even when the holder died for good with its disk.
//!
//! The holder appends, in order: `{"queued": {url record}}` for every URL its frontier
//! queued for one of the shard's hosts (taken from the shard's stream, found on a page, a
//! retry excepted: a retry is the same URL still queued), written **before** the stream
//! message that brought it is acknowledged; and `{"done": [key, ...]}` for pages fetched for
//! good (a final answer), soon after. A URL's key is `xxh3_64` of its canonical form.
//!
//! Folded in order ([`fold`]), the log gives the shard's **pending** URLs (queued and not
//! done since) and its **done** keys. A node taking the shard queues the pending ones and
//! drops any URL whose key is done, so nothing the old holder queued is lost and nothing it
//! finished is fetched again (except pages whose `done` entry had not reached the broker).
//!
//! The log is kept short by [`ShardLog::compact`]: its holder folds it, writes the fold back
//! (pending records, done keys) and purges what the fold covers.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, consumer::DeliverPolicy};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::broker::BrokerError;
use crate::message::UrlRecord;
use crate::publish::MAX_MESSAGE_BYTES;

/// The stream of every shard's log (limits retention: kept until compacted).
pub const SHARD_LOG_STREAM: &str = "FRONTIERD_SHARD_LOG";

/// The subject of `shard`'s log.
pub fn shard_log_subject(shard: u32) -> String {
    format!("frontierd.shardlog.{shard}")
}

/// Done keys per line of a compacted log (a line stays far below a message).
const DONE_PER_LINE: usize = 8_192;
/// Messages read per pull request while reading a log.
const READ_BATCH: usize = 1_024;
/// How long reading a log may wait for the broker's next messages before giving up.
const READ_PATIENCE: Duration = Duration::from_secs(10);

/// The key of a canonical URL in a shard's log.
pub fn url_key(canonical_url: &str) -> u64 {
    xxh3_64(canonical_url.as_bytes())
}

/// One line of a shard's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum LogEntry {
    /// Queued by the shard's holder (its URL canonical).
    Queued(UrlRecord),
    /// Fetched for good: the keys ([`url_key`]) of their canonical URLs.
    Done(Vec<u64>),
}

/// A shard's log folded: what is still to fetch and what was fetched.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Folded {
    /// Queued and not done since, in the order first queued.
    pub pending: Vec<UrlRecord>,
    /// Keys of URLs fetched for good (and not queued again since).
    pub done: HashSet<u64>,
    /// Lines read (unreadable ones included).
    pub lines: usize,
    /// Lines that could not be read (counted, skipped: a log written by a newer version).
    pub unreadable: usize,
    /// The stream sequence of the last message read (0: the log is empty).
    pub last_sequence: u64,
}

impl Folded {
    /// The keys the log knows, pending or done: its next holder has them (a URL queued
    /// here whose key is not among them reached no log).
    pub fn known_keys(&self) -> HashSet<u64> {
        let mut keys = self.done.clone();
        keys.extend(self.pending.iter().map(|r| url_key(&r.url)));
        keys
    }
}

/// Fold a log's entries, oldest first: a `queued` URL is pending until a `done` names it; a
/// URL queued again after it was done (a recrawl) is pending again.
pub fn fold(entries: impl IntoIterator<Item = LogEntry>) -> Folded {
    let mut order: Vec<u64> = Vec::new();
    let mut pending: HashMap<u64, UrlRecord> = HashMap::new();
    let mut done = HashSet::new();
    for e in entries {
        match e {
            LogEntry::Queued(r) => {
                let key = url_key(&r.url);
                done.remove(&key);
                if pending.insert(key, r).is_none() {
                    order.push(key);
                }
            }
            LogEntry::Done(keys) => {
                for key in keys {
                    pending.remove(&key);
                    done.insert(key);
                }
            }
        }
    }
    let pending = order
        .into_iter()
        .filter_map(|k| pending.remove(&k))
        .collect();
    Folded {
        pending,
        done,
        ..Folded::default()
    }
}

/// Encode entries as message bodies of at most [`MAX_MESSAGE_BYTES`] (one JSON line each).
pub fn encode_entries(entries: &[LogEntry]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    for e in entries {
        let mut line = match serde_json::to_vec(e) {
            Ok(l) => l,
            Err(_) => continue, // plain strings and numbers: cannot fail
        };
        line.push(b'\n');
        if !body.is_empty() && body.len() + line.len() > MAX_MESSAGE_BYTES {
            out.push(std::mem::take(&mut body));
        }
        body.extend_from_slice(&line);
    }
    if !body.is_empty() {
        out.push(body);
    }
    out
}

/// Parse a message body: its entries, and how many lines could not be read.
pub fn parse_entries(body: &[u8]) -> (Vec<LogEntry>, usize) {
    let mut entries = Vec::new();
    let mut unreadable = 0;
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice(line) {
            Ok(e) => entries.push(e),
            Err(_) => unreadable += 1,
        }
    }
    (entries, unreadable)
}

/// What [`ShardLog::compact`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// Lines before, and written back.
    pub lines_before: usize,
    pub lines_after: usize,
}

/// The shard logs in the broker.
#[derive(Clone)]
pub struct ShardLog {
    js: jetstream::Context,
}

impl ShardLog {
    pub fn new(js: jetstream::Context) -> ShardLog {
        ShardLog { js }
    }

    /// Append entries to `shard`'s log; on `Ok` the broker stored every one (on `Err` some
    /// may be stored: appending them again is harmless, a fold is idempotent).
    pub async fn append(&self, shard: u32, entries: &[LogEntry]) -> Result<(), BrokerError> {
        let subject = shard_log_subject(shard);
        let err = |e: Box<dyn std::error::Error + Send + Sync>| BrokerError::Publish {
            subject: subject.clone(),
            source: e,
        };
        let mut acks = Vec::new();
        for body in encode_entries(entries) {
            let ack = self
                .js
                .publish(subject.clone(), body.into())
                .await
                .map_err(|e| err(Box::new(e)))?;
            acks.push(ack);
        }
        for ack in acks {
            ack.await.map_err(|e| err(Box::new(e)))?;
        }
        Ok(())
    }

    /// Read `shard`'s whole log and fold it.
    pub async fn read(&self, shard: u32) -> Result<Folded, BrokerError> {
        let mut entries = Vec::new();
        let (lines, unreadable, last_sequence) = self.read_into(shard, &mut entries).await?;
        Ok(Folded {
            lines,
            unreadable,
            last_sequence,
            ..fold(entries)
        })
    }

    async fn read_into(
        &self,
        shard: u32,
        entries: &mut Vec<LogEntry>,
    ) -> Result<(usize, usize, u64), BrokerError> {
        let subject = shard_log_subject(shard);
        let err = |e: Box<dyn std::error::Error + Send + Sync>| BrokerError::Stream {
            stream: format!("{SHARD_LOG_STREAM} ({subject})"),
            source: e,
        };
        let stream = self
            .js
            .get_stream(SHARD_LOG_STREAM)
            .await
            .map_err(|e| err(Box::new(e)))?;
        let mut consumer: jetstream::consumer::PullConsumer = stream
            .create_consumer(pull::Config {
                filter_subject: subject.clone(),
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::None,
                inactive_threshold: Duration::from_secs(60),
                ..Default::default()
            })
            .await
            .map_err(|e| err(Box::new(e)))?;
        let mut left = consumer
            .info()
            .await
            .map_err(|e| err(Box::new(e)))?
            .num_pending;
        let (mut lines, mut unreadable, mut last) = (0, 0, 0);
        while left > 0 {
            let want = (left as usize).min(READ_BATCH);
            let mut batch = consumer
                .batch()
                .max_messages(want)
                .expires(READ_PATIENCE)
                .messages()
                .await
                .map_err(|e| err(Box::new(e)))?;
            let mut got = 0u64;
            while let Some(m) = batch.next().await {
                let m = m.map_err(&err)?;
                got += 1;
                if let Ok(info) = m.info() {
                    last = info.stream_sequence;
                }
                let (e, bad) = parse_entries(&m.payload);
                lines += e.len() + bad;
                unreadable += bad;
                entries.extend(e);
            }
            if got == 0 {
                return Err(err(Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{left} message(s) of the log not delivered within {READ_PATIENCE:?}"),
                ))));
            }
            left = left.saturating_sub(got);
        }
        let name = consumer.cached_info().name.clone();
        // an ephemeral consumer goes by itself after its inactive threshold; deleting it now
        // is tidiness only
        let _ = stream.delete_consumer(&name).await;
        Ok((lines, unreadable, last))
    }

    /// Fold `shard`'s log, write the fold back (pending records, then the done keys) and
    /// purge the lines it covers. Only the shard's holder may call it: entries appended by
    /// anyone during the compaction follow the ones read, and are kept.
    pub async fn compact(&self, shard: u32) -> Result<Compacted, BrokerError> {
        let folded = self.read(shard).await?;
        if folded.last_sequence == 0 {
            return Ok(Compacted {
                lines_before: 0,
                lines_after: 0,
            });
        }
        let mut entries: Vec<LogEntry> = folded.pending.into_iter().map(LogEntry::Queued).collect();
        let mut done: Vec<u64> = folded.done.into_iter().collect();
        done.sort_unstable();
        entries.extend(
            done.chunks(DONE_PER_LINE)
                .map(|c| LogEntry::Done(c.to_vec())),
        );
        let lines_after = entries.len();
        self.append(shard, &entries).await?;
        let subject = shard_log_subject(shard);
        let stream =
            self.js
                .get_stream(SHARD_LOG_STREAM)
                .await
                .map_err(|e| BrokerError::Stream {
                    stream: SHARD_LOG_STREAM.into(),
                    source: Box::new(e),
                })?;
        stream
            .purge()
            .filter(subject)
            .sequence(folded.last_sequence + 1)
            .await
            .map_err(|e| BrokerError::Stream {
                stream: SHARD_LOG_STREAM.into(),
                source: Box::new(e),
            })?;
        Ok(Compacted {
            lines_before: folded.lines,
            lines_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(url: &str) -> LogEntry {
        LogEntry::Queued(UrlRecord::seed(url))
    }

    fn d(urls: &[&str]) -> LogEntry {
        LogEntry::Done(urls.iter().map(|u| url_key(u)).collect())
    }

    fn pending(f: &Folded) -> Vec<&str> {
        f.pending.iter().map(|r| r.url.as_str()).collect()
    }

    #[test]
    fn a_url_is_pending_from_queued_until_done() {
        let a = "http://a.site.test/";
        let b = "http://a.site.test/b";
        let c = "http://a.site.test/c";
        let f = fold([q(a), q(b), d(&[a]), q(c), q(b)]);
        assert_eq!(pending(&f), [b, c], "first-queued order, no duplicates");
        assert!(f.done.contains(&url_key(a)));
        let known = f.known_keys();
        assert!([a, b, c].iter().all(|u| known.contains(&url_key(u))));
        assert!(!known.contains(&url_key("http://a.site.test/x")));
        let f = fold([q(a), d(&[a]), q(a)]);
        assert_eq!(pending(&f), [a], "queued again after done (a recrawl)");
        assert!(f.done.is_empty());
    }

    #[test]
    fn entries_survive_encoding_in_bodies_under_the_message_cap() {
        let mut entries: Vec<LogEntry> = (0..5_000)
            .map(|i| q(&format!("http://h{i}.site.test/{}", "p".repeat(100))))
            .collect();
        entries.push(LogEntry::Done((0..20_000).collect()));
        let bodies = encode_entries(&entries);
        assert!(bodies.len() > 1);
        assert!(bodies.iter().all(|b| b.len() <= MAX_MESSAGE_BYTES));
        let mut back = Vec::new();
        for b in &bodies {
            let (e, bad) = parse_entries(b);
            assert_eq!(bad, 0);
            back.extend(e);
        }
        assert_eq!(back, entries);
    }

    #[test]
    fn unreadable_lines_are_counted_not_fatal() {
        let body = b"{\"queued\":{\"url\":\"http://a.site.test/\"}}\nnot json\n{\"later\":1}\n";
        let (e, bad) = parse_entries(body);
        assert_eq!(e, [q("http://a.site.test/")]);
        assert_eq!(bad, 2);
    }
}
