//! The frontier's public face: open, inspect, pause.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use crate::census::RobotsCensus;
use crate::config::FrontierConfig;
use crate::crawl::canonicalize_stored;
use crate::error::{FrontierError, Result};
use crate::events::{EventQueue, FrontierEvent, FrontierStats};
use crate::sched::rate::TokenBucket;
use crate::sched::robots_gate::{CachedOrigin, RobotsCache, RobotsEngine};
use crate::sched::scheduler::Scheduler;
use crate::seen::{IntakeLog, SeenSet};
use crate::store::checkpoint::Settling;
use crate::store::codec::DropRecord;
use crate::store::commit::GroupCommit;
use crate::store::journal::{Journal, UNSETTLED_MAX};
use crate::store::keys;
use crate::store::reclaim::Reclaimer;
use crate::store::sled::SledStore;
use crate::store::{Batch, Store};
use crate::work::url_hash;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::SeedableRng;

pub(crate) struct Inner {
    /// The scheduler: hosts in memory, the ready heap, IP groups, robots.txt slots, the
    /// global quota, pauses, clients' controls, lease deadlines.
    pub(crate) sched: Scheduler,
    pub(crate) robots: RobotsCache,
    pub(crate) stats: FrontierStats,
    /// Origins per robots state (built at the first question).
    pub(crate) census: RobotsCensus,
    /// The last [`Frontier::queue_gauges`] walk, reused while it is young enough.
    pub(crate) gauges: Option<crate::QueueGauges>,
    /// Events not yet taken by [`Frontier::poll_event`] (bounded).
    pub(crate) events: EventQueue,
    pub(crate) journal: Journal,
    pub(crate) seen: SeenSet,
    /// URLs an external fetcher reported done for good.
    pub(crate) done: crate::done::DoneSet,
    pub(crate) intake: IntakeLog,
    /// The intake log's fold under way, if any (fold.rs).
    pub(crate) folding: Option<crate::fold::Folding>,
    /// The packs and the hosts pointing into each (pack.rs).
    pub(crate) packs: crate::pack::Packs,
    /// Whether any recrawl record may exist (the configuration schedules URLs, or one
    /// was written: `keys::RECRAWL_IN_USE`): otherwise completions skip decoding the
    /// entries of successful fetches.
    pub(crate) revisit_records: bool,
    /// No due-index key is earlier than this (a lower bound; 0: look): the due index is
    /// scanned only once it may hold a due URL.
    pub(crate) next_due_ms: u64,
    /// Hosts whose address is asked for before their first robots.txt fetch, not yet
    /// taken by [`Frontier::take_resolves`].
    pub(crate) resolves: Vec<crate::work::ResolveRequest>,
    /// Crawls (url-frontier's crawlID): deletions, limits, completions (`c` keys).
    pub(crate) crawls: crate::crawl::CrawlBook,
}

impl Inner {
    /// The parts settling hosts after a call needs ([`Settling`]).
    pub(crate) fn settling(&mut self) -> Settling<'_> {
        Settling {
            sched: &mut self.sched,
            journal: &mut self.journal,
            events: &mut self.events,
            packs: &mut self.packs,
        }
    }

    pub(crate) fn push_drop(&mut self, rec: DropRecord) {
        self.events.push(FrontierEvent::Dropped(rec));
    }
}

/// Drop acknowledgements per store apply ([`Frontier::drops_logged`]).
pub const DROPS_LOGGED_PER_APPLY: usize = 256;

/// The frontier. All methods take `now_ms` (unix milliseconds) from the caller.
pub struct Frontier {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) cfg: FrontierConfig,
    pub(crate) commit: GroupCommit,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) reclaimer: Reclaimer,
    /// Whether any client metadata may be stored: until then GetURLs skips a store read per
    /// URL it hands out looking for none.
    pub(crate) metadata_in_use: std::sync::atomic::AtomicBool,
}

impl Drop for Frontier {
    /// A clean close writes what dispatches left unsettled, so the next open finds the
    /// leases in flight as they were (a crash loses them, as it loses any unflushed write:
    /// their URLs are served again).
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        if inner.journal.unsettled.is_empty() {
            return;
        }
        let (mut batch, mut dead) = (crate::store::Batch::new(), Vec::new());
        inner
            .settling()
            .settle_hosts(Vec::new(), &mut batch, &mut dead);
        if self.store.apply(batch).is_ok() && self.store.flush().is_ok() {
            self.reclaimer.delete(dead);
        }
    }
}

