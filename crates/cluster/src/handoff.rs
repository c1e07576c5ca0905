//! A shard's queued URLs handed to its next owner: the hosts of shards this node no longer
//! holds (given up, lost, or released at a stop) have their queued URLs published to their
//! shard subjects (marked `handoff`, so the next owner queues them even if its seen-set knows
//! them), and only once the broker acknowledged them are they taken out of the frontier
//! here (`Frontier::take_queued`). A host with a request in flight waits for the next sweep
//! (its outcome may queue a retry). A crash between the publish and the take publishes them
//! again at the next sweep; `handoff` URLs are queued even when seen, so such a URL may be
//! fetched twice (at least once, never lost).
//!
//! Also the wait the next owner owes these hosts: the longest of their next-allowed times
//! (gap, crawl-delay, back-off) from now, so a clean move never makes a host's gap shorter.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use frontier::Frontier;

use crate::journal::Journal;
use crate::keeper::LeaseKeeper;
use crate::message::UrlRecord;
use crate::ownership::Ownership;
use crate::publish::{PublishFailure, Publisher};
use crate::shard_log::{HostWait, LogEntry};

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HandOff {
    /// Hosts whose queued URLs went to their shards' next owners.
    pub hosts: usize,
    /// URLs published (acknowledged) and deleted here.
    pub urls: usize,
    /// Hosts left for the next sweep: a request of theirs is in flight.
    pub busy_hosts: usize,
    /// The longest wait any handed-off host still had (its next-allowed time from now).
    pub hold: Duration,
}

