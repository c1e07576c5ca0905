//! A shard's log in the broker (`frontierd.shardlog.<shard>`, stream `FRONTIERD_SHARD_LOG`):
//! what the shard's holder queued and what it finished, so that the shard's next owner
//! knows both even when the holder died for good with its disk.
//!
//! The holder appends, in order: `{"queued": {url record}}` for every URL its frontier
//! queued for one of the shard's hosts (taken from the shard's stream, found on a page, a
//! retry excepted: a retry is the same URL still queued), written **before** the stream
//! message that brought it is acknowledged; and `{"done": [key, ...]}` for pages fetched for
//! good (a final answer), soon after. A URL's key is `xxh3_64` of its canonical form. Also
//! `{"robots": ...}`, a definitive robots.txt answer of one of the shard's origins, and at a
//! hand-off `{"host": ...}`, each handed host's remaining wait.
//!
//! Folded in order ([`fold`]), the log gives the shard's **pending** URLs (queued and not
//! done since) and its **done** keys. A node taking the shard queues the pending ones and
//! drops any URL whose key is done, so nothing the old holder queued is lost and nothing it
//! finished is fetched again (except pages whose `done` entry had not reached the broker);
//! it obeys the robots.txt answers and waits out each host's wait.
//!
//! The log is kept short by [`ShardLog::compact`]: its holder folds it, writes the fold back
//! (pending records, done keys) and purges what the fold covers.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream;
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
/// How long reading a log may wait for each answer of the broker before giving up.
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
    /// Fetched under a recrawl schedule: (key, when the fetch started, unix ms). Due again
    /// one interval after it ([`Folded::revisits`]), not at once.
    Visited(Vec<(u64, u64)>),
    /// A robots.txt answer of one of the shard's origins.
    Robots(RobotsEntry),
    /// A host handed off with the wait it was still owed (gap, crawl-delay, back-off).
    Host(HostWait),
}

/// The wait a host was still owed when its shard was handed off, in ms from the hand-off: a
/// duration, not a time, so no two machines' clocks are compared; its next holder counts it
/// from when it reads the log (later than the hand-off: never shorter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWait {
    /// The politeness key.
    pub key: String,
    pub wait_ms: u64,
}

/// Bodies longer than this are not carried in a log (the next holder fetches robots.txt
/// itself): a JSON-escaped body must stay well inside the broker's 1 MiB message limit.
pub const MAX_LOGGED_ROBOTS_BODY: usize = 128 * 1024;

/// A definitive robots.txt answer (2xx with its rules, or a 4xx: allow all) of an origin, as
/// its shard's holder applied it, so the next holder obeys it from its first request
/// instead of asking again. Answers that only hold a site back for a while (5xx, 429,
/// network errors) are not carried: the next holder asks itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobotsEntry {
    pub origin: String,
    /// When it was answered (unix ms): it expires as it would have at its holder.
    pub fetched_ms: u64,
    pub status: u16,
    /// `Cache-Control: max-age` of a 2xx, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_s: Option<u64>,
    /// The rules of a 2xx (UTF-8 only: a body that is not is not carried, never rewritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl RobotsEntry {
    /// The entry of an answer worth carrying, or None.
    pub fn of(
        origin: &str,
        outcome: &frontier::RobotsFetchOutcome,
        fetched_ms: u64,
    ) -> Option<RobotsEntry> {
        use frontier::RobotsFetchOutcome as O;
        let (status, max_age_s, body) = match outcome {
            O::Success {
                status,
                body,
                max_age,
            } if body.len() <= MAX_LOGGED_ROBOTS_BODY => {
                let body = String::from_utf8(body.clone()).ok()?;
                (*status, max_age.map(|a| a.as_secs()), Some(body))
            }
            O::ClientError { status } if *status != 429 => (*status, None, None),
            _ => return None,
        };
        Some(RobotsEntry {
            origin: origin.to_string(),
            fetched_ms,
            status,
            max_age_s,
            body,
        })
    }

    /// The answer, to apply as of [`RobotsEntry::fetched_ms`].
    pub fn outcome(&self) -> frontier::RobotsFetchOutcome {
        use frontier::RobotsFetchOutcome as O;
        match &self.body {
            Some(body) => O::Success {
                status: self.status,
                body: body.as_bytes().to_vec(),
                max_age: self.max_age_s.map(Duration::from_secs),
            },
            None => O::ClientError {
                status: self.status,
            },
        }
    }
}