impl Frontier {
    /// Open (or create) the frontier at `cfg.path` with sled and the robots-policy backend.
    pub fn open(cfg: FrontierConfig) -> Result<Frontier> {
        Self::open_with(cfg, RobotsEngine::default())
    }

    /// Open with a given robots engine (its state-machine timing).
    pub fn open_with(cfg: FrontierConfig, robots: RobotsEngine) -> Result<Frontier> {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(&cfg.path, &cfg.sled)?);
        Self::open_store(cfg, store, robots)
    }

    /// Open on any [`Store`]. Every lease left in flight returns to the head of its queue.
    pub fn open_store(
        cfg: FrontierConfig,
        store: Arc<dyn Store>,
        robots: RobotsEngine,
    ) -> Result<Frontier> {
        let next_host_id = match store.get(keys::NEXT_HOST_ID)? {
            Some(v) if v.len() == 8 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(&v);
                u64::from_le_bytes(a)
            }
            _ => 1,
        };
        // completions look for recrawl records only when some may exist
        let revisit_records = cfg.recrawl.schedules_any()
            || store.contains(keys::RECRAWL_IN_USE)?
            || store.scan_prefix(b"N").next().is_some();
        let quota = cfg
            .global_rate_per_sec
            .map(|rate| TokenBucket::new(rate.get(), cfg.global_burst.unwrap_or(rate).get()));
        let rng = match cfg.seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_entropy(),
        };
        let inner = Inner {
            sched: Scheduler::new(&cfg, next_host_id, quota, rng),
            revisit_records,
            next_due_ms: 0,
            crawls: Default::default(),
            resolves: Vec::new(),
            robots: RobotsCache::new(Arc::new(robots), &cfg.user_agent, cfg.robots_cache_origins),
            stats: FrontierStats::default(),
            events: EventQueue::default(),
            census: RobotsCensus::default(),
            gauges: None,
            journal: Journal {
                next_seq: 0,
                first_seq: 0,
                bytes: 0,
                dirty: HashSet::new(),
                unsettled: HashSet::new(),
                evicted: HashMap::new(),
                min_bytes: cfg.journal_checkpoint_bytes,
                slice: cfg.journal_checkpoint_slice.max(1),
                pending: VecDeque::new(),
                pending_upto_seq: 0,
                pending_hosts: 0,
                pending_journal_bytes: 0,
            },
            done: Default::default(),
            seen: SeenSet {
                starts: vec![0],
                recent: Default::default(),
                folding: Vec::new(),
                legacy: false,
            },
            intake: IntakeLog {
                next_seq: 0,
                first_seq: 0,
                bytes: 0,
                next_fold: 0,
                entries: 0,
                hosts: 0,
                last_logged_ms: 0,
            },
            folding: None,
            packs: crate::pack::Packs::default(),
        };
        let metadata_in_use = store.first_in_range(b"m", b"n")?.is_some().into();
        let f = Frontier {
            metadata_in_use,
            reclaimer: Reclaimer::start(store.clone()),
            store,
            cfg,
            commit: GroupCommit::default(),
            inner: Mutex::new(inner),
        };
        f.recover()?;
        Ok(f)
    }

    /// After an open: hold every host for its politeness gap from `now_ms`, as if a request
    /// to it had just ended. A crash (SIGKILL, power loss) loses what was not yet flushed,
    /// among it the completions of requests answered just before it and the gaps they
    /// started; a daemon restarted within such a gap fetched those hosts again at once
    /// (docs/politeness.md, "After a restart"). Every IP group waits its `ip_delay` from
    /// `now_ms` too. Hosts loaded from the store later (URLs arriving for a host with none
    /// queued) are held the same way. Call once, before the first dispatch.
    pub fn hold_hosts_after_restart(&self, now_ms: u64) {
        self.inner.lock().sched.hold_after_restart(now_ms);
    }

    /// From now on, ask `gate` whether a host may be visited at all before handing
    /// anything of it out (None: no gate). A host the gate closes keeps its queue and its
    /// politeness state and is asked again when the gate says.
    pub fn set_dispatch_gate(&self, gate: Option<Arc<dyn crate::DispatchGate>>) {
        self.inner.lock().sched.set_gate(gate);
    }

    /// The store's first failed write, if one failed: nothing more can be made durable
    /// until it is opened again (see [`Store::write_failure`]).
    pub fn store_write_failure(&self) -> Option<String> {
        self.store.write_failure()
    }

    /// The configuration.
    pub fn config(&self) -> &FrontierConfig {
        &self.cfg
    }

    /// Counters since open.
    pub fn stats(&self) -> FrontierStats {
        let inner = self.inner.lock();
        let mut stats = inner.stats.clone();
        stats.ip_waits = inner.sched.ip_waits();
        stats
    }

    /// Number of hosts held in memory (hosts with queued or in-flight work).
    pub fn hosts_in_memory(&self) -> usize {
        self.inner.lock().sched.host_count()
    }

    /// Flushes performed by group commit.
    pub fn flushes(&self) -> u64 {
        self.commit.flushes()
    }

    /// Bytes the store uses on disk.
    pub fn size_on_disk(&self) -> Result<u64> {
        Ok(self.store.size_on_disk()?)
    }

    /// Earliest instant at which some host becomes ready (None if nothing is queued).
    pub fn next_ready_at(&self) -> Option<u64> {
        self.inner.lock().sched.next_ready_at()
    }

    // ---------------------------------------------------------------- IP groups

    /// A fetch for host `host_id` that started at `started_ms` connected to `ip`: the host
    /// belongs to that address's IP group from now on (its requests in flight count
    /// against the address, and the address's gap runs from `started_ms`). Stored with the
    /// host's record, by the next call that writes it (at the latest the lease's
    /// completion). Returns the address the host had before when it changed (None if
    /// unchanged, or the host is not in memory).
    pub fn note_address(
        &self,
        host_id: u64,
        ip: IpAddr,
        started_ms: u64,
    ) -> Result<Option<Option<IpAddr>>> {
        let changed = self.note_addresses(&[(host_id, ip, started_ms)])?;
        Ok(changed.into_iter().next().map(|(_, before, _)| before))
    }

    /// [`Frontier::note_address`] for several fetches under one lock and one write:
    /// (host id, address, start), in the order they ended. Returns the hosts whose address
    /// changed: (host id, before, now).
    pub fn note_addresses(
        &self,
        reports: &[(u64, IpAddr, u64)],
    ) -> Result<Vec<(u64, Option<IpAddr>, IpAddr)>> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut changed = Vec::new();
        for &(host_id, ip, started_ms) in reports {
            if let Some((_, before)) = inner.sched.handle_address(host_id, ip, started_ms) {
                changed.push((host_id, before, ip));
            }
        }
        // the address is part of the host's record: left unsettled like a lease, it is
        // journaled with the host's next change, which costs no write of its own
        let ids = changed.iter().map(|&(id, _, _)| id);
        if inner.journal.unsettled.len() + changed.len() <= UNSETTLED_MAX {
            inner.journal.unsettled.extend(ids);
        } else {
            let ids: Vec<u64> = ids.collect();
            let mut batch = Batch::new();
            inner.settling().journal_hosts(&ids, &mut batch);
            self.store.apply(batch)?;
            self.commit.written();
        }
        Ok(changed)
    }

    /// Whether a URL (any spelling) is in the seen-set.
    /// Whether an external fetcher reported `url` (stored form, as [`Frontier::is_seen`])
    /// done for good: its lease completed with no next fetch date, and it was not queued
    /// again since ([`Frontier::enqueue_again`]).
    pub fn fetcher_done(&self, url: &str) -> Result<bool> {
        match canonicalize_stored(url, self.cfg.max_url_len) {
            Err(_) => Ok(false),
            Ok((_, stored)) => {
                let hash = url_hash(&stored);
                let recent = self.inner.lock().done.recent_mark(hash);
                match recent {
                    Some(done) => Ok(done),
                    None => crate::done::DoneSet::stored_contains(self.store.as_ref(), hash),
                }
            }
        }
    }

    pub fn is_seen(&self, url: &str) -> Result<bool> {
        match canonicalize_stored(url, self.cfg.max_url_len) {
            Err(_) => Ok(false),
            Ok((_, stored)) => {
                let hash = url_hash(&stored);
                let inner = self.inner.lock();
                Ok(self
                    .seen_hashes(&inner, std::iter::once(hash))?
                    .contains(&hash))
            }
        }
    }

    /// The oldest event not yet taken (drops, robots transitions, leases returned at
    /// open), if any. Bounded: past [`crate::events::MAX_EVENTS`] untaken events the
    /// newest are not kept (the store still has every [`DropRecord`]).
    pub fn poll_event(&self) -> Option<FrontierEvent> {
        self.inner.lock().events.pop()
    }

    /// Every event not yet taken, oldest first.
    pub fn drain_events(&self) -> Vec<FrontierEvent> {
        self.inner.lock().events.drain()
    }

    /// The caller has durably logged these drops (from [`FrontierEvent::Dropped`]): they are
    /// not reported again after a restart. Drops taken but never acknowledged (a crash
    /// between the take and the log) are reported again at the next open.
    ///
    /// Written [`DROPS_LOGGED_PER_APPLY`] at a time: sled keeps a copy of every node one
    /// apply changes until it returns (45,000 at once held 140 MB).
    pub fn drops_logged(&self, drops: &[DropRecord]) -> Result<()> {
        for slice in drops.chunks(DROPS_LOGGED_PER_APPLY) {
            let mut batch = Batch::new();
            for d in slice {
                batch.del(keys::unlogged(url_hash(&d.url)));
            }
            batch.cut();
            self.store.apply(batch)?;
        }
        Ok(())
    }

    /// Stop handing out URLs of a politeness key (in flight ones finish). Durable before it
    /// returns: the pause survives a restart. Returns false if it was already paused.
    pub fn pause(&self, key: &str) -> Result<bool> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let added = inner.sched.pause(key);
        if added {
            let mut batch = Batch::new();
            batch.put(keys::paused(key), Vec::new());
            self.store.apply(batch)?;
            self.store.flush()?;
        }
        Ok(added)
    }

    /// Undo [`Frontier::pause`], durably. Returns false if it was not paused.
    pub fn resume(&self, key: &str) -> Result<bool> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let removed = inner.sched.resume(key);
        if removed {
            let mut batch = Batch::new();
            batch.del(keys::paused(key));
            self.store.apply(batch)?;
            self.store.flush()?;
        }
        Ok(removed)
    }

    /// Whether a politeness key is paused.
    pub fn is_paused(&self, key: &str) -> bool {
        self.inner.lock().sched.is_paused(key)
    }
}