/// A sweep that could not finish; nothing unacknowledged was deleted.
#[derive(Debug, thiserror::Error)]
pub enum HandOffError {
    #[error("reading the queues of {key}: {source}")]
    Frontier {
        key: String,
        source: frontier::FrontierError,
    },
    #[error("handing off {hosts} host(s): {source}")]
    Publish {
        hosts: usize,
        source: Box<PublishFailure>,
    },
    #[error("the log of shard {shard}: {source}")]
    Log {
        shard: u32,
        source: crate::BrokerError,
    },
    #[error("hand-off task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Hand off every host in memory whose shard `ownership` does not hold and that `pick`
/// takes (by shard). `now_ms`: the frontier's clock (unix ms). With the shard logs
/// (`journal`), URLs a shard's log already has (pending or done) are only taken out here:
/// the next holder has them from the log.
pub async fn hand_off(
    frontier: &Arc<Frontier>,
    publisher: &Publisher,
    ownership: &Arc<Ownership>,
    journal: Option<&Journal>,
    pick: impl Fn(u32) -> bool + Send + 'static,
    now_ms: u64,
) -> Result<HandOff, HandOffError> {
    let (f, o) = (frontier.clone(), ownership.clone());
    // the hosts and their queued entries, read off the runtime threads
    let (mut out, hosts, waits) = tokio::task::spawn_blocking(move || {
        let map = o.shard_map();
        let mut out = HandOff::default();
        let mut hosts: Vec<(String, Vec<UrlRecord>)> = Vec::new();
        let mut waits: Vec<HostWait> = Vec::new();
        let candidates = f.hosts_in_memory_where(|key| {
            let s = map.shard_of_key(key);
            !o.holds(s) && pick(s)
        });
        for (key, rec) in &candidates {
            let (key, rec) = (key.clone(), *rec);
            if rec.in_flight > 0 {
                out.busy_hosts += 1;
                continue;
            }
            let entries = f
                .queued_entries(&key)
                .map_err(|source| HandOffError::Frontier {
                    key: key.clone(),
                    source,
                })?;
            let wait = rec
                .next_allowed_ms
                .max(rec.backoff_until_ms)
                .saturating_sub(now_ms);
            out.hold = out.hold.max(Duration::from_millis(wait));
            if wait > 0 {
                waits.push(HostWait {
                    key: key.clone(),
                    wait_ms: wait,
                });
            }
            let records = entries.into_iter().map(UrlRecord::handed_off).collect();
            hosts.push((key, records));
        }
        Ok::<_, HandOffError>((out, hosts, waits))
    })
    .await??;
    if hosts.is_empty() {
        return Ok(out);
    }
    if let Some(j) = journal {
        // each host's own wait goes to its next holder (`hold_hosts_for`), instead of the
        // longest of them as the whole shard's hold
        log_waits(j, ownership, waits).await?;
        out.hold = Duration::ZERO;
    }
    let logged = logged_urls(journal, ownership, &hosts).await?;
    let records: Vec<UrlRecord> = hosts
        .iter()
        .flat_map(|(_, r)| r.iter().cloned())
        .filter(|r| !logged.contains(&r.url))
        .collect();
    let published =
        match records.is_empty() {
            true => crate::PublishReport::default(),
            false => publisher.publish(records.clone()).await.map_err(|source| {
                HandOffError::Publish {
                    hosts: hosts.len(),
                    source: Box::new(source),
                }
            })?,
        };
    out.urls = published.published + logged.len();
    out.hosts = hosts.len();
    // acknowledged: now they go from here
    let unroutable: HashSet<&str> = published
        .unroutable
        .iter()
        .map(|e| e.url.as_str())
        .collect();
    let gone: HashSet<String> = records
        .into_iter()
        .map(|r| r.url)
        .filter(|u| !unroutable.contains(u.as_str()))
        .chain(logged)
        .collect();
    let f = frontier.clone();
    tokio::task::spawn_blocking(move || take_handed_off(&f, &hosts, &gone, now_ms)).await??;
    Ok(out)
}

/// Take the handed-off hosts' URLs out of the frontier; anything taken that did not go
/// (`gone`: published to the broker, or already in the shard's log) is queued here again,
/// for the next sweep.
///
/// Also when this node took a host's shard back since its queue was read: what was sent
/// comes back through this node's own consumer, and what the log has is queued again from
/// the log, which waits for this sweep ([`crate::Node::handoffs`]).
fn take_handed_off(
    f: &Frontier,
    hosts: &[(String, Vec<UrlRecord>)],
    gone: &HashSet<String>,
    now_ms: u64,
) -> Result<(), HandOffError> {
    for (key, _) in hosts {
        let frontier_error = |source| HandOffError::Frontier {
            key: key.clone(),
            source,
        };
        let taken = f.take_queued(key).map_err(frontier_error)?;
        let back: Vec<frontier::EnqueueItem> = taken
            .into_iter()
            .filter(|e| !gone.contains(&e.url))
            .map(|e| frontier::EnqueueItem::from(UrlRecord::handed_off(e)))
            .collect();
        if !back.is_empty() {
            f.enqueue_again(&back, now_ms).map_err(frontier_error)?;
        }
    }
    Ok(())
}

/// The pending URLs of `shard`'s log that this node does not have queued or in flight
/// already, in their order. A node whose lease on a shard ran out while the broker could
/// not take its hand-off (a server of the broker dying) keeps the shard's queued URLs; when
/// it takes the shard back, its log's pending URLs are those same URLs (and the ones it is
/// fetching, their done entries not appended yet), and queued again (as they must be, seen
/// or not) each would be fetched twice. Only hosts in memory are looked at: a node that
/// held the shard moments ago has them there; one that did not has nothing queued for them.
pub fn pending_not_queued_here(
    frontier: &Frontier,
    map: &crate::ShardMap,
    shard: u32,
    pending: Vec<UrlRecord>,
) -> Result<Vec<UrlRecord>, frontier::FrontierError> {
    // the URLs' keys, as the log's done keys are: a shard's whole queue may be here
    let mut queued: HashSet<u64> = HashSet::new();
    for (key, _) in frontier.hosts_in_memory_where(|key| map.shard_of_key(key) == shard) {
        let (waiting, in_flight) = frontier.host_stored_urls(&key)?;
        queued.extend(waiting.iter().chain(&in_flight).map(|u| crate::url_key(u)));
    }
    if queued.is_empty() {
        return Ok(pending);
    }
    Ok(pending
        .into_iter()
        .filter(|r| !queued.contains(&crate::url_key(&r.url)))
        .collect())
}

/// Append each host's remaining wait to its shard's log.
async fn log_waits(
    journal: &Journal,
    ownership: &Ownership,
    waits: Vec<HostWait>,
) -> Result<(), HandOffError> {
    let map = ownership.shard_map();
    let mut by_shard: BTreeMap<u32, Vec<LogEntry>> = BTreeMap::new();
    for w in waits {
        let shard = map.shard_of_key(&w.key);
        by_shard.entry(shard).or_default().push(LogEntry::Host(w));
    }
    for (shard, entries) in by_shard {
        journal
            .log
            .append(shard, &entries)
            .await
            .map_err(|source| HandOffError::Log { shard, source })?;
    }
    Ok(())
}

/// The URLs of `hosts` their shards' logs already have (pending or done).
async fn logged_urls(
    journal: Option<&Journal>,
    ownership: &Ownership,
    hosts: &[(String, Vec<UrlRecord>)],
) -> Result<HashSet<String>, HandOffError> {
    let mut logged = HashSet::new();
    let Some(journal) = journal else {
        return Ok(logged);
    };
    let map = ownership.shard_map();
    let mut by_shard: BTreeMap<u32, Vec<&UrlRecord>> = BTreeMap::new();
    for (key, records) in hosts {
        by_shard
            .entry(map.shard_of_key(key))
            .or_default()
            .extend(records);
    }
    for (shard, records) in by_shard {
        let known = journal
            .log
            .read(shard)
            .await
            .map_err(|source| HandOffError::Log { shard, source })?
            .known_keys();
        logged.extend(
            records
                .into_iter()
                .filter(|r| known.contains(&crate::url_key(&r.url)))
                .map(|r| r.url.clone()),
        );
    }
    Ok(logged)
}

/// What [`Handoffs::sweep`] or [`hand_off_all`] did.
#[derive(Debug, Default)]
pub struct SweepReport {
    /// Each hand-off that moved URLs (or left busy hosts for later).
    pub handoffs: Vec<HandOff>,
    /// Shards released (by [`hand_off_all`]) or ready to be (by [`Handoffs::sweep`]), each
    /// with the hold its next owner waits.
    pub released: Vec<(u32, Duration)>,
    /// What failed (retried at the next sweep; at the stop, the leases run out instead).
    pub errors: Vec<String>,
}

impl SweepReport {
    fn note(&mut self, h: Result<HandOff, HandOffError>) -> Option<HandOff> {
        match h {
            Ok(h) => {
                if h.hosts > 0 || h.busy_hosts > 0 {
                    self.handoffs.push(h.clone());
                }
                Some(h)
            }
            Err(e) => {
                self.errors.push(e.to_string());
                None
            }
        }
    }
}

/// Shards given up and not yet released, each with the longest wait its hosts were owed.
#[derive(Debug, Default)]
pub struct Handoffs {
    releasing: BTreeMap<u32, Duration>,
}

impl Handoffs {
    /// Shards the keeper's round gave up: hand them off from the next sweep on.
    pub fn give_up(&mut self, shards: &[u32]) {
        self.releasing
            .extend(shards.iter().map(|&s| (s, Duration::ZERO)));
    }

