//! How many origins are in each robots state, kept in memory: built from the store at the
//! first question, then updated by every robots outcome applied, and for the origins whose
//! state changes with time alone (a copy expiring, a failure run reaching fallback) by
//! decoding just those when their instant has passed. Nothing is held until it is asked.
//!
//! One entry per origin the store has a robots record for, so at a million hosts it is
//! among the daemon's larger tables: each origin's text lives once in an arena and its
//! entry is 12 bytes (under 56 bytes an origin in all at a million, against about 130 with
//! a `HashMap<Arc<str>, (&str, u64)>`).

use std::collections::BTreeMap;

use hashbrown::HashTable;
use robots_policy::state::{RobotsStateKind, RobotsStatus};

use crate::sched::robots_gate::OriginState;

/// One origin: where its text is in the arena, its state at the last look and the second
/// from which time alone may change it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Position in the arena: chunk `offset >> CHUNK_BITS`, byte `offset & CHUNK_MASK`.
    offset: u32,
    /// Unix seconds, rounded up (u32::MAX: never).
    changes_at_s: u32,
    len: u16,
    kind: u8,
}

/// The arena grows a chunk at a time (no copy of all origins when it grows); an origin
/// never straddles two.
const CHUNK_BITS: u32 = 20;
const CHUNK_BYTES: usize = 1 << CHUNK_BITS;
const CHUNK_MASK: u32 = (1 << CHUNK_BITS) - 1;
/// Chunks an `offset` can address (4 GiB of origin text).
const MAX_CHUNKS: usize = 1 << (32 - CHUNK_BITS);

/// The census. Empty and not `ready` until the first question.
#[derive(Debug, Default)]
pub(crate) struct RobotsCensus {
    /// Every origin's text, back to back in chunks of `CHUNK_BYTES`.
    arena: Vec<Vec<u8>>,
    slots: HashTable<Slot>,
    /// Origins per state, indexed like [`RobotsStateKind::ALL`].
    counts: [u64; RobotsStateKind::ALL.len()],
    /// No origin changes by time alone before this second (a lower bound).
    next_change_s: u32,
    /// Origins not counted: longer than 64 KiB, or past 4 GiB of origin text.
    uncounted: u64,
    pub(crate) ready: bool,
}

/// The second (rounded up) after `now_ms` at which `status` changes by time alone
/// (u32::MAX: never, or past 2106).
fn changes_at_s(status: &RobotsStatus, now_ms: u64) -> u32 {
    [status.expires_at, status.fallback_at]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .filter(|&t| t > now_ms)
        .min()
        .map_or(u32::MAX, |ms| {
            u32::try_from(ms.div_ceil(1000)).unwrap_or(u32::MAX)
        })
}

fn hash(origin: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(origin)
}

fn kind_index(kind: RobotsStateKind) -> u8 {
    RobotsStateKind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(0) as u8
}

fn text<'a>(arena: &'a [Vec<u8>], s: &Slot) -> &'a [u8] {
    let at = (s.offset & CHUNK_MASK) as usize;
    arena
        .get((s.offset >> CHUNK_BITS) as usize)
        .and_then(|c| c.get(at..at + s.len as usize))
        .unwrap_or_default()
}

