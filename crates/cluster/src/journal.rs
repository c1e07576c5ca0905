//! This node's side of the shard logs (`shard_log.rs`), with shard leases only: entries
//! waiting to be appended (links queued here, pages fetched for good), appended in the
//! order they happened, a page's done entry only once the links it found for other nodes
//! left the outbox; and per shard held, the done keys its log had when this node took
//! it, so a URL the last holder fetched is neither queued again here nor fetched if this
//! node still had it queued (from its own store, after a restart), and those appended
//! late (the last holder could not reach the broker in time), so a URL of them already
//! queued here is not fetched.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::broker::BrokerError;
use crate::message::UrlRecord;
use crate::ownership::Ownership;
use crate::shard::ShardMap;
use crate::shard_log::{url_key, LogEntry, RobotsEntry, ShardLog};

/// Entries waiting beyond this are appended at once, not at the next tick.
const JOURNAL_KICK_AT: usize = 4_096;

/// What [`Journal::append_waiting`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Entries appended.
    pub entries: usize,
    /// Done entries still waiting for their pages' links to leave the outbox.
    pub held_back: usize,
}

/// A page fetched, waiting for its log: (outbox barrier, shard, key, when it was fetched
/// under a recrawl schedule).
type Fetched = (u64, u32, u64, Option<u64>);

/// Entries taken for an append and not yet stored, per shard in order: put back first in
/// the waiting list when dropped (an error, or the append's future dropped).
struct Unstored<'a> {
    waiting: &'a Mutex<Vec<(u32, LogEntry)>>,
    shards: std::collections::VecDeque<(u32, Vec<LogEntry>)>,
}

impl Drop for Unstored<'_> {
    fn drop(&mut self) {
        if self.shards.is_empty() {
            return;
        }
        let back: Vec<(u32, LogEntry)> = self
            .shards
            .drain(..)
            .flat_map(|(s, es)| es.into_iter().map(move |e| (s, e)))
            .collect();
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let later = std::mem::take(&mut *w);
        *w = back;
        w.extend(later);
    }
}

/// The shard logs as this node writes and reads them.
pub struct Journal {
    pub log: ShardLog,
    map: ShardMap,
    max_url_len: usize,
    /// Entries not yet appended, oldest first.
    waiting: Mutex<Vec<(u32, LogEntry)>>,
    /// Pages fetched for good not yet appended: (outbox barrier, shard, key, when fetched
    /// under a recrawl schedule), oldest first.
    /// A page's done entry waits until the links it found for other nodes left the outbox
    /// (their sequence numbers are below the barrier): a node that dies with its disk must
    /// not have marked done a page whose links only it held.
    done_waiting: Mutex<std::collections::VecDeque<Fetched>>,
    /// One append run at a time, so entries reach each log in the order they happened.
    appending: tokio::sync::Mutex<()>,
    /// Many entries wait: append now.
    pub kick: Notify,
    /// Per shard held: the done keys of its log when this node took it.
    inherited: Mutex<HashMap<u32, HashSet<u64>>>,
    /// Whether `inherited` holds any key (the check before each fetch costs nothing
    /// otherwise).
    any_inherited: AtomicBool,
    /// Per shard whose log is watched for late done entries: the pages this node fetched
    /// since it read the log, whose done entries are this node's own, not late ones.
    own_watched: Mutex<HashMap<u32, HashSet<u64>>>,
    /// Whether `own_watched` names any shard (the note per page costs nothing otherwise).
    any_watched: AtomicBool,
}

impl Journal {
    pub fn new(log: ShardLog, map: ShardMap, max_url_len: usize) -> Journal {
        Journal {
            log,
            map,
            max_url_len,
            waiting: Mutex::new(Vec::new()),
            done_waiting: Mutex::new(std::collections::VecDeque::new()),
            appending: tokio::sync::Mutex::new(()),
            kick: Notify::new(),
            inherited: Mutex::new(HashMap::new()),
            any_inherited: AtomicBool::new(false),
            own_watched: Mutex::new(HashMap::new()),
            any_watched: AtomicBool::new(false),
        }
    }

    /// The canonical form and shard of a URL (None: it does not canonicalize; the frontier
    /// refuses it anyway).
    fn place(&self, url: &str) -> Option<(String, u32)> {
        let (c, shard) = self.map.place(url, self.max_url_len).ok()?;
        Some((c.as_str().to_string(), shard))
    }