impl Frontier {
    /// The origin's robots state, from the cache or else decoded from its stored record.
    pub(crate) fn cached_robots<'a>(
        &self,
        inner: &'a mut Inner,
        origin: &str,
    ) -> Result<&'a mut CachedOrigin> {
        let store = &self.store;
        inner.robots.entry(origin, || {
            store
                .get(&keys::robots(origin))
                .map_err(FrontierError::from)
        })
    }
}

impl Frontier {
    /// The address of a host as its stored record `value` holds it; a record written
    /// before addresses moved into it leaves the host's `I` key to say.
    pub(crate) fn stored_address(&self, key: &str, value: &[u8]) -> Result<Option<IpAddr>> {
        match crate::store::codec::HostRecord::decode_address(value) {
            Some(ip) => Ok(Some(ip)),
            None => self.legacy_address(key),
        }
    }

    /// The address in a host's `I` key, where versions before addresses moved into host
    /// records kept it.
    pub(crate) fn legacy_address(&self, key: &str) -> Result<Option<IpAddr>> {
        Ok(self
            .store
            .get(&keys::address(key))?
            .and_then(|v| parse_address(key, &v)))
    }
}

/// An `I` key's value (the address as text, as older versions stored it); a bad one is
/// logged and ignored (the host is then its own group until its next fetch reports the
/// address again).
pub(crate) fn parse_address(key: &str, v: &[u8]) -> Option<IpAddr> {
    match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) {
        Some(ip) => Some(ip),
        None => {
            tracing::warn!(host = key, "stored IP address does not parse; ignored");
            None
        }
    }
}

/// The host of `scheme://host[:port]` (empty if it does not parse).
pub(crate) fn host_of_origin(origin: &str) -> String {
    url::Url::parse(origin)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}