/// Append `bytes` to the arena; its offset, or None when the arena is full.
fn push_text(arena: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Option<u32> {
    // against CHUNK_BYTES, not the capacity (which may be more): offsets index bytes of
    // a chunk in CHUNK_BITS
    let fits = arena
        .last()
        .is_some_and(|c| c.len() + bytes.len() <= CHUNK_BYTES);
    if !fits {
        if arena.len() >= MAX_CHUNKS {
            return None;
        }
        arena.push(Vec::with_capacity(CHUNK_BYTES.max(bytes.len())));
    }
    let chunk = arena.len() - 1;
    let last = arena.last_mut()?;
    let at = last.len();
    last.extend_from_slice(bytes);
    u32::try_from((chunk << CHUNK_BITS) | at).ok()
}

impl RobotsCensus {
    /// Record `origin`'s new state as of `now_ms` (a no-op until the census is built).
    pub(crate) fn note(&mut self, origin: &str, state: &OriginState, now_ms: u64) {
        if !self.ready {
            return;
        }
        self.set(origin, &state.status(now_ms), now_ms);
    }

    /// Record `origin`'s status while building or refreshing.
    pub(crate) fn set(&mut self, origin: &str, status: &RobotsStatus, now_ms: u64) {
        let kind = kind_index(status.kind);
        let at = changes_at_s(status, now_ms);
        let bytes = origin.as_bytes();
        let h = hash(bytes);
        let Self { arena, slots, .. } = self;
        match slots.find_mut(h, |s| text(arena, s) == bytes) {
            Some(slot) => {
                let old = std::mem::replace(&mut slot.kind, kind);
                slot.changes_at_s = at;
                self.counts[old as usize] = self.counts[old as usize].saturating_sub(1);
            }
            None => {
                // an origin is at most a host name (253 bytes), a scheme and a port; the
                // limit only guards the arena's layout
                let Ok(len) = u16::try_from(bytes.len()) else {
                    self.uncounted += 1;
                    return;
                };
                if bytes.len() > CHUNK_BYTES {
                    self.uncounted += 1;
                    return;
                }
                let Some(offset) = push_text(arena, bytes) else {
                    self.uncounted += 1;
                    return;
                };
                let slot = Slot {
                    offset,
                    changes_at_s: at,
                    len,
                    kind,
                };
                let arena = &*arena;
                slots.insert_unique(h, slot, |s| hash(text(arena, s)));
            }
        }
        self.counts[kind as usize] += 1;
        self.next_change_s = self.next_change_s.min(at);
    }

    /// Origins whose state may have changed by time alone at `now_ms`. The table is walked
    /// only once the earliest such instant has passed.
    pub(crate) fn due(&mut self, now_ms: u64) -> Vec<String> {
        let now_s = u32::try_from(now_ms / 1000).unwrap_or(u32::MAX);
        if now_s < self.next_change_s {
            return Vec::new();
        }
        let mut next = u32::MAX;
        let mut out = Vec::new();
        for s in self.slots.iter() {
            if s.changes_at_s <= now_s {
                out.push(String::from_utf8_lossy(text(&self.arena, s)).into_owned());
            }
            next = next.min(s.changes_at_s);
        }
        // due ones included: one the caller does not set again is due at the next call too
        self.next_change_s = next;
        out
    }

    /// `origin`'s state at the last look (None: no robots record, or not counted).
    pub(crate) fn kind_of(&self, origin: &str) -> Option<RobotsStateKind> {
        let bytes = origin.as_bytes();
        let slot = self
            .slots
            .find(hash(bytes), |s| text(&self.arena, s) == bytes)?;
        RobotsStateKind::ALL.get(slot.kind as usize).copied()
    }

    /// Every origin counted, with its state at the last look (in no particular order).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&str, RobotsStateKind)> + '_ {
        self.slots.iter().filter_map(|s| {
            let origin = std::str::from_utf8(text(&self.arena, s)).ok()?;
            Some((origin, *RobotsStateKind::ALL.get(s.kind as usize)?))
        })
    }

    /// Origins per state (states with none left out).
    pub(crate) fn counts(&self) -> BTreeMap<&'static str, u64> {
        RobotsStateKind::ALL
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.as_str(), n))
            .collect()
    }

    /// Origins in the census, and those left out (too long, or past its arena's limit).
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, u64) {
        (self.slots.len(), self.uncounted)
    }

    /// Heap bytes the census holds (its arena and table, by capacity).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.arena.iter().map(Vec::capacity).sum::<usize>() + self.slots.allocation_size()
    }
}

#[cfg(test)]
mod tests {
    use robots_policy::state::{RobotsStatus, UnixMillis};

    use super::*;

    fn status(kind: RobotsStateKind, expires_at_ms: Option<u64>) -> RobotsStatus {
        RobotsStatus {
            kind,
            since: None,
            fallback_at: None,
            expires_at: expires_at_ms.map(UnixMillis),
            next_fetch_at: UnixMillis(0),
            attempt: 0,
            last_fetch: None,
            copy_fetched_at: None,
            copy_body_len: None,
        }
    }

    fn census() -> RobotsCensus {
        RobotsCensus {
            ready: true,
            ..RobotsCensus::default()
        }
    }

    /// Counts follow each origin's latest state, a state change moves one count, and the
    /// origins due are those whose instant has passed, each named in full.
    #[test]
    fn counts_follow_the_latest_state_of_each_origin() {
        let mut c = census();
        c.set(
            "http://a.test",
            &status(RobotsStateKind::Fresh, Some(100_000)),
            0,
        );
        c.set(
            "https://b.test:8443",
            &status(RobotsStateKind::Fresh, Some(200_000)),
            0,
        );
        c.set(
            "http://c.test",
            &status(RobotsStateKind::ServerErrorDisallow, None),
            0,
        );
        assert_eq!(c.counts().get("fresh"), Some(&2));
        assert!(c.due(0).is_empty());
        c.set(
            "http://a.test",
            &status(RobotsStateKind::Stale, None),
            150_000,
        );
        let counts = c.counts();
        assert_eq!(counts.get("fresh"), Some(&1), "{counts:?}");
        assert_eq!(counts.get("stale"), Some(&1), "{counts:?}");
        assert_eq!(counts.values().sum::<u64>(), 3);
        assert_eq!(c.len(), (3, 0));
        assert!(c.due(199_999).is_empty());
        assert_eq!(c.due(200_000), vec!["https://b.test:8443".to_string()]);
        // until it is set again it stays due
        assert_eq!(c.due(201_000).len(), 1);
        c.set(
            "https://b.test:8443",
            &status(RobotsStateKind::Stale, None),
            201_000,
        );
        assert!(c.due(10_000_000).is_empty());
        assert_eq!(c.counts().get("stale"), Some(&2));
    }