    fn push(&self, entries: impl IntoIterator<Item = (u32, LogEntry)>) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        w.extend(entries);
        if w.len() >= JOURNAL_KICK_AT {
            self.kick.notify_one();
        }
    }

    /// URLs this node's frontier queued (found on its pages), for their shards' logs.
    pub fn queued(&self, records: impl IntoIterator<Item = UrlRecord>) {
        let entries: Vec<(u32, LogEntry)> = records
            .into_iter()
            .filter_map(|mut r| {
                let (url, shard) = self.place(&r.url)?;
                r.url = url;
                r.handoff = false;
                Some((shard, LogEntry::Queued(r)))
            })
            .collect();
        self.push(entries);
    }

    /// A page fetched for good; `outbox_next`: the outbox's next sequence number now (its
    /// links for other nodes are below it).
    pub fn done(&self, url: &str, outbox_next: u64) {
        self.fetched(url, outbox_next, None);
    }

    /// A page fetched under a recrawl schedule, at `fetched_ms` (unix ms): its next holder
    /// queues it for its next visit, not at once. `outbox_next` as for [`Journal::done`].
    pub fn visited(&self, url: &str, outbox_next: u64, fetched_ms: u64) {
        self.fetched(url, outbox_next, Some(fetched_ms));
    }

    fn fetched(&self, url: &str, outbox_next: u64, visited_ms: Option<u64>) {
        if let Some((url, shard)) = self.place(url) {
            let key = url_key(&url);
            if self.any_watched.load(Ordering::Acquire) {
                let mut own = self.own_watched.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(keys) = own.get_mut(&shard) {
                    keys.insert(key);
                }
            }
            let mut d = self.done_waiting.lock().unwrap_or_else(|e| e.into_inner());
            d.push_back((outbox_next, shard, key, visited_ms));
        }
    }

    /// A robots.txt answer of an origin, applied here at `now_ms` (unix ms), if it is one
    /// worth carrying ([`RobotsEntry::of`]).
    pub fn robots(&self, origin: &str, outcome: &frontier::RobotsFetchOutcome, now_ms: u64) {
        let Some(entry) = RobotsEntry::of(origin, outcome, now_ms) else {
            return;
        };
        if let Some((_, shard)) = self.place(origin) {
            self.push([(shard, LogEntry::Robots(entry))]);
        }
    }

    /// Append every waiting entry, in order, each to its shard's log; on an error, or when
    /// the call is dropped before it returns (cancel-safe), the entries not known to be
    /// stored wait again, first. Returns how many were appended.
    ///
    /// Queued URLs of a shard not held inside its fence are not appended: its next holder
    /// may have read the log already, and the URLs are still queued here, so the hand-off
    /// sweep publishes them to the shard's stream instead (done keys are appended: a late
    /// one only spares a later holder a fetch).
    ///
    /// Done entries go after the others, and only those whose page's links for other nodes
    /// left the outbox (every sequence number below `outbox_first`, the oldest still in it);
    /// the rest wait ([`Appended::held_back`]).
    pub async fn append_waiting(
        &self,
        ownership: &Ownership,
        outbox_first: u64,
    ) -> Result<Appended, BrokerError> {
        let _one = self.appending.lock().await;
        let mut taken =
            std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        let held_back = {
            let mut d = self.done_waiting.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(&(barrier, shard, key, visited)) = d.front() {
                if barrier > outbox_first {
                    break;
                }
                d.pop_front();
                let entry = match visited {
                    None => LogEntry::Done(vec![key]),
                    Some(at) => LogEntry::Visited(vec![(key, at)]),
                };
                taken.push((shard, entry));
            }
            d.len()
        };
        if taken.is_empty() {
            return Ok(Appended {
                entries: 0,
                held_back,
            });
        }
        let taken: Vec<(u32, LogEntry)> = taken
            .into_iter()
            .filter(|(s, e)| {
                matches!(e, LogEntry::Done(_) | LogEntry::Visited(_)) || ownership.fenced_in(*s)
            })
            .collect();
        let n = taken.len();
        let mut by_shard: Vec<(u32, Vec<LogEntry>)> = Vec::new();
        let mut index: HashMap<u32, usize> = HashMap::new();
        for (shard, e) in taken {
            let i = *index.entry(shard).or_insert_with(|| {
                by_shard.push((shard, Vec::new()));
                by_shard.len() - 1
            });
            let entries = &mut by_shard[i].1;
            // consecutive done (visited) keys of a shard go as one line
            match (entries.last_mut(), e) {
                (Some(LogEntry::Done(keys)), LogEntry::Done(more)) => keys.extend(more),
                (Some(LogEntry::Visited(keys)), LogEntry::Visited(more)) => keys.extend(more),
                (_, e) => entries.push(e),
            }
        }
        // what is not known to be stored waits again, first, also when this call is
        // dropped at an await (the daemon's stop aborts the task appending): appending twice
        // what was stored is harmless, the fold is idempotent
        let mut unstored = Unstored {
            waiting: &self.waiting,
            shards: by_shard.into(),
        };
        while let Some((shard, entries)) = unstored.shards.front() {
            self.log.append(*shard, entries).await?;
            unstored.shards.pop_front();
        }
        Ok(Appended {
            entries: n,
            held_back,
        })
    }

    /// A shard taken: remember the done keys of its log ([`crate::Folded::done`], with the visited
    /// URLs this node does not revisit).
    pub fn inherit(&self, shard: u32, done: HashSet<u64>) {
        let mut inherited = self.inherited.lock().unwrap_or_else(|e| e.into_inner());
        inherited.insert(shard, done);
        self.any_inherited
            .store(inherited.values().any(|d| !d.is_empty()), Ordering::Release);
    }

    /// `shard`'s log is watched for late done entries from now on (until
    /// [`Journal::end_late_watch`]): the pages this node fetches meanwhile are noted, so
    /// that their done entries are not taken for late ones of the last holder.
    pub fn start_late_watch(&self, shard: u32) {
        let mut own = self.own_watched.lock().unwrap_or_else(|e| e.into_inner());
        own.insert(shard, HashSet::new());
        self.any_watched.store(true, Ordering::Release);
    }

    /// The late-done watch of `shard` is over.
    pub fn end_late_watch(&self, shard: u32) {
        let mut own = self.own_watched.lock().unwrap_or_else(|e| e.into_inner());
        own.remove(&shard);
        self.any_watched.store(!own.is_empty(), Ordering::Release);
    }

    /// Done keys that reached `shard`'s log after this node read it: kept with the
    /// inherited ones, and a URL of them queued here is not fetched
    /// ([`Journal::fetched_elsewhere`]). This node's own done entries (pages fetched here
    /// while the log is watched) are not late ones. Returns how many were new.
    pub fn inherit_late(&self, shard: u32, keys: HashSet<u64>) -> usize {
        let keys: Vec<u64> = {
            let own = self.own_watched.lock().unwrap_or_else(|e| e.into_inner());
            match own.get(&shard) {
                Some(mine) => keys.into_iter().filter(|k| !mine.contains(k)).collect(),
                None => keys.into_iter().collect(),
            }
        };
        let mut inherited = self.inherited.lock().unwrap_or_else(|e| e.into_inner());
        let Some(known) = inherited.get_mut(&shard) else {
            // not (or no longer) held here
            return 0;
        };
        let new = keys.into_iter().filter(|k| known.insert(*k)).count();
        if new > 0 {
            self.any_inherited.store(true, Ordering::Release);
        }
        new
    }

    /// Whether `url`, about to be fetched, is one its shard's log says the last holder
    /// fetched: a done entry the log had when this node took the shard (the URL was queued
    /// here from before: this node's own store, after a restart, kept it) or one appended
    /// late, whose URL this node had queued meanwhile.
    pub fn fetched_elsewhere(&self, url: &str) -> bool {
        if !self.any_inherited.load(Ordering::Acquire) {
            return false;
        }
        let Some((url, shard)) = self.place(url) else {
            return false;
        };
        let key = url_key(&url);
        let inherited = self.inherited.lock().unwrap_or_else(|e| e.into_inner());
        inherited
            .get(&shard)
            .is_some_and(|done| done.contains(&key))
    }

    /// A shard lost or given up: forget its done keys.
    pub fn forget(&self, shard: u32) {
        {
            let mut inherited = self.inherited.lock().unwrap_or_else(|e| e.into_inner());
            inherited.remove(&shard);
            self.any_inherited
                .store(inherited.values().any(|d| !d.is_empty()), Ordering::Release);
        }
        self.end_late_watch(shard);
    }

    /// Take out of `items` the URLs a shard's last holder fetched (its log said so when this
    /// node took the shard); returns how many.
    pub fn drop_done<T>(&self, items: &mut Vec<T>, url: impl Fn(&T) -> &str) -> usize {
        let inherited = self.inherited.lock().unwrap_or_else(|e| e.into_inner());
        if inherited.values().all(HashSet::is_empty) {
            return 0;
        }
        let before = items.len();
        items.retain(|i| match self.place(url(i)) {
            Some((url, shard)) => !inherited
                .get(&shard)
                .is_some_and(|done| done.contains(&url_key(&url))),
            None => true,
        });
        before - items.len()
    }
}