/// A shard's log folded: what is still to fetch and what was fetched.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Folded {
    /// Queued and not done since, in the order first queued.
    pub pending: Vec<UrlRecord>,
    /// Keys of URLs fetched for good (and not queued again since).
    pub done: HashSet<u64>,
    /// Fetched under a recrawl schedule (and not queued again since), with when they were
    /// last fetched (unix ms), in the order first queued.
    pub visited: Vec<(UrlRecord, u64)>,
    /// The latest robots.txt answer of each origin that has one.
    pub robots: Vec<RobotsEntry>,
    /// The latest wait of each host handed off since the last compaction.
    pub hosts: Vec<HostWait>,
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
        keys.extend(self.visited.iter().map(|(r, _)| url_key(&r.url)));
        keys
    }

    /// The visited URLs with when each is due again under `recrawl` (unix ms: the last
    /// fetch plus the URL's configured interval, before adaptation: the interval the last
    /// holder had adapted is not carried), or None: `recrawl` does not revisit it (it is
    /// done).
    pub fn revisits(&self, recrawl: &frontier::RecrawlConfig) -> Vec<(UrlRecord, Option<u64>)> {
        self.visited
            .iter()
            .map(|(r, at)| {
                let host = frontier::CanonicalUrl::from_canonical(r.url.clone());
                let due = host
                    .and_then(|c| recrawl.base_interval(c.as_str(), c.host(), None))
                    .map(|interval| at.saturating_add(interval));
                (r.clone(), due)
            })
            .collect()
    }
}