    /// Origins far past the arena's first chunk read back whole, and one too long to
    /// count is left out, not cut.
    #[test]
    fn origins_across_chunks_read_back_whole() {
        let mut c = census();
        let long = format!("http://{}.test", "x".repeat(70_000));
        c.set(&long, &status(RobotsStateKind::Fresh, Some(5_000)), 0);
        let n = 60_000;
        for i in 0..n {
            c.set(
                &format!("https://host-{i}.example"),
                &status(RobotsStateKind::Fresh, Some(5_000)),
                0,
            );
        }
        assert!(c.arena.len() > 1, "{} chunks", c.arena.len());
        assert_eq!(c.len(), (n, 1));
        let mut due = c.due(5_000);
        due.sort();
        let mut want: Vec<String> = (0..n)
            .map(|i| format!("https://host-{i}.example"))
            .collect();
        want.sort();
        assert_eq!(due, want);
    }

    /// A million origins cost under 56 bytes each, not the ~130 of a map of shared strings
    /// (issue 13: the census is built at the first metrics scrape and held from then on).
    #[test]
    fn a_million_origins_stay_within_their_budget() {
        let mut c = census();
        let n = 1_000_000u64;
        for i in 0..n {
            let origin = format!("http://h{i}.test");
            c.set(
                &origin,
                &status(RobotsStateKind::Fresh, Some(86_400_000)),
                0,
            );
        }
        assert_eq!(c.len(), (n as usize, 0));
        assert_eq!(c.counts().get("fresh"), Some(&n));
        let per_origin = c.heap_bytes() as f64 / n as f64;
        assert!(per_origin < 56.0, "{per_origin:.1} bytes an origin");
    }

    /// A store that counts reads of robots records (`R` keys).
    #[derive(Default)]
    struct CountingReads {
        store: crate::store::MemStore,
        robots_reads: std::sync::atomic::AtomicUsize,
    }

    impl crate::store::Store for CountingReads {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, crate::store::StoreError> {
            if key.first() == Some(&b'R') {
                self.robots_reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.store.get(key)
        }
        crate::store::delegate_store_reads!(store, except get);
        fn apply(&self, batch: crate::store::Batch) -> Result<(), crate::store::StoreError> {
            self.store.apply(batch)
        }
        fn flush(&self) -> Result<(), crate::store::StoreError> {
            self.store.flush()
        }
    }

    /// The queue breakdown (every metrics scrape and stats call) names the robots state
    /// holding each host's URLs from the census, without reading a robots record per host:
    /// at a million hosts waiting for robots.txt that read held the scheduler for most of a
    /// second per scrape.
    #[test]
    fn the_queue_breakdown_reads_no_robots_record_per_host() {
        use crate::*;
        const T0: u64 = 1_700_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = FrontierConfig::new(dir.path()).without_gaps();
        // more hosts waiting than the robots cache holds, as at a million hosts
        cfg.robots_cache_origins = 10;
        let store = std::sync::Arc::new(CountingReads::default());
        let f = Frontier::open_store(cfg, store.clone(), RobotsEngine::default()).unwrap();
        let urls: Vec<String> = (0..50)
            .flat_map(|h| (0..2).map(move |k| format!("http://h{h}.test/{k}")))
            .collect();
        f.enqueue_batch(&urls, T0).unwrap();
        // every host's robots.txt handed out: its two URLs wait for it
        let leased = f.next_batch(T0, 100).unwrap();
        assert_eq!(leased.len(), 50);
        assert!(leased.iter().all(|w| matches!(w, WorkItem::Robots(_))));
        for _ in 0..2 {
            let before = store
                .robots_reads
                .load(std::sync::atomic::Ordering::Relaxed);
            let b = f.queue_breakdown(T0 + 1).unwrap();
            assert_eq!(b.robots.get("unknown"), Some(&100), "{b:?}");
            assert_eq!(b.total(), 100);
            let reads = store
                .robots_reads
                .load(std::sync::atomic::Ordering::Relaxed)
                - before;
            assert_eq!(reads, 0, "robots records read for one breakdown");
        }
    }
}