    /// One sweep: the hosts of shards lost without a hand-off go to their current owners,
    /// and those of shards given up go to the broker; a shard given up none of whose hosts is
    /// left here is returned in `released`, with its hold, for the caller to release
    /// ([`LeaseKeeper::release`]; the sweep does not hold the keeper while it publishes).
    pub async fn sweep(
        &mut self,
        frontier: &Arc<Frontier>,
        publisher: &Publisher,
        ownership: &Arc<Ownership>,
        journal: Option<&Journal>,
        now_ms: u64,
    ) -> SweepReport {
        let mut report = SweepReport::default();
        let giving_up: Vec<u32> = self.releasing.keys().copied().collect();
        let others = move |s: u32| !giving_up.contains(&s);
        report.note(hand_off(frontier, publisher, ownership, journal, others, now_ms).await);
        for (shard, hold) in self.releasing.clone() {
            let one = move |s: u32| s == shard;
            let h = hand_off(frontier, publisher, ownership, journal, one, now_ms).await;
            let Some(h) = report.note(h) else { continue };
            let hold = hold.max(h.hold);
            if h.busy_hosts > 0 {
                self.releasing.insert(shard, hold);
                continue;
            }
            self.releasing.remove(&shard);
            report.released.push((shard, hold));
        }
        report
    }
}

/// The stop, after the last completion: every shard closed, handed off and released, and
/// this node out of the member list, so the others take its shards at once.
pub async fn hand_off_all(
    frontier: &Arc<Frontier>,
    publisher: &Publisher,
    journal: Option<&Journal>,
    mut keeper: LeaseKeeper,
    now_ms: u64,
) -> SweepReport {
    let mut report = SweepReport::default();
    let shards = keeper.release_all();
    let ownership = keeper.ownership();
    let all = |_| true;
    let h = report.note(hand_off(frontier, publisher, &ownership, journal, all, now_ms).await);
    if let Some(h) = h.filter(|h| h.busy_hosts == 0) {
        for shard in shards {
            match keeper.release(shard, h.hold).await {
                Ok(()) => report.released.push((shard, h.hold)),
                Err(e) => report.errors.push(e.to_string()),
            }
        }
    }
    if let Err(e) = keeper.leave().await {
        report.errors.push(e.to_string());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use frontier::{EnqueueItem, FrontierConfig};

    const NOW: u64 = 1_700_000_000_000;

    /// A host's URLs that went (in its shard's log, or published) leave the frontier; one
    /// that arrived after the sweep read the queue stays, for the next sweep.
    #[test]
    fn what_went_leaves_and_what_arrived_meanwhile_stays() {
        let dir = tempfile::tempdir().unwrap();
        let f = Frontier::open(FrontierConfig::new(dir.path())).unwrap();
        let urls: Vec<String> = (0..4).map(|i| format!("http://a.test/p{i}")).collect();
        let items: Vec<EnqueueItem> = urls[..3].iter().map(EnqueueItem::seed).collect();
        f.enqueue_items(&items, NOW).unwrap();
        let key = "a.test".to_string();
        let records = f
            .queued_entries(&key)
            .unwrap()
            .into_iter()
            .map(UrlRecord::handed_off)
            .collect();
        // p3 arrives after the read
        f.enqueue_items(&[EnqueueItem::seed(&urls[3])], NOW)
            .unwrap();
        // p0 and p1 in the shard's log, p2 published
        let gone = HashSet::from([urls[0].clone(), urls[1].clone(), urls[2].clone()]);
        take_handed_off(&f, &[(key, records)], &gone, NOW).unwrap();
        let left: Vec<String> = f
            .queued_entries("a.test")
            .unwrap()
            .into_iter()
            .map(|e| e.url)
            .collect();
        assert_eq!(left, ["http://a.test/p3"]);
    }

    /// A shard taken back by the node that still has its URLs queued (its hand-off never
    /// went): the log's pending URLs it has are not queued a second time, the others are,
    /// and each URL is leased once.
    #[test]
    fn a_shard_taken_back_queues_only_what_is_not_queued_here() {
        let dir = tempfile::tempdir().unwrap();
        let f = Frontier::open(FrontierConfig::new(dir.path())).unwrap();
        let map = crate::ShardMap::new(1, frontier::PolitenessKeyMode::default()).unwrap();
        let urls: Vec<String> = (0..5).map(|i| format!("http://a.test/p{i}")).collect();
        let items: Vec<EnqueueItem> = urls[..3].iter().map(EnqueueItem::seed).collect();
        f.enqueue_items(&items, NOW).unwrap();
        // p0 in flight here (its robots.txt answered first)
        let robots = match f.next(NOW).unwrap() {
            Some(frontier::WorkItem::Robots(r)) => r,
            other => panic!("{other:?}"),
        };
        let none = frontier::RobotsFetchOutcome::ClientError { status: 404 };
        f.complete_robots(&robots, &none, 1, NOW).unwrap();
        // a minute on: past the host's gap after its robots.txt
        let in_flight = match f.next(NOW + 60_000).unwrap() {
            Some(frontier::WorkItem::Page(p)) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(in_flight.url, urls[0]);
        // the log: all five pending (p0's done entry not appended yet)
        let pending: Vec<UrlRecord> = urls.iter().map(UrlRecord::seed).collect();
        let fresh = pending_not_queued_here(&f, &map, 0, pending.clone()).unwrap();
        let fresh_urls: Vec<&str> = fresh.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(fresh_urls, ["http://a.test/p3", "http://a.test/p4"]);
        // another shard's hosts are not looked at: everything is new to shard 1
        let two = crate::ShardMap::new(2, frontier::PolitenessKeyMode::default()).unwrap();
        let other = 1 - two.shard_of_key("a.test");
        assert_eq!(
            pending_not_queued_here(&f, &two, other, pending)
                .unwrap()
                .len(),
            5
        );
        // queued as the replay queues them: seen or not
        let again: Vec<EnqueueItem> = fresh.into_iter().map(EnqueueItem::from).collect();
        f.enqueue_again(&again, NOW).unwrap();
        let done = frontier::PageOutcome::Done { response_ms: 1 };
        f.complete(in_flight.id, done, NOW + 60_000).unwrap();
        let mut leased = vec![in_flight.url.clone()];
        // a minute a step: past any politeness gap
        for step in 2..40 {
            let now = NOW + step * 60_000;
            match f.next(now).unwrap() {
                Some(frontier::WorkItem::Page(p)) => {
                    leased.push(p.url.clone());
                    let done = frontier::PageOutcome::Done { response_ms: 1 };
                    f.complete(p.id, done, now).unwrap();
                }
                Some(frontier::WorkItem::Robots(r)) => {
                    let none = frontier::RobotsFetchOutcome::ClientError { status: 404 };
                    f.complete_robots(&r, &none, 1, now).unwrap();
                }
                None => {}
            }
        }
        leased.sort();
        assert_eq!(leased, urls, "each URL once");
    }
}