/// Fold a log's entries, oldest first: a `queued` URL is pending until a `done` names it, or
/// a `visited` (then it is visited, with the time of its last fetch); a URL queued again
/// after either is pending again.
pub fn fold(entries: impl IntoIterator<Item = LogEntry>) -> Folded {
    let mut order: Vec<u64> = Vec::new();
    let mut pending: HashMap<u64, UrlRecord> = HashMap::new();
    let mut visited: HashMap<u64, (UrlRecord, u64)> = HashMap::new();
    let mut done = HashSet::new();
    let mut robots: HashMap<String, RobotsEntry> = HashMap::new();
    let mut hosts: HashMap<String, u64> = HashMap::new();
    for e in entries {
        match e {
            LogEntry::Queued(r) => {
                let key = url_key(&r.url);
                done.remove(&key);
                let was_visited = visited.remove(&key).is_some();
                if pending.insert(key, r).is_none() && !was_visited {
                    order.push(key);
                }
            }
            LogEntry::Done(keys) => {
                for key in keys {
                    pending.remove(&key);
                    visited.remove(&key);
                    done.insert(key);
                }
            }
            LogEntry::Visited(keys) => {
                for (key, at) in keys {
                    if let Some(r) = pending.remove(&key) {
                        visited.insert(key, (r, at));
                    } else if let Some(v) = visited.get_mut(&key) {
                        v.1 = v.1.max(at);
                    }
                    // a key never queued in this log: nothing to revisit from it
                }
            }
            LogEntry::Host(h) => {
                hosts.insert(h.key, h.wait_ms);
            }
            LogEntry::Robots(r) => {
                let newer = robots
                    .get(&r.origin)
                    .is_none_or(|had| had.fetched_ms <= r.fetched_ms);
                if newer {
                    robots.insert(r.origin.clone(), r);
                }
            }
        }
    }
    let mut robots: Vec<RobotsEntry> = robots.into_values().collect();
    robots.sort_by(|a, b| a.origin.cmp(&b.origin));
    let mut hosts: Vec<HostWait> = hosts
        .into_iter()
        .map(|(key, wait_ms)| HostWait { key, wait_ms })
        .collect();
    hosts.sort_by(|a, b| a.key.cmp(&b.key));
    let mut in_order = Vec::new();
    let mut visited_in_order = Vec::new();
    for k in order {
        if let Some(r) = pending.remove(&k) {
            in_order.push(r);
        } else if let Some(v) = visited.remove(&k) {
            visited_in_order.push(v);
        }
    }
    Folded {
        pending: in_order,
        done,
        visited: visited_in_order,
        robots,
        hosts,
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
        let (lines, unreadable, last_sequence) = self.read_into(shard, 0, &mut entries).await?;
        Ok(Folded {
            lines,
            unreadable,
            last_sequence,
            ..fold(entries)
        })
    }

    /// The done keys appended to `shard`'s log after sequence `after` (a read's
    /// [`Folded::last_sequence`]), and the last sequence read (`after` if none): entries a
    /// shard's last holder could only append once the broker answered it again.
    pub async fn done_after(
        &self,
        shard: u32,
        after: u64,
    ) -> Result<(HashSet<u64>, u64), BrokerError> {
        let mut entries = Vec::new();
        let (_, _, last) = self.read_into(shard, after, &mut entries).await?;
        let done = entries
            .into_iter()
            .flat_map(|e| match e {
                LogEntry::Done(keys) => keys,
                LogEntry::Visited(keys) => keys.into_iter().map(|(k, _)| k).collect(),
                _ => Vec::new(),
            })
            .collect();
        Ok((done, last.max(after)))
    }

    /// Read the log message by message from the stream's leader (`STREAM.MSG.GET` with
    /// `next_by_subj`): no consumer is made, so a read costs the broker's meta layer nothing
    /// (creating consumers while a server of a three-server broker is down stalled lease
    /// rounds). Each call waits at most [`READ_PATIENCE`].
    async fn read_into(
        &self,
        shard: u32,
        after: u64,
        entries: &mut Vec<LogEntry>,
    ) -> Result<(usize, usize, u64), BrokerError> {
        use async_nats::jetstream::stream::LastRawMessageErrorKind as Kind;
        let subject = shard_log_subject(shard);
        let err = |e: Box<dyn std::error::Error + Send + Sync>| BrokerError::Stream {
            stream: format!("{SHARD_LOG_STREAM} ({subject})"),
            source: e,
        };
        let timed_out = || {
            err(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {READ_PATIENCE:?}"),
            )))
        };
        let stream =
            tokio::time::timeout(READ_PATIENCE, self.js.get_stream_no_info(SHARD_LOG_STREAM))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| err(Box::new(e)))?;
        let (mut lines, mut unreadable, mut last) = (0, 0, after);
        loop {
            let next = stream.get_first_raw_message_by_subject(&subject, last + 1);
            let m = match tokio::time::timeout(READ_PATIENCE, next).await {
                Err(_) => return Err(timed_out()),
                Ok(Err(e)) if e.kind() == Kind::NoMessageFound => break,
                Ok(Err(e)) => return Err(err(Box::new(e))),
                Ok(Ok(m)) => m,
            };
            last = m.sequence;
            let (e, bad) = parse_entries(&m.payload);
            lines += e.len() + bad;
            unreadable += bad;
            entries.extend(e);
        }
        Ok((lines, unreadable, last))
    }

    /// Fold `shard`'s log, write the fold back (robots.txt answers, pending records, the
    /// visited ones with their visits, then the done keys; host waits are left out: they were read by the holder that compacts)
    /// and purge the lines it covers. Only the shard's holder may call it: entries appended by
    /// anyone during the compaction follow the ones read, and are kept.
    pub async fn compact(&self, shard: u32) -> Result<Compacted, BrokerError> {
        let folded = self.read(shard).await?;
        if folded.last_sequence == 0 {
            return Ok(Compacted {
                lines_before: 0,
                lines_after: 0,
            });
        }
        let mut entries: Vec<LogEntry> = folded.robots.into_iter().map(LogEntry::Robots).collect();
        entries.extend(folded.pending.into_iter().map(LogEntry::Queued));
        let visits: Vec<(u64, u64)> = folded
            .visited
            .iter()
            .map(|(r, at)| (url_key(&r.url), *at))
            .collect();
        entries.extend(folded.visited.into_iter().map(|(r, _)| LogEntry::Queued(r)));
        entries.extend(
            visits
                .chunks(DONE_PER_LINE)
                .map(|c| LogEntry::Visited(c.to_vec())),
        );
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
        let wait = |ms| {
            LogEntry::Host(HostWait {
                key: "a.site.test".into(),
                wait_ms: ms,
            })
        };
        assert_eq!(
            fold([wait(900), wait(300)]).hosts,
            [HostWait {
                key: "a.site.test".into(),
                wait_ms: 300
            }],
            "the latest hand-off's wait"
        );
        let f = fold([q(a), d(&[a]), q(a)]);
        assert_eq!(pending(&f), [a], "queued again after done (a recrawl)");
        assert!(f.done.is_empty());
    }

    #[test]
    fn a_visited_url_is_due_one_interval_after_its_last_fetch_not_at_once() {
        let a = "http://a.site.test/";
        let b = "http://a.site.test/b";
        let never = "http://a.site.test/never/x";
        let v = |u: &str, at: u64| LogEntry::Visited(vec![(url_key(u), at)]);
        let f = fold([
            q(a),
            q(b),
            q(never),
            v(a, 1_000),
            v(never, 1_500),
            v(a, 5_000),
        ]);
        assert_eq!(pending(&f), [b]);
        let visited: Vec<(&str, u64)> = f
            .visited
            .iter()
            .map(|(r, at)| (r.url.as_str(), *at))
            .collect();
        assert_eq!(
            visited,
            [(a, 5_000), (never, 1_500)],
            "the last fetch counts"
        );
        assert!(f.known_keys().contains(&url_key(a)));
        let recrawl = frontier::RecrawlConfig {
            default_interval_ms: Some(3_600_000),
            patterns: vec![(frontier::UrlPattern::new("*/never/*"), None)],
            ..frontier::RecrawlConfig::default()
        };
        let revisits = f.revisits(&recrawl);
        let due: Vec<(&str, Option<u64>)> = revisits
            .iter()
            .map(|(r, due)| (r.url.as_str(), *due))
            .collect();
        assert_eq!(
            due,
            [(a, Some(5_000 + 3_600_000)), (never, None)],
            "the configured interval; None: not revisited"
        );
        // queued again (a submission) after a visit: pending, in its first-queued place
        let f = fold([q(a), q(b), v(a, 1_000), q(a)]);
        assert_eq!(pending(&f), [a, b]);
        assert!(f.visited.is_empty());
        // done for good after a visit: done
        let f = fold([q(a), v(a, 1_000), d(&[a])]);
        assert!(f.visited.is_empty() && f.done.contains(&url_key(a)));
        // a visit of a URL this log never queued carries nothing
        assert!(fold([v(a, 1_000)]).visited.is_empty());
    }

    #[test]
    fn the_latest_definitive_robots_answer_of_each_origin_is_kept() {
        use frontier::RobotsFetchOutcome as O;
        let rules = |body: &str, max_age| O::Success {
            status: 200,
            body: body.as_bytes().to_vec(),
            max_age,
        };
        let o = "http://a.site.test";
        let old = RobotsEntry::of(o, &rules("User-agent: *\nDisallow: /old", None), 1_000);
        let new = RobotsEntry::of(
            o,
            &rules("Crawl-delay: 2", Some(Duration::from_secs(60))),
            2_000,
        );
        let gone = RobotsEntry::of("http://b.site.test", &O::ClientError { status: 404 }, 1_500);
        let f = fold(
            [new.clone(), old, gone.clone()]
                .into_iter()
                .map(|e| LogEntry::Robots(e.unwrap())),
        );
        assert_eq!(f.robots, [new.clone().unwrap(), gone.unwrap()]);
        assert_eq!(
            new.unwrap().outcome(),
            rules("Crawl-delay: 2", Some(Duration::from_secs(60)))
        );
        // only what holds: not a 5xx, a 429, a body that is not UTF-8 or too long
        let held = O::ServerError {
            status: 503,
            retry_after: None,
        };
        assert!(RobotsEntry::of(o, &held, 1).is_none());
        assert!(RobotsEntry::of(o, &O::ClientError { status: 429 }, 1).is_none());
        let latin1 = O::Success {
            status: 200,
            body: vec![b'#', 0xe9],
            max_age: None,
        };
        assert!(RobotsEntry::of(o, &latin1, 1).is_none());
        let long = "#".repeat(MAX_LOGGED_ROBOTS_BODY + 1);
        assert!(RobotsEntry::of(o, &rules(&long, None), 1).is_none());
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
