//! The frontier: seen-set, per-host FIFO queues, host records, leases, scheduling and the
//! robots gate, on top of a [`Store`].

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::canon::{canonicalize, origin_of, politeness_key_of, CanonicalUrl, Rejection};
use crate::codec::{CodecError, DropReason, DropRecord, HostRecord, QueueEntry};
use crate::commit::GroupCommit;
use crate::config::{CrawlDelayOverCap, FrontierConfig};
use crate::failure::{backoff_step_ms, FailureScope, PageOutcome};
use crate::packed::{self, IntakeWriter, Pending, Segment};
use crate::robots::{
    Gate, OriginState, PolicyRobots, RobotsBackend, RobotsCache, RobotsFetchOutcome,
};
use crate::store::{Batch, SledStore, Store, StoreError};

mod aside;
pub use aside::QueueBreakdown;
use aside::{Delayed, Parked, Source, PARK_PER_VISIT};

/// Frontier failure.
#[derive(Debug, thiserror::Error)]
pub enum FrontierError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record could not be decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A stored robots record could not be decoded.
    #[error("robots record: {0}")]
    Robots(String),
    /// The lease is not (or no longer) in flight, e.g. it returned to its queue at restart.
    #[error("unknown lease {0:?}")]
    UnknownLease(LeaseId),
    /// A robots lease for an origin that has no robots fetch in flight.
    #[error("no robots fetch in flight for {0}")]
    UnknownRobotsLease(String),
}

impl From<String> for FrontierError {
    fn from(s: String) -> Self {
        FrontierError::Robots(s)
    }
}

/// Result alias.
pub type Result<T, E = FrontierError> = std::result::Result<T, E>;

/// Store key layout. The first byte names the record kind.
pub mod keys {
    /// A key: the record kind's tag byte followed by the parts, back to back.
    fn tagged(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
        let mut k = Vec::with_capacity(1 + parts.iter().map(|p| p.len()).sum::<usize>());
        k.push(tag);
        for part in parts {
            k.extend_from_slice(part);
        }
        k
    }
    /// Seen-set as older stores kept it: `S` + 128-bit xxh3 of the canonical URL
    /// (big-endian) -> empty. Still read (a store that has them keeps answering for
    /// them); no longer written.
    pub fn seen(hash: u128) -> Vec<u8> {
        tagged(b'S', &[&hash.to_be_bytes()])
    }
    /// Seen bucket: `B` + lowest hash it covers (u128 BE) -> sorted hashes (see
    /// `packed.rs`). The buckets partition the hash space.
    pub fn seen_bucket(start: u128) -> Vec<u8> {
        tagged(b'B', &[&start.to_be_bytes()])
    }
    /// Intake-log record: `W` + sequence (u64 BE) -> the entries one enqueue queued.
    pub fn intake(seq: u64) -> Vec<u8> {
        tagged(b'W', &[&seq.to_be_bytes()])
    }
    /// Retry entry: `T` + host id + sequence -> [`crate::QueueEntry`] with its attempts
    /// raised; it overrides the entry at that sequence until the URL completes.
    pub fn retry(id: u64, seq: u64) -> Vec<u8> {
        idseq(b'T', id, seq)
    }
    /// Host record: `H` + politeness key -> [`crate::HostRecord`].
    pub fn host(key: &str) -> Vec<u8> {
        tagged(b'H', &[key.as_bytes()])
    }
    fn idseq(tag: u8, id: u64, seq: u64) -> Vec<u8> {
        tagged(tag, &[&id.to_be_bytes(), &seq.to_be_bytes()])
    }
    /// Queue segment: `Q` + host id + sequence of its first entry -> consecutive entries
    /// (see `packed.rs`; older stores have one [`crate::QueueEntry`] per key here, which
    /// reads as a one-entry segment).
    pub fn queued(id: u64, seq: u64) -> Vec<u8> {
        idseq(b'Q', id, seq)
    }
    /// Leased URL: `L` + host id + sequence (written by older versions only; such leases are
    /// returned to their queues at open. Leases now live in the host record).
    pub fn leased(id: u64, seq: u64) -> Vec<u8> {
        idseq(b'L', id, seq)
    }
    /// Robots record: `R` + origin -> the robots backend's encoded state.
    pub fn robots(origin: &str) -> Vec<u8> {
        tagged(b'R', &[origin.as_bytes()])
    }
    /// Dropped / given-up URL: `D` + 128-bit hash -> [`crate::DropRecord`].
    pub fn dropped(hash: u128) -> Vec<u8> {
        tagged(b'D', &[&hash.to_be_bytes()])
    }
    /// A drop not yet written to the caller's log: `U` + 128-bit hash -> empty. Put in the
    /// same batch as the [`dropped`] record, deleted by [`crate::Frontier::drops_logged`];
    /// those left at open are reported again by `take_drops` (at-least-once).
    pub fn unlogged(hash: u128) -> Vec<u8> {
        tagged(b'U', &[&hash.to_be_bytes()])
    }
    /// Paused politeness key: `P` + key -> empty (an operator's pause survives restarts).
    pub fn paused(key: &str) -> Vec<u8> {
        tagged(b'P', &[key.as_bytes()])
    }
    /// Host-record journal: `J` + sequence (u64 BE) -> changed host records (see
    /// `docs/frontier.md`, "Host-record journal").
    pub fn journal(seq: u64) -> Vec<u8> {
        tagged(b'J', &[&seq.to_be_bytes()])
    }
    /// Parse a journal key.
    pub fn parse_journal(k: &[u8]) -> Option<u64> {
        let b: [u8; 8] = k.get(1..9)?.try_into().ok()?;
        (k.len() == 9 && k[0] == b'J').then(|| u64::from_be_bytes(b))
    }
    /// Next host id counter.
    pub const NEXT_HOST_ID: &[u8] = b"M\0next_host_id";
    /// Parse `tag + id + seq`.
    pub fn parse_idseq(k: &[u8]) -> Option<(u64, u64)> {
        if k.len() != 17 {
            return None;
        }
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&k[1..9]);
        b.copy_from_slice(&k[9..17]);
        Some((u64::from_be_bytes(a), u64::from_be_bytes(b)))
    }
}

/// 128-bit hash of a canonical URL: the seen-set key.
pub fn url_hash(canonical: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(canonical.as_bytes())
}

/// Identifies a page lease: host id and queue sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId {
    /// Host id.
    pub host_id: u64,
    /// Sequence in the host's queue.
    pub seq: u64,
}

/// A page handed out for fetching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLease {
    /// Lease id (pass it back to [`Frontier::complete`]).
    pub id: LeaseId,
    /// Canonical URL.
    pub url: String,
    /// Which attempt this is (1 = first).
    pub attempt: u32,
    /// Link depth the URL was queued with (0 for seeds).
    pub depth: u32,
    /// The page it was found on or redirected from, as queued (None for submitted URLs).
    pub via: Option<String>,
    /// Its hop path from the seed, as queued (see [`EnqueueItem::hops`]).
    pub hops: String,
    /// How long politeness held this URL back once it was at the head of its queue with
    /// a free slot on its host and its robots verdict known: the host's gap, back-off or
    /// robots hold, in ms (0 if it went out as soon as the host was free).
    pub politeness_wait_ms: u64,
}

/// A robots.txt fetch handed out for an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsLease {
    /// Host id (politeness key) it counts against.
    pub host_id: u64,
    /// Origin, `scheme://host[:port]`.
    pub origin: String,
    /// `origin/robots.txt`.
    pub url: String,
}

/// One unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkItem {
    /// Fetch this page.
    Page(PageLease),
    /// Fetch this origin's robots.txt first.
    Robots(RobotsLease),
}

/// One URL offered to [`Frontier::enqueue_items`], with where it came from: all of it is
/// stored with the queued URL (so it survives restarts) and returned on its [`PageLease`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueueItem {
    /// The URL as found (canonicalized by the frontier).
    pub url: String,
    /// Link depth: 0 for a submitted URL.
    pub depth: u32,
    /// The page it was found on or redirected from; None for a submitted URL. Stored as
    /// given: it is the costliest part of a queue entry.
    pub via: Option<String>,
    /// Hop path from the seed (Heritrix's discovery path, e.g. `LLR`), empty for a submitted
    /// URL. Stored as given: the caller bounds its length.
    pub hops: String,
}

impl EnqueueItem {
    /// A submitted URL: depth 0, no via, empty hop path.
    pub fn seed(url: impl Into<String>) -> EnqueueItem {
        EnqueueItem {
            url: url.into(),
            depth: 0,
            via: None,
            hops: String::new(),
        }
    }
}

/// Result of offering one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueResult {
    /// Queued (durably, once `enqueue_batch` returned).
    Queued,
    /// Already seen.
    Duplicate,
    /// Refused, with the reason.
    Rejected(Rejection),
}

/// Global counters since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontierStats {
    /// URLs queued.
    pub enqueued: u64,
    /// Duplicates refused.
    pub duplicates: u64,
    /// URLs rejected.
    pub rejected: u64,
    /// Page leases handed out.
    pub dispatched: u64,
    /// robots.txt fetches handed out.
    pub robots_fetches: u64,
    /// Page leases completed.
    pub completed: u64,
    /// URLs dropped (robots rules or skipped host).
    pub dropped: u64,
    /// URLs given up.
    pub given_up: u64,
    /// Retries scheduled.
    pub retried: u64,
    /// Crawl-delays clamped to the cap.
    pub crawl_delay_clamped: u64,
    /// URLs dropped because the host's crawl-delay exceeds the cap.
    pub crawl_delay_skipped: u64,
    /// Times the global quota stopped a dispatch.
    pub rate_limited: u64,
    /// Leases returned to their queues at open.
    pub recovered_leases: u64,
}

struct HostMem {
    key: Arc<str>,
    /// The record; `rec.head_seq` is the queue's head (next sequence to hand out).
    rec: HostRecord,
    /// Entries not yet folded into segments (durable in the intake log). Every sequence
    /// below `pending.first` is in a segment or was handed out; the next sequence to
    /// assign is `pending.end()`.
    pending: Pending,
    /// The host's stored segments, oldest first: (first sequence, entry count).
    segs: VecDeque<(u64, u64)>,
    /// Sequences below the head to hand out before it, lowest first: leases returned at
    /// open and URLs waiting for a retry.
    front: Vec<u64>,
    /// Sequences with a `T` retry entry (attempts raised) in the store.
    retries: Vec<u64>,
    scheduled: Option<u64>,
    hold_until_ms: u64,
    robots_pending: Option<String>,
    /// Since when the host has had a free slot and work (ms): the start of the politeness
    /// wait reported on the next page lease.
    free_since_ms: u64,
    /// Sequences of the page leases in flight (at most `max_in_flight_per_host`),
    /// persisted in the host record: a lease costs no write beyond the host record.
    leased: Vec<u64>,
    /// URLs set aside because their origin's robots state holds them, so the host's other
    /// origins go on: origin -> when to look again, sequences. Each has a `T` entry (at
    /// open it comes back through the front, and is set aside again if still held).
    parked: HashMap<Arc<str>, Parked>,
    /// URLs waiting out their own back-off after a per-URL failure, each with a `T` entry
    /// (at open they come back through the front).
    delayed: Vec<Delayed>,
    /// Different sequences that timed out since the host last answered.
    timeouts: Vec<u64>,
    /// The origin whose robots state held the host's next URL when nothing else could go
    /// (for the queue breakdown).
    held_origin: Option<Arc<str>>,
}

impl HostMem {
    /// A host with an empty queue whose head is `rec.head_seq`.
    fn empty(key: Arc<str>, rec: HostRecord) -> HostMem {
        HostMem {
            key,
            pending: Pending::starting_at(rec.head_seq),
            rec,
            segs: VecDeque::new(),
            front: Vec::new(),
            retries: Vec::new(),
            scheduled: None,
            hold_until_ms: 0,
            robots_pending: None,
            free_since_ms: 0,
            leased: Vec::new(),
            parked: HashMap::new(),
            delayed: Vec::new(),
            timeouts: Vec::new(),
            held_origin: None,
        }
    }

    /// The stored value of the host record. Its lease list holds the leases in flight and
    /// the front: both come back to the front at open.
    fn value(&self) -> Vec<u8> {
        self.rec.encode_with_leases(&self.owed())
    }

    /// Sequences below the head that are still owed: leased or in the front.
    fn owed(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.leased.iter().chain(&self.front).copied().collect();
        v.sort_unstable();
        v
    }

    /// Lowest sequence whose entry may still be needed: the head, a returned or retried
    /// URL, or a lease in flight (a failed lease is retried from its entry).
    fn live_from(&self) -> u64 {
        let mut live = self.rec.head_seq;
        if let Some(&f) = self.front.first() {
            live = live.min(f);
        }
        if let Some(&l) = self.leased.iter().min() {
            live = live.min(l);
        }
        live
    }

    /// The smallest stored or pending sequence at or after `from`.
    fn next_seq_from(&self, from: u64) -> Option<u64> {
        let i = self.segs.partition_point(|&(f, _)| f <= from);
        if i > 0 {
            let (f, n) = self.segs[i - 1];
            if from < f + n {
                return Some(from);
            }
        }
        if let Some(&(f, _)) = self.segs.get(i) {
            return Some(f);
        }
        if from < self.pending.end() {
            return Some(from.max(self.pending.first));
        }
        None
    }

    /// Take `seq` off the queue: out of `front` or the delayed retries, or past the head.
    fn consume(&mut self, seq: u64, from: Source) {
        match from {
            Source::Front => self.front.retain(|&s| s != seq),
            Source::Delayed => self.delayed.retain(|d| d.seq != seq),
            Source::Head => self.rec.head_seq = self.rec.head_seq.max(seq + 1),
        }
    }

    /// `seq` is done for good: its retry entry, if any, goes.
    fn forget_retry(&mut self, id: u64, seq: u64, batch: &mut Batch) {
        if let Some(p) = self.retries.iter().position(|&s| s == seq) {
            self.retries.swap_remove(p);
            batch.del(keys::retry(id, seq));
        }
    }

    /// Forget the segments nothing live points into any more; their keys go to `dead`.
    fn drop_dead_segments(&mut self, id: u64, dead: &mut Vec<Vec<u8>>) {
        let live = self.live_from();
        while let Some(&(f, n)) = self.segs.front() {
            if f + n > live {
                break;
            }
            dead.push(keys::queued(id, f));
            self.segs.pop_front();
        }
    }
}

struct Inner {
    hosts: HashMap<u64, HostMem>,
    by_key: HashMap<Arc<str>, u64>,
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    next_host_id: u64,
    robots: RobotsCache,
    clock_ms: Option<u64>,
    rng: StdRng,
    stats: FrontierStats,
    /// Politeness keys paused by the operator (persisted as `P` keys, loaded at open).
    paused: HashSet<Arc<str>>,
    /// Drops and give-ups not yet taken by [`Frontier::take_drops`] (bounded).
    drop_events: Vec<DropRecord>,
    journal: Journal,
    seen: SeenSet,
    intake: IntakeLog,
}

/// A set of URL hashes. They are xxh3-128 outputs, already uniform, so the set hashes them
/// by taking their low 64 bits instead of running SipHash over 16 bytes.
type HashSet128 = HashSet<u128, std::hash::BuildHasherDefault<UrlHashHasher>>;

/// Hasher for [`HashSet128`]: the low 64 bits of the u128 written.
#[derive(Default)]
struct UrlHashHasher(u64);

impl std::hash::Hasher for UrlHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // not reached for u128 keys; a fallback that still mixes every byte
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }
}

/// The seen-set's in-memory part: the bucket directory and the hashes not yet folded.
struct SeenSet {
    /// Lowest hash of each stored bucket, sorted; always starts with 0.
    starts: Vec<u128>,
    /// Hashes queued since the last fold (their URLs are in the intake log).
    recent: HashSet128,
    /// The store has per-URL `S` keys from an older version.
    legacy: bool,
}

impl SeenSet {
    fn bucket_of(&self, hash: u128) -> u128 {
        let i = self.starts.partition_point(|&s| s <= hash);
        self.starts[i.saturating_sub(1)]
    }
}

/// The intake log since the last fold.
struct IntakeLog {
    /// Sequence of the next `W` record.
    next_seq: u64,
    /// Oldest `W` record not yet folded.
    first_seq: u64,
    /// Bytes written to `W` records since the last fold.
    bytes: u64,
}

/// Host-record journal state. Every batch that changes host records writes them as one
/// or a few `J` records (a few sled writes per batch instead of one per host); a
/// checkpoint writes the latest record of every journaled host to `H` and deletes the `J`
/// records. At open the journal is replayed over `H` (a later record wins).
struct Journal {
    /// Sequence of the next `J` record.
    next_seq: u64,
    /// Oldest `J` record not yet checkpointed.
    first_seq: u64,
    /// Bytes in `J` records since the last checkpoint.
    bytes: u64,
    /// In-memory hosts whose latest record is only in the journal.
    dirty: HashSet<u64>,
    /// Hosts that left memory while their latest record was only in the journal: that
    /// record (the stored value), until a checkpoint writes it to `H`.
    evicted: HashMap<Arc<str>, Vec<u8>>,
    /// No checkpoint below this many journal bytes (tests lower it).
    min_bytes: u64,
}

/// Largest `J` value (bytes); a batch touching more hosts writes several.
const JOURNAL_RECORD_BYTES: usize = 64 * 1024;
/// What one record written by a checkpoint costs, in journal bytes: a store write costs
/// about what 2 KiB of log bytes do (sled: ~14 µs per key, ~250 MB/s for large values),
/// and a checkpoint writes one key per host. The journal is checkpointed once it holds
/// this much per host it would write, so checkpoints stay a small part of the writes.
const CHECKPOINT_BYTES_PER_HOST: u64 = 2048;
/// A fold is handed to the store in pieces of about this many bytes.
const FOLD_PIECE_BYTES: usize = 8 * 1024 * 1024;
/// Journal bytes past which a checkpoint is made whatever it costs.
const JOURNAL_MAX_BYTES: u64 = 256 * 1024 * 1024;

fn journal_encode_entry(buf: &mut Vec<u8>, key: &str, value: &[u8]) {
    let kl = u16::try_from(key.len()).unwrap_or(u16::MAX) as usize;
    buf.extend_from_slice(&(kl as u16).to_le_bytes());
    buf.extend_from_slice(&key.as_bytes()[..kl]);
    buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
    buf.extend_from_slice(value);
}

/// Entries (politeness key, stored host value) of one `J` record.
fn journal_decode(bytes: &[u8]) -> Result<Vec<crate::store::Kv>, CodecError> {
    let err = |why| CodecError {
        what: "journal",
        why,
    };
    let (&ver, mut rest) = bytes.split_first().ok_or(err("empty"))?;
    if ver != 1 {
        return Err(err("unknown version"));
    }
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 2 {
            return Err(err("truncated key length"));
        }
        let kl = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        rest = &rest[2..];
        if rest.len() < kl + 4 {
            return Err(err("truncated key"));
        }
        let key = rest[..kl].to_vec();
        rest = &rest[kl..];
        let vl = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        rest = &rest[4..];
        if rest.len() < vl {
            return Err(err("truncated value"));
        }
        out.push((key, rest[..vl].to_vec()));
        rest = &rest[vl..];
    }
    Ok(out)
}

/// Most drop events kept for [`Frontier::take_drops`]; older ones are discarded.
const MAX_DROP_EVENTS: usize = 100_000;

impl Inner {
    fn push_drop(&mut self, rec: DropRecord) {
        if self.drop_events.len() < MAX_DROP_EVENTS {
            self.drop_events.push(rec);
        }
    }
}

type Limiter = RateLimiter<
    NotKeyed,
    InMemoryState,
    FakeRelativeClock,
    governor::middleware::NoOpMiddleware<governor::nanos::Nanos>,
>;

/// The frontier. All methods take `now_ms` (unix milliseconds) from the caller.
pub struct Frontier {
    store: Arc<dyn Store>,
    cfg: FrontierConfig,
    commit: GroupCommit,
    inner: Mutex<Inner>,
    limiter: Option<(Limiter, FakeRelativeClock)>,
    reclaimer: Reclaimer,
}

/// Deletes queue segments that nothing points into any more, on its own thread: the
/// deletes (~30 µs each on sled) stay off the enqueue/dispatch path. Nothing waits for
/// them to be durable: a segment whose delete is lost in a crash is found dead again
/// at open, and its key is never reused (sequences only grow).
struct Reclaimer {
    tx: Option<std::sync::mpsc::Sender<Vec<Vec<u8>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reclaimer {
    fn start(store: Arc<dyn Store>) -> Reclaimer {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Vec<u8>>>();
        let thread = std::thread::Builder::new()
            .name("frontier-reclaim".into())
            .spawn(move || {
                for keys in rx {
                    let mut batch = Batch::new();
                    for k in keys {
                        batch.del(k);
                        batch.cut();
                    }
                    if let Err(e) = store.apply(batch) {
                        // left for the next open, which finds them dead again
                        tracing::warn!(error = %e, "deleting consumed queue segments failed");
                    }
                }
            })
            .ok();
        Reclaimer {
            tx: Some(tx),
            thread,
        }
    }

    fn delete(&self, keys: Vec<Vec<u8>>) {
        if keys.is_empty() {
            return;
        }
        if let Some(tx) = &self.tx {
            // a send fails only if the thread is gone (it could not be spawned): the
            // segments are then reclaimed at the next open
            let _ = tx.send(keys);
        }
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Frontier {
    /// Open (or create) the frontier at `cfg.path` with sled and the robots-policy backend.
    pub fn open(cfg: FrontierConfig) -> Result<Frontier> {
        Self::open_with(cfg, Arc::new(PolicyRobots::default()))
    }

    /// Open with a given robots backend.
    pub fn open_with(cfg: FrontierConfig, robots: Arc<dyn RobotsBackend>) -> Result<Frontier> {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(&cfg.path, &cfg.sled)?);
        Self::open_store(cfg, store, robots)
    }

    /// Open on any [`Store`]. Every lease left in flight returns to the head of its queue.
    pub fn open_store(
        cfg: FrontierConfig,
        store: Arc<dyn Store>,
        robots: Arc<dyn RobotsBackend>,
    ) -> Result<Frontier> {
        let next_host_id = match store.get(keys::NEXT_HOST_ID)? {
            Some(v) if v.len() == 8 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(&v);
                u64::from_le_bytes(a)
            }
            _ => 1,
        };
        let limiter = cfg.global_rate_per_sec.map(|rate| {
            let clock = FakeRelativeClock::default();
            let quota = Quota::per_second(rate).allow_burst(cfg.global_burst.unwrap_or(rate));
            (RateLimiter::direct_with_clock(quota, &clock), clock)
        });
        let rng = match cfg.seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_entropy(),
        };
        let inner = Inner {
            hosts: HashMap::new(),
            by_key: HashMap::new(),
            heap: BinaryHeap::new(),
            next_host_id,
            robots: RobotsCache::new(robots, &cfg.user_agent, cfg.robots_cache_origins),
            clock_ms: None,
            rng,
            stats: FrontierStats::default(),
            paused: HashSet::new(),
            drop_events: Vec::new(),
            journal: Journal {
                next_seq: 0,
                first_seq: 0,
                bytes: 0,
                dirty: HashSet::new(),
                evicted: HashMap::new(),
                min_bytes: cfg.journal_checkpoint_bytes,
            },
            seen: SeenSet {
                starts: vec![0],
                recent: HashSet128::default(),
                legacy: false,
            },
            intake: IntakeLog {
                next_seq: 0,
                first_seq: 0,
                bytes: 0,
            },
        };
        let f = Frontier {
            reclaimer: Reclaimer::start(store.clone()),
            store,
            cfg,
            commit: GroupCommit::default(),
            inner: Mutex::new(inner),
            limiter,
        };
        f.recover()?;
        Ok(f)
    }

    fn recover(&self) -> Result<()> {
        let mut inner = self.inner.lock();
        for kv in self.store.scan_prefix(b"P") {
            let (k, _) = kv?;
            if let Ok(key) = std::str::from_utf8(&k[1..]) {
                inner.paused.insert(Arc::from(key));
            }
        }
        let mut batch = Batch::new();
        // 1. queue segments (and one-entry values of older versions), by host id
        let mut segs: HashMap<u64, VecDeque<(u64, u64)>> = HashMap::new();
        // (only each value's header is needed: visited in place, not copied)
        let mut bad = None;
        self.store.visit_prefix(b"Q", &mut |k, v| {
            let Some((id, first)) = keys::parse_idseq(k) else {
                return;
            };
            match Segment::parse(v) {
                Ok(seg) => segs
                    .entry(id)
                    .or_default()
                    .push_back((first, seg.len() as u64)),
                Err(e) => bad = Some(e),
            }
        })?;
        if let Some(e) = bad {
            return Err(e.into());
        }
        // leases of older versions (`L` keys) become one-entry segments again
        for kv in self.store.scan_prefix(b"L") {
            let (k, v) = kv?;
            let Some((id, seq)) = keys::parse_idseq(&k) else {
                continue;
            };
            batch.del(k);
            batch.put(keys::queued(id, seq), v);
            batch.cut();
            let q = segs.entry(id).or_default();
            let at = q.partition_point(|&(f, _)| f < seq);
            q.insert(at, (seq, 1));
        }
        // 2. retry entries
        let mut retries: HashMap<u64, Vec<u64>> = HashMap::new();
        for kv in self.store.scan_prefix(b"T") {
            let (k, _) = kv?;
            if let Some((id, seq)) = keys::parse_idseq(&k) {
                retries.entry(id).or_default().push(seq);
            }
        }
        // 3. the intake log since the last fold: entries not in segments yet
        let mut intake: HashMap<u64, Vec<(u64, Vec<u8>)>> = HashMap::new();
        let mut intake_first = None;
        for kv in self.store.scan_prefix(b"W") {
            let (k, v) = kv?;
            let seq = k
                .get(1..9)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            intake_first.get_or_insert(seq);
            inner.intake.next_seq = seq + 1;
            inner.intake.bytes += v.len() as u64;
            for (id, qseq, e) in packed::intake_entries(&v)? {
                let entry = QueueEntry::decode(e)?;
                inner.seen.recent.insert(url_hash(&entry.url));
                intake.entry(id).or_default().push((qseq, e.to_vec()));
            }
        }
        inner.intake.first_seq = intake_first.unwrap_or(inner.intake.next_seq);
        // 4. the host-record journal, replayed over `H` (a later record wins); every
        // replayed record is written to `H` below and the journal deleted
        let mut replay: HashMap<Vec<u8>, (u64, Vec<u8>)> = HashMap::new();
        let mut journal_keys = Vec::new();
        let mut journal_bytes = 0u64;
        for kv in self.store.scan_prefix(b"J") {
            let (k, v) = kv?;
            let seq = keys::parse_journal(&k).unwrap_or(0);
            for (key, val) in journal_decode(&v)? {
                replay.insert(key, (seq, val));
            }
            journal_bytes += v.len() as u64;
            journal_keys.push(k);
        }
        let mut next_journal = journal_keys
            .last()
            .and_then(|k| keys::parse_journal(k))
            .map(|s| s + 1)
            .unwrap_or(0);
        let mut records: Vec<(Vec<u8>, Vec<u8>, bool)> = Vec::new();
        for kv in self.store.scan_prefix(b"H") {
            let (k, v) = kv?;
            // a record written when its host left memory is newer than the journal
            // entries before its stamp
            let stamp = HostRecord::decode_stamp(&v);
            next_journal = next_journal.max(stamp);
            match replay.remove(&k[1..]) {
                Some((seq, j)) if seq >= stamp => records.push((k, j, true)),
                _ => records.push((k, v, false)),
            }
        }
        for (key, (_, val)) in replay {
            let mut k = Vec::with_capacity(1 + key.len());
            k.push(b'H');
            k.extend_from_slice(&key);
            records.push((k, val, true));
        }
        // 5. each host with anything queued comes into memory; leases in flight when the
        // last run ended return to the front of their queues
        let mut recovered = 0u64;
        let mut loaded = Vec::new();
        for (k, v, from_journal) in records {
            let (rec, leased, _) = HostRecord::decode_parts(&v)?;
            let id = rec.id;
            let key: Arc<str> = Arc::from(String::from_utf8_lossy(&k[1..]).as_ref());
            let host_segs = segs.remove(&id).unwrap_or_default();
            let host_retries = retries.remove(&id).unwrap_or_default();
            let host_intake = intake.remove(&id).unwrap_or_default();
            let stored_queued = rec.counters.queued;
            let mut h = HostMem::empty(key, rec);
            h.segs = host_segs;
            h.retries = host_retries;
            // leases in flight and the front come back first (records of older versions
            // have head 0: their leased entries are still queued at the head); other
            // retries below the head (per-URL retries, URLs of held origins set aside)
            // go behind the queue, where a held origin's are set aside again
            let mut front: Vec<u64> = leased
                .iter()
                .copied()
                .filter(|&s| s < h.rec.head_seq)
                .collect();
            front.sort_unstable();
            front.dedup();
            let mut behind: Vec<u64> = h
                .retries
                .iter()
                .copied()
                .filter(|&s| s < h.rec.head_seq && front.binary_search(&s).is_err())
                .collect();
            behind.sort_unstable();
            behind.dedup();
            recovered += leased.len() as u64;
            h.front = front;
            let seg_end = h.segs.back().map_or(0, |&(f, n)| f + n);
            let keep_from = seg_end.max(h.live_from());
            let mut pending: Option<Pending> = None;
            for (seq, e) in host_intake {
                if seq < keep_from {
                    continue;
                }
                let p = pending.get_or_insert_with(|| Pending::starting_at(seq));
                if seq != p.end() {
                    tracing::error!(host = %h.key, seq, expected = p.end(), "intake log out of order; entry skipped");
                    continue;
                }
                p.push(&e);
            }
            let tail = [
                h.rec.head_seq,
                seg_end,
                h.front.last().map_or(0, |&s| s + 1),
                pending.as_ref().map_or(0, |p| p.end()),
            ]
            .into_iter()
            .max()
            .unwrap_or(0);
            h.pending = pending.unwrap_or_else(|| Pending::starting_at(tail));
            let end = h.pending.end();
            h.delayed = behind
                .into_iter()
                .map(|seq| Delayed {
                    seq,
                    due_ms: 0,
                    behind: end,
                })
                .collect();
            // queued: the front, plus everything stored or pending from the head on
            let head = h.rec.head_seq;
            let in_segs: u64 = h
                .segs
                .iter()
                .map(|&(f, n)| (f + n).saturating_sub(f.max(head)))
                .sum();
            let in_pending = h.pending.end().saturating_sub(h.pending.first.max(head));
            let queued = (h.front.len() + h.delayed.len()) as u64 + in_segs + in_pending;
            // enqueues since the record was last written are not in its counters yet
            let stored = stored_queued + leased.len() as u64;
            if queued > stored {
                h.rec.counters.enqueued += queued - stored;
            }
            // the journal is kept as it is (no checkpoint at open: that would be one write
            // per host); what differs from the stored record is journaled by the host's
            // next change, or redone by the next open
            let changed =
                h.rec.in_flight != 0 || !leased.is_empty() || h.rec.counters.queued != queued;
            h.rec.in_flight = 0;
            h.rec.counters.queued = queued;
            // segments that only hold URLs handed out and completed before the crash
            let mut dead = Vec::new();
            h.drop_dead_segments(id, &mut dead);
            for k in dead {
                batch.del(k);
            }
            batch.cut();
            if queued > 0 {
                if changed || from_journal {
                    inner.journal.dirty.insert(id);
                }
                loaded.push(h);
            } else {
                if changed {
                    // stamped: older journal entries of this host must not undo it
                    batch.put(k.clone(), h.rec.encode_stamped(&[], next_journal));
                } else if from_journal {
                    inner.journal.evicted.insert(h.key.clone(), v);
                }
                for (f, _) in h.segs.drain(..) {
                    batch.del(keys::queued(id, f));
                }
                for s in h.retries.drain(..) {
                    batch.del(keys::retry(id, s));
                }
                batch.cut();
            }
        }
        for (id, _) in segs
            .into_iter()
            .chain(retries.into_keys().map(|i| (i, VecDeque::new())))
        {
            tracing::error!(
                host_id = id,
                "queue entries of a host without a record are ignored"
            );
        }
        for (id, entries) in intake {
            tracing::error!(
                host_id = id,
                entries = entries.len(),
                "intake-log entries of a host without a record are ignored"
            );
        }
        let n_hosts = loaded.len();
        for h in loaded {
            let id = h.rec.id;
            inner.by_key.insert(h.key.clone(), id);
            inner.hosts.insert(id, h);
            self.schedule(&mut inner, id);
        }
        inner.stats.recovered_leases = recovered;
        // the journal stays; the next checkpoint writes its records to `H`
        inner.journal.next_seq = next_journal;
        inner.journal.first_seq = journal_keys
            .first()
            .and_then(|k| keys::parse_journal(k))
            .unwrap_or(next_journal);
        inner.journal.bytes = journal_bytes;
        // 6. the seen-set: bucket directory, and per-URL keys of older versions
        let starts = &mut inner.seen.starts;
        self.store.visit_prefix(b"B", &mut |k, _| {
            if let Some(b) = k.get(1..17).and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                starts.push(u128::from_be_bytes(b));
            }
        })?;
        inner.seen.starts.sort_unstable();
        inner.seen.starts.dedup();
        inner.seen.legacy = self.store.first_in_range(b"S", b"T")?.is_some();
        // 7. drops the caller had not logged when the last run ended: report them again
        for kv in self.store.scan_prefix(b"U") {
            let (k, _) = kv?;
            let Some(hash) = k.get(1..17).and_then(|b| <[u8; 16]>::try_from(b).ok()) else {
                continue;
            };
            match self.store.get(&keys::dropped(u128::from_be_bytes(hash)))? {
                Some(v) => inner.push_drop(DropRecord::decode(&v)?),
                None => {
                    batch.del(k);
                    batch.cut();
                }
            }
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
            self.store.flush()?;
        }
        tracing::info!(
            hosts_with_work = n_hosts,
            recovered_leases = recovered,
            intake_bytes = inner.intake.bytes,
            "frontier opened"
        );
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &FrontierConfig {
        &self.cfg
    }

    /// Counters since open.
    pub fn stats(&self) -> FrontierStats {
        self.inner.lock().stats.clone()
    }

    /// Number of hosts held in memory (hosts with queued or in-flight work).
    pub fn hosts_in_memory(&self) -> usize {
        self.inner.lock().hosts.len()
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
        let inner = self.inner.lock();
        inner.heap.peek().map(|Reverse((t, _))| *t)
    }

    // ---------------------------------------------------------------- enqueue

    /// Offer a batch of URLs. Returns once every queued URL is durable; results are in
    /// input order. Concurrent callers share flushes (group commit).
    pub fn enqueue_batch<S: AsRef<str>>(
        &self,
        urls: &[S],
        now_ms: u64,
    ) -> Result<Vec<EnqueueResult>> {
        let items: Vec<EnqueueItem> = urls.iter().map(|u| EnqueueItem::seed(u.as_ref())).collect();
        self.enqueue_items(&items, now_ms)
    }

    /// [`Frontier::enqueue_batch`] with where each URL came from (link depth, via, hop
    /// path), kept in the queue entry and returned on the page lease.
    pub fn enqueue_items(&self, items: &[EnqueueItem], now_ms: u64) -> Result<Vec<EnqueueResult>> {
        // canonicalize and hash outside the lock
        let prepared: Vec<std::result::Result<(CanonicalUrl, u128, &EnqueueItem), Rejection>> =
            items
                .iter()
                .map(|item| {
                    canonicalize(&item.url, self.cfg.max_url_len).map(|c| {
                        let h = url_hash(c.as_str());
                        (c, h, item)
                    })
                })
                .collect();
        let mut results = Vec::with_capacity(items.len());
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let seen = self.seen_hashes(
                inner,
                prepared.iter().filter_map(|p| p.as_ref().ok().map(|x| x.1)),
            )?;
            let mut in_batch =
                HashSet128::with_capacity_and_hasher(items.len(), Default::default());
            let mut dirty: Vec<u64> = Vec::new();
            let old_next_id = inner.next_host_id;
            let mut log = IntakeWriter::default();
            let mut buf = Vec::new();
            for p in prepared {
                let (canon, hash, item) = match p {
                    Err(r) => {
                        inner.stats.rejected += 1;
                        results.push(EnqueueResult::Rejected(r));
                        continue;
                    }
                    Ok(x) => x,
                };
                if in_batch.contains(&hash) || seen.contains(&hash) {
                    inner.stats.duplicates += 1;
                    results.push(EnqueueResult::Duplicate);
                    continue;
                }
                in_batch.insert(hash);
                let pkey = politeness_key_of(&canon, self.cfg.key_mode);
                let id = self.host_id_for(inner, pkey)?;
                let Some(h) = inner.hosts.get_mut(&id) else {
                    continue;
                };
                if h.rec.counters.queued == 0 && h.rec.in_flight == 0 {
                    // new work for an idle host: its politeness wait starts now
                    h.free_since_ms = now_ms;
                }
                // a host asleep because only set-aside URLs were left has work again
                if h.held_origin.is_none() {
                    h.hold_until_ms = 0;
                }
                let seq = h.pending.end();
                h.rec.counters.enqueued += 1;
                h.rec.counters.queued += 1;
                buf.clear();
                QueueEntry::new(
                    canon.into_string(),
                    item.depth,
                    item.via.clone(),
                    item.hops.clone(),
                )
                .encode_into(&mut buf);
                h.pending.push(&buf);
                log.push(id, seq, &buf);
                dirty.push(id);
                inner.stats.enqueued += 1;
                results.push(EnqueueResult::Queued);
            }
            inner.seen.recent.extend(in_batch);
            if log.is_empty() {
                return Ok(results);
            }
            // host records (journal) and the id counter go first: a crash inside the
            // apply must not leave log entries of a host id that no record names
            let mut batch = Batch::new();
            dirty.sort_unstable();
            dirty.dedup();
            // Only new hosts are journaled here (the id must be durable with the first
            // queue entry). Enqueue only moves an existing host's `enqueued`/`queued`
            // counters, which reach the journal with its next lease or completion; at open
            // `queued` is recounted from the queue itself.
            let created: Vec<u64> = dirty
                .iter()
                .copied()
                .filter(|&id| id >= old_next_id)
                .collect();
            Self::journal_hosts(inner, &created, &mut batch);
            for id in dirty {
                self.schedule(inner, id);
            }
            if inner.next_host_id != old_next_id {
                batch.put(
                    keys::NEXT_HOST_ID.to_vec(),
                    inner.next_host_id.to_le_bytes().to_vec(),
                );
            }
            batch.cut();
            // the whole batch's URLs: one record
            let record = log.finish();
            inner.intake.bytes += record.len() as u64;
            batch.put(keys::intake(inner.intake.next_seq), record);
            inner.intake.next_seq += 1;
            batch.cut();
            Self::maybe_checkpoint(inner, &mut batch);
            if inner.intake.bytes >= self.cfg.intake_buffer_bytes {
                self.fold(inner, &mut batch)?;
            }
            self.store.apply(batch)?;
            ticket = self.commit.written();
        }
        self.commit.sync(self.store.as_ref(), ticket)?;
        Ok(results)
    }

    /// Which of `hashes` the seen-set holds: queued since the last fold (`recent`), or in
    /// the stored buckets (and per-URL keys of older versions), each bucket read once, in
    /// hash order.
    fn seen_hashes(&self, inner: &Inner, hashes: impl Iterator<Item = u128>) -> Result<HashSet128> {
        let mut found = HashSet128::default();
        let mut todo: Vec<u128> = Vec::new();
        for h in hashes {
            if inner.seen.recent.contains(&h) {
                found.insert(h);
            } else {
                todo.push(h);
            }
        }
        todo.sort_unstable();
        todo.dedup();
        // one read per bucket: the sorted hashes of one bucket are consecutive
        let mut i = 0;
        while i < todo.len() {
            let start = inner.seen.bucket_of(todo[i]);
            let n = todo[i..]
                .iter()
                .take_while(|&&h| inner.seen.bucket_of(h) == start)
                .count();
            let group = &todo[i..i + n];
            let mut bad = None;
            self.store.read_with(&keys::seen_bucket(start), &mut |v| {
                let Some(v) = v else { return };
                for &h in group {
                    match packed::bucket_contains(v, h) {
                        Ok(true) => {
                            found.insert(h);
                        }
                        Ok(false) => {}
                        Err(e) => bad = Some(e),
                    }
                }
            })?;
            if let Some(e) = bad {
                return Err(e.into());
            }
            if inner.seen.legacy {
                for &h in group {
                    if !found.contains(&h) && self.store.contains(&keys::seen(h))? {
                        found.insert(h);
                    }
                }
            }
            i += n;
        }
        Ok(found)
    }

    /// Fold the intake log: every host's pending entries that may still be needed become
    /// queue segments, the hashes queued since the last fold are merged into the seen
    /// buckets, and the log records go, in that order. A crash part way leaves a prefix;
    /// what is missing is replayed from the log at open, and replay skips what segments
    /// already hold.
    ///
    /// The fold goes to the store in pieces of about [`FOLD_PIECE_BYTES`] as it is built
    /// (after the caller's `batch`, which it applies first and leaves empty), so its memory
    /// does not grow with the seen-set it rewrites; the caller's flush makes it durable.
    fn fold(&self, inner: &mut Inner, batch: &mut Batch) -> Result<()> {
        let mut out = std::mem::take(batch);
        out.cut();
        let mut held = 0usize;
        let spill = |out: &mut Batch, held: &mut usize, more: usize| -> Result<()> {
            *held += more;
            if *held >= FOLD_PIECE_BYTES {
                self.store.apply(std::mem::take(out))?;
                *held = 0;
            }
            Ok(())
        };
        let mut ids: Vec<u64> = inner
            .hosts
            .iter()
            .filter(|(_, h)| !h.pending.is_empty())
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        let mut segments = 0usize;
        for id in ids {
            let Some(h) = inner.hosts.get_mut(&id) else {
                continue;
            };
            let from = h.live_from().max(h.pending.first);
            let entries: Vec<&[u8]> = h.pending.from(from).collect();
            let mut first = h.pending.end() - entries.len() as u64;
            let mut bytes = 0;
            for chunk in entries.chunks(packed::SEGMENT_MAX_ENTRIES) {
                let seg = packed::encode_segment(chunk.iter().copied());
                bytes += seg.len();
                out.put(keys::queued(id, first), seg);
                h.segs.push_back((first, chunk.len() as u64));
                first += chunk.len() as u64;
                segments += 1;
            }
            out.cut();
            let end = h.pending.end();
            h.pending.reset(end);
            spill(&mut out, &mut held, bytes)?;
        }
        // seen buckets
        let mut new: Vec<u128> = inner.seen.recent.drain().collect();
        new.sort_unstable();
        let mut added = Vec::new();
        let mut i = 0;
        while i < new.len() {
            let start = inner.seen.bucket_of(new[i]);
            let next = inner
                .seen
                .starts
                .get(inner.seen.starts.partition_point(|&s| s <= start))
                .copied();
            let j = match next {
                Some(n) => i + new[i..].partition_point(|&h| h < n),
                None => new.len(),
            };
            let old = match self.store.get(&keys::seen_bucket(start))? {
                Some(v) => packed::decode_bucket(&v)?,
                None => Vec::new(),
            };
            let merged = packed::merge_sorted(&old, &new[i..j]);
            for (s, part) in packed::split_bucket(start, merged) {
                let v = packed::encode_bucket(&part);
                let bytes = v.len();
                out.put(keys::seen_bucket(s), v);
                out.cut();
                if s != start {
                    added.push(s);
                }
                spill(&mut out, &mut held, bytes)?;
            }
            i = j;
        }
        inner.seen.starts.extend(added);
        inner.seen.starts.sort_unstable();
        // the log
        for seq in inner.intake.first_seq..inner.intake.next_seq {
            out.del(keys::intake(seq));
            out.cut();
        }
        self.store.apply(out)?;
        tracing::debug!(
            segments,
            hashes = new.len(),
            log_bytes = inner.intake.bytes,
            "intake log folded"
        );
        inner.intake.first_seq = inner.intake.next_seq;
        inner.intake.bytes = 0;
        Ok(())
    }

    /// The in-memory id of a politeness key, loading or creating its record.
    fn host_id_for(&self, inner: &mut Inner, pkey: &str) -> Result<u64> {
        if let Some(&id) = inner.by_key.get(pkey) {
            return Ok(id);
        }
        let journaled = inner.journal.evicted.remove(pkey);
        let from_journal = journaled.is_some();
        let stored = match journaled {
            Some(v) => Some(v),
            None => self.store.get(&keys::host(pkey))?,
        };
        let rec = match stored {
            Some(v) => HostRecord::decode(&v)?,
            None => {
                let id = inner.next_host_id;
                inner.next_host_id += 1;
                HostRecord {
                    id,
                    ..HostRecord::default()
                }
            }
        };
        let key: Arc<str> = Arc::from(pkey);
        let id = rec.id;
        if from_journal {
            // its latest record is still only in the journal
            inner.journal.dirty.insert(id);
        }
        inner.by_key.insert(key.clone(), id);
        inner.hosts.insert(id, HostMem::empty(key, rec));
        Ok(id)
    }

    /// Put a host into the ready heap if it has queued work and a free slot.
    fn schedule(&self, inner: &mut Inner, id: u64) {
        let Some(h) = inner.hosts.get_mut(&id) else {
            return;
        };
        if h.rec.counters.queued == 0
            || h.rec.in_flight >= self.cfg.max_in_flight_per_host
            || h.robots_pending.is_some()
            || inner.paused.contains(&h.key)
        {
            h.scheduled = None;
            return;
        }
        let ready = h
            .rec
            .next_allowed_ms
            .max(h.rec.backoff_until_ms)
            .max(h.hold_until_ms);
        if h.scheduled == Some(ready) {
            return;
        }
        h.scheduled = Some(ready);
        inner.heap.push(Reverse((ready, id)));
    }

    /// Forget a host that has nothing queued and nothing in flight. If its latest record is
    /// only in the journal, it stays there (and in `journal.evicted`) until the next
    /// checkpoint writes it to `H`: one write per host per checkpoint, not per eviction.
    fn maybe_evict(inner: &mut Inner, id: u64) {
        let idle = inner.hosts.get(&id).is_some_and(|h| {
            h.rec.counters.queued == 0
                && h.rec.in_flight == 0
                && h.robots_pending.is_none()
                && h.front.is_empty()
                && h.segs.is_empty()
                && h.retries.is_empty()
        });
        if idle {
            if let Some(h) = inner.hosts.remove(&id) {
                inner.by_key.remove(&h.key);
                if inner.journal.dirty.remove(&id) {
                    // the journal has it; the next checkpoint writes it to `H`
                    inner.journal.evicted.insert(h.key.clone(), h.value());
                }
            }
        }
    }

    /// After a dispatch or completion changed the hosts `dirty`: their segments nothing
    /// points into go to `dead` (deleted once `batch` is durable), their records to the
    /// journal; hosts left without work leave memory; the journal is checkpointed if due.
    fn settle_hosts(
        inner: &mut Inner,
        mut dirty: Vec<u64>,
        batch: &mut Batch,
        dead: &mut Vec<Vec<u8>>,
    ) {
        dirty.sort_unstable();
        dirty.dedup();
        for id in &dirty {
            if let Some(h) = inner.hosts.get_mut(id) {
                h.drop_dead_segments(*id, dead);
            }
        }
        Self::journal_hosts(inner, &dirty, batch);
        for id in dirty {
            Self::maybe_evict(inner, id);
        }
        Self::maybe_checkpoint(inner, batch);
    }

    /// Journal the current records of the in-memory hosts `ids` (one `J` record per
    /// ~64 KiB, each its own unit).
    fn journal_hosts(inner: &mut Inner, ids: &[u64], batch: &mut Batch) {
        let Inner { hosts, journal, .. } = inner;
        let mut buf: Vec<u8> = Vec::new();
        let emit = |buf: &mut Vec<u8>, journal: &mut Journal, batch: &mut Batch| {
            if buf.len() > 1 {
                journal.bytes += buf.len() as u64;
                batch.put(keys::journal(journal.next_seq), std::mem::take(buf));
                journal.next_seq += 1;
                batch.cut();
            }
            buf.clear();
        };
        for id in ids {
            let Some(h) = hosts.get(id) else {
                continue;
            };
            if buf.is_empty() {
                buf.reserve(JOURNAL_RECORD_BYTES + 512);
                buf.push(1);
            }
            journal_encode_entry(&mut buf, &h.key, &h.value());
            journal.dirty.insert(*id);
            if buf.len() >= JOURNAL_RECORD_BYTES {
                emit(&mut buf, journal, batch);
            }
        }
        emit(&mut buf, journal, batch);
    }

    /// Checkpoint the journal when it holds enough bytes to pay for one: the latest record
    /// of every journaled host goes to `H` (each its own unit), then the `J` records go.
    fn maybe_checkpoint(inner: &mut Inner, batch: &mut Batch) {
        let Inner { hosts, journal, .. } = inner;
        let cost = (journal.dirty.len() + journal.evicted.len()) as u64 * CHECKPOINT_BYTES_PER_HOST;
        // 0 means: after every batch (tests use it to exercise checkpoints)
        // ... and a journal past JOURNAL_MAX_BYTES is checkpointed whatever it costs, which
        // bounds the replay at open and the space the journal takes
        let wait = journal.min_bytes > 0
            && (journal.bytes < journal.min_bytes || journal.bytes < cost.min(JOURNAL_MAX_BYTES));
        if wait || journal.bytes == 0 {
            return;
        }
        batch.cut();
        let mut evicted: Vec<(Arc<str>, Vec<u8>)> = journal.evicted.drain().collect();
        evicted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (key, value) in evicted {
            batch.put(keys::host(&key), value);
            batch.cut();
        }
        let mut ids: Vec<u64> = journal.dirty.drain().collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(h) = hosts.get(&id) {
                batch.put(keys::host(&h.key), h.value());
                batch.cut();
            }
        }
        for seq in journal.first_seq..journal.next_seq {
            batch.del(keys::journal(seq));
            batch.cut();
        }
        journal.first_seq = journal.next_seq;
        journal.bytes = 0;
    }

    fn gap_ms(&self, rec: &HostRecord) -> u64 {
        let by_response = (self.cfg.delay_factor * rec.last_response_ms as f64) as u64;
        let base = self
            .cfg
            .min_delay_ms
            .max(by_response)
            .min(self.cfg.max_delay_ms);
        base.max(rec.crawl_delay_ms)
    }

    // ---------------------------------------------------------------- dispatch

    /// One unit of work that may be done now, if any.
    pub fn next(&self, now_ms: u64) -> Result<Option<WorkItem>> {
        Ok(self.next_batch(now_ms, 1)?.pop())
    }

    /// Up to `max` units of work that may be done now. Leases are durable on return.
    pub fn next_batch(&self, now_ms: u64, max: usize) -> Result<Vec<WorkItem>> {
        let mut items = Vec::new();
        let mut batch = Batch::new();
        let mut dead = Vec::new();
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            if let Some((_, clock)) = &self.limiter {
                let last = inner.clock_ms.unwrap_or(now_ms);
                if now_ms > last {
                    clock.advance(Duration::from_millis(now_ms - last));
                }
                inner.clock_ms = Some(last.max(now_ms));
            }
            let mut dirty: Vec<u64> = Vec::new();
            'hosts: while items.len() < max {
                let Some(&Reverse((ready, id))) = inner.heap.peek() else {
                    break;
                };
                if ready > now_ms {
                    break;
                }
                inner.heap.pop();
                match inner.hosts.get_mut(&id) {
                    Some(h) if h.scheduled == Some(ready) => h.scheduled = None,
                    _ => continue,
                }
                let mut drops = 0usize;
                let mut parked_now = 0usize;
                self.release_parked(inner, id, now_ms)?;
                loop {
                    let Some(h) = inner.hosts.get_mut(&id) else {
                        continue 'hosts;
                    };
                    let head_entry = self.head_entry(id, h, now_ms)?;
                    let Some((seq, entry, from)) = head_entry else {
                        match h.set_aside_wake() {
                            // only URLs of held origins or waiting retries: look again
                            // when the first of them may go
                            Some(wake) => {
                                h.hold_until_ms = wake.max(now_ms + 1);
                                self.schedule(inner, id);
                            }
                            None => {
                                // nothing queued after all: fix the count
                                h.rec.counters.queued = 0;
                                dirty.push(id);
                            }
                        }
                        continue 'hosts;
                    };
                    let Some(origin) = origin_of(&entry.url).map(str::to_string) else {
                        // not canonical: cannot happen for what we stored; drop it
                        tracing::warn!(url = %entry.url, "non-canonical URL in queue dropped");
                        h.consume(seq, from);
                        h.forget_retry(id, seq, &mut batch);
                        h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
                        dirty.push(id);
                        continue;
                    };
                    let path = &entry.url[origin.len()..];
                    let store = &self.store;
                    inner.robots.entry(&origin, || {
                        store
                            .get(&keys::robots(&origin))
                            .map_err(FrontierError::from)
                    })?;
                    let gate = match inner.robots.parts(&origin) {
                        Some((backend, agent, e)) => {
                            RobotsCache::gate(backend, agent, e, path, now_ms)
                        }
                        None => Gate::FetchRobots,
                    };
                    let Some(h) = inner.hosts.get_mut(&id) else {
                        continue 'hosts;
                    };
                    match gate {
                        Gate::Hold(until) => {
                            let until = until
                                .unwrap_or(now_ms + self.cfg.robots_hold_recheck_ms)
                                .max(now_ms + 1);
                            if parked_now >= PARK_PER_VISIT {
                                // enough set aside for one visit: look again later
                                h.hold_until_ms = until;
                                h.held_origin = Some(Arc::from(origin.as_str()));
                                self.schedule(inner, id);
                                continue 'hosts;
                            }
                            // a held origin holds its own URLs only: set this one aside
                            // and go on with the host's next URL
                            h.keep_entry(id, seq, &entry, &mut batch);
                            h.consume(seq, from);
                            let p = h
                                .parked
                                .entry(Arc::from(origin.as_str()))
                                .or_insert_with(|| {
                                    tracing::info!(%origin, until_ms = until, "robots.txt holds the origin: its URLs are set aside, the host's other origins go on");
                                    Parked {
                                        until_ms: until,
                                        seqs: Vec::new(),
                                    }
                                });
                            p.until_ms = p.until_ms.min(until);
                            p.seqs.push(seq);
                            parked_now += 1;
                            dirty.push(id);
                            continue;
                        }
                        Gate::Disallow(rule) => {
                            let rec = Self::drop_entry(
                                &mut batch,
                                (id, h),
                                (seq, from),
                                entry,
                                DropReason::RobotsDisallowed,
                                rule,
                                now_ms,
                            );
                            inner.push_drop(rec);
                            inner.stats.dropped += 1;
                            dirty.push(id);
                            drops += 1;
                            if drops >= 1000 {
                                self.schedule(inner, id);
                                continue 'hosts;
                            }
                            continue;
                        }
                        Gate::FetchRobots => {
                            if !self.quota_ok(inner) {
                                inner.heap.push(Reverse((ready, id)));
                                if let Some(h) = inner.hosts.get_mut(&id) {
                                    h.scheduled = Some(ready);
                                }
                                break 'hosts;
                            }
                            let Some(h) = inner.hosts.get_mut(&id) else {
                                continue 'hosts;
                            };
                            h.robots_pending = Some(origin.clone());
                            h.rec.in_flight += 1;
                            h.rec.counters.robots_fetches += 1;
                            h.rec.next_allowed_ms = now_ms + self.gap_ms(&h.rec);
                            inner.stats.robots_fetches += 1;
                            dirty.push(id);
                            items.push(WorkItem::Robots(RobotsLease {
                                host_id: id,
                                url: format!("{origin}/robots.txt"),
                                origin,
                            }));
                            continue 'hosts;
                        }
                        Gate::Allow(crawl_delay) => {
                            let cd = crawl_delay.map(|d| d.as_millis() as u64).unwrap_or(0);
                            let cap = self.cfg.max_crawl_delay_ms;
                            let effective = if cd > cap {
                                if self.cfg.crawl_delay_over_cap == CrawlDelayOverCap::Skip {
                                    h.rec.skipped = 1;
                                    h.rec.counters.crawl_delay_skipped += 1;
                                    let rec = Self::drop_entry(
                                        &mut batch,
                                        (id, h),
                                        (seq, from),
                                        entry,
                                        DropReason::CrawlDelayTooLong,
                                        format!("crawl-delay {cd} ms above cap {cap} ms"),
                                        now_ms,
                                    );
                                    inner.push_drop(rec);
                                    inner.stats.crawl_delay_skipped += 1;
                                    inner.stats.dropped += 1;
                                    dirty.push(id);
                                    drops += 1;
                                    if drops >= 1000 {
                                        self.schedule(inner, id);
                                        continue 'hosts;
                                    }
                                    continue;
                                }
                                if h.rec.crawl_delay_ms != cap {
                                    h.rec.counters.crawl_delay_clamped += 1;
                                    inner.stats.crawl_delay_clamped += 1;
                                }
                                cap
                            } else {
                                cd
                            };
                            h.rec.crawl_delay_ms = effective;
                            h.rec.skipped = 0;
                            if !self.quota_ok(inner) {
                                inner.heap.push(Reverse((ready, id)));
                                if let Some(h) = inner.hosts.get_mut(&id) {
                                    h.scheduled = Some(ready);
                                }
                                dirty.push(id);
                                break 'hosts;
                            }
                            let Some(h) = inner.hosts.get_mut(&id) else {
                                continue 'hosts;
                            };
                            // the lease is the host record's lease list (written below with
                            // the record); the entry stays until completion
                            let politeness_wait_ms =
                                ready.min(now_ms).saturating_sub(h.free_since_ms);
                            h.leased.push(seq);
                            h.consume(seq, from);
                            h.held_origin = None;
                            h.rec.in_flight += 1;
                            h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
                            h.rec.counters.dispatched += 1;
                            h.rec.next_allowed_ms = now_ms + self.gap_ms(&h.rec);
                            inner.stats.dispatched += 1;
                            dirty.push(id);
                            items.push(WorkItem::Page(PageLease {
                                id: LeaseId { host_id: id, seq },
                                url: entry.url,
                                attempt: entry.attempts + 1,
                                depth: entry.depth,
                                via: entry.via,
                                hops: entry.hops,
                                politeness_wait_ms,
                            }));
                            self.schedule(inner, id);
                            continue 'hosts;
                        }
                    }
                }
            }
            Self::settle_hosts(inner, dirty, &mut batch, &mut dead);
            if batch.is_empty() {
                return Ok(items);
            }
            self.store.apply(batch)?;
            ticket = self.commit.written();
        }
        self.commit.sync(self.store.as_ref(), ticket)?;
        // only now: the head moves that made these segments dead are durable
        self.reclaimer.delete(dead);
        Ok(items)
    }

    /// The encoded entry with sequence `seq` of host `id`: its retry entry, its pending
    /// entry, or its place in a segment.
    fn entry_bytes(&self, id: u64, h: &HostMem, seq: u64) -> Result<Option<Vec<u8>>> {
        if h.retries.contains(&seq) {
            return Ok(self.store.get(&keys::retry(id, seq))?);
        }
        if let Some(b) = h.pending.get(seq) {
            return Ok(Some(b.to_vec()));
        }
        let i = h.segs.partition_point(|&(f, _)| f <= seq);
        let Some(&(first, n)) = i.checked_sub(1).and_then(|i| h.segs.get(i)) else {
            return Ok(None);
        };
        if seq >= first + n {
            return Ok(None);
        }
        let Some(v) = self.store.get(&keys::queued(id, first))? else {
            return Ok(None);
        };
        let seg = Segment::parse(&v)?;
        Ok(Some(seg.raw((seq - first) as usize)?.to_vec()))
    }

    fn quota_ok(&self, inner: &mut Inner) -> bool {
        match &self.limiter {
            None => true,
            Some((l, _)) => {
                let ok = l.check().is_ok();
                if !ok {
                    inner.stats.rate_limited += 1;
                }
                ok
            }
        }
    }

    fn drop_entry(
        batch: &mut Batch,
        (id, h): (u64, &mut HostMem),
        (seq, from): (u64, Source),
        entry: QueueEntry,
        reason: DropReason,
        detail: String,
        now_ms: u64,
    ) -> DropRecord {
        tracing::debug!(url = %entry.url, reason = reason.code(), %detail, "URL dropped");
        h.consume(seq, from);
        h.forget_retry(id, seq, batch);
        let hash = url_hash(&entry.url);
        let rec = DropRecord::of(entry, reason, detail, now_ms);
        batch.put(keys::dropped(hash), rec.encode());
        batch.put(keys::unlogged(hash), Vec::new());
        batch.cut();
        h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
        match reason {
            DropReason::GaveUp => h.rec.counters.given_up += 1,
            _ => h.rec.counters.dropped += 1,
        }
        rec
    }

    // ---------------------------------------------------------------- completion

    /// Report how a page lease ended. Durable on return.
    pub fn complete(&self, lease: LeaseId, outcome: PageOutcome, now_ms: u64) -> Result<()> {
        self.complete_batch(&[(lease, outcome)], now_ms)
    }

    /// Report several page leases at once (one flush).
    pub fn complete_batch(&self, done: &[(LeaseId, PageOutcome)], now_ms: u64) -> Result<()> {
        let mut batch = Batch::new();
        let mut dead = Vec::new();
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let mut dirty = Vec::with_capacity(done.len());
            for (lease, outcome) in done {
                let (id, seq) = (lease.host_id, lease.seq);
                let Some(h) = inner.hosts.get_mut(&lease.host_id) else {
                    return Err(FrontierError::UnknownLease(*lease));
                };
                let Some(pos) = h.leased.iter().position(|&s| s == lease.seq) else {
                    return Err(FrontierError::UnknownLease(*lease));
                };
                let done_ok = matches!(outcome, PageOutcome::Done { .. });
                // a retry needs the entry (attempts, URL); a success does not
                let entry = if done_ok {
                    None
                } else {
                    match self.entry_bytes(id, h, seq)? {
                        Some(v) => Some(QueueEntry::decode(&v)?),
                        None => return Err(FrontierError::UnknownLease(*lease)),
                    }
                };
                h.leased.swap_remove(pos);
                h.rec.in_flight = h.rec.in_flight.saturating_sub(1);
                // a slot is free: the next URL's politeness wait starts now
                h.free_since_ms = now_ms;
                // and whatever was set aside may be looked at again
                h.hold_until_ms = 0;
                if outcome.host_answered() {
                    h.timeouts.clear();
                }
                if let PageOutcome::Done { response_ms } = outcome {
                    h.forget_retry(id, seq, &mut batch);
                    batch.cut();
                    h.rec.last_response_ms = *response_ms;
                    h.rec.backoff_level = 0;
                    h.rec.counters.completed += 1;
                    h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(now_ms + self.gap_ms(&h.rec));
                    inner.stats.completed += 1;
                    dirty.push(lease.host_id);
                    continue;
                }
                if let PageOutcome::Throttled { response_ms, .. } = outcome {
                    h.rec.last_response_ms = *response_ms;
                }
                if matches!(outcome, PageOutcome::TimedOut { .. }) && !h.timeouts.contains(&seq) {
                    h.timeouts.push(seq);
                }
                let scope = outcome.scope(h.timeouts.len()).unwrap_or(FailureScope::Url);
                let why = outcome.reason();
                let jitter: f64 = inner.rng.gen_range(0.0..0.25);
                if scope == FailureScope::Host {
                    // server-wide: the host backs off (Retry-After, capped, or exponential
                    // with jitter)
                    h.rec.backoff_level += 1;
                    let wait = match outcome {
                        PageOutcome::Throttled {
                            retry_after: Some(d),
                            ..
                        } => (d.as_millis() as u64).min(self.cfg.retry_after_cap_ms),
                        _ => backoff_step_ms(
                            self.cfg.backoff_base_ms,
                            self.cfg.backoff_max_ms,
                            h.rec.backoff_level,
                            jitter,
                        ),
                    };
                    h.rec.backoff_until_ms = now_ms + wait;
                    tracing::info!(host = %h.key, level = h.rec.backoff_level, wait_ms = wait, %why, "host backs off");
                }
                // either way the host keeps its normal gap after this request
                h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(now_ms + self.gap_ms(&h.rec));
                let Some(mut entry) = entry else {
                    continue;
                };
                entry.attempts += 1;
                if entry.attempts >= self.cfg.max_attempts {
                    h.forget_retry(id, seq, &mut batch);
                    h.timeouts.retain(|&s| s != seq);
                    tracing::info!(url = %entry.url, attempts = entry.attempts, %why, "URL given up");
                    // drop_entry bookkeeping without touching the queue key
                    let hash = url_hash(&entry.url);
                    let detail = format!("{} attempts, last: {why}", entry.attempts);
                    let rec = DropRecord::of(entry, DropReason::GaveUp, detail, now_ms);
                    batch.put(keys::dropped(hash), rec.encode());
                    batch.put(keys::unlogged(hash), Vec::new());
                    batch.cut();
                    h.rec.counters.given_up += 1;
                    inner.stats.given_up += 1;
                    inner.push_drop(rec);
                } else {
                    // a retry entry with the attempts raised
                    batch.put(keys::retry(id, seq), entry.encode());
                    batch.cut();
                    if !h.retries.contains(&seq) {
                        h.retries.push(seq);
                    }
                    match scope {
                        // the URL was not at fault: back to the front of its queue
                        FailureScope::Host => {
                            let at = h.front.partition_point(|&s| s < seq);
                            h.front.insert(at, seq);
                        }
                        // the URL's own back-off, behind the URLs queued before it failed
                        FailureScope::Url => {
                            let wait = backoff_step_ms(
                                self.cfg.backoff_base_ms,
                                self.cfg.backoff_max_ms,
                                u64::from(entry.attempts),
                                jitter,
                            );
                            tracing::debug!(url = %entry.url, wait_ms = wait, %why, "URL retried later");
                            h.delayed.push(Delayed {
                                seq,
                                due_ms: now_ms + wait,
                                behind: h.pending.end(),
                            });
                        }
                    }
                    h.rec.counters.queued += 1;
                    h.rec.counters.retried += 1;
                    inner.stats.retried += 1;
                }
                dirty.push(lease.host_id);
            }
            for &id in &dirty {
                self.schedule(inner, id);
            }
            Self::settle_hosts(inner, dirty, &mut batch, &mut dead);
            self.store.apply(batch)?;
            ticket = self.commit.written();
        }
        self.commit.sync(self.store.as_ref(), ticket)?;
        // only now: the completions that made these segments dead are durable
        self.reclaimer.delete(dead);
        Ok(())
    }

    /// Report the outcome of a robots.txt fetch handed out by `next`. The new robots state
    /// is durable before any URL is gated by it.
    pub fn complete_robots(
        &self,
        lease: &RobotsLease,
        outcome: &RobotsFetchOutcome,
        response_ms: u64,
        now_ms: u64,
    ) -> Result<()> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let pending = inner
            .hosts
            .get(&lease.host_id)
            .and_then(|h| h.robots_pending.as_deref())
            == Some(lease.origin.as_str());
        if !pending {
            return Err(FrontierError::UnknownRobotsLease(lease.origin.clone()));
        }
        let mut batch = Batch::new();
        let state = self.apply_robots(inner, &lease.origin, outcome, now_ms, &mut batch)?;
        // robots.txt was a request to the site: the gap after it is the crawl-delay it
        // just gave (capped), from its answer on, like after any page
        let crawl_delay = RobotsCache::crawl_delay_of(
            inner.robots.backend().as_ref(),
            &self.cfg.user_agent,
            state.as_ref(),
            now_ms,
        )
        .map(|d| (d.as_millis() as u64).min(self.cfg.max_crawl_delay_ms));
        if let Some(h) = inner.hosts.get_mut(&lease.host_id) {
            h.robots_pending = None;
            h.rec.in_flight = h.rec.in_flight.saturating_sub(1);
            h.free_since_ms = now_ms;
            h.rec.last_response_ms = response_ms;
            // (the record's crawl-delay, and the clamp count, are set when the first page
            // is handed out, as for every page)
            let gap = self.gap_ms(&h.rec).max(crawl_delay.unwrap_or(0));
            h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(now_ms + gap);
            h.hold_until_ms = 0;
        }
        Self::journal_hosts(inner, &[lease.host_id], &mut batch);
        // a host left with nothing to do leaves memory (nothing to schedule then)
        Self::maybe_evict(inner, lease.host_id);
        Self::maybe_checkpoint(inner, &mut batch);
        // durable before it acts: flush while still holding the scheduler lock
        self.store.apply(batch)?;
        self.store.flush()?;
        inner.robots.put(&lease.origin, state);
        self.schedule(inner, lease.host_id);
        Ok(())
    }

    fn apply_robots(
        &self,
        inner: &mut Inner,
        origin: &str,
        outcome: &RobotsFetchOutcome,
        now_ms: u64,
        batch: &mut Batch,
    ) -> Result<Box<dyn OriginState>> {
        let backend = inner.robots.backend().clone();
        let mut state = match self.store.get(&keys::robots(origin))? {
            Some(b) => backend.decode(&b)?,
            None => backend.unknown(),
        };
        let jitter: u64 = inner.rng.gen();
        state.apply(outcome, now_ms, jitter);
        tracing::info!(%origin, state = state.kind(), "robots state changed");
        batch.put(keys::robots(origin), state.encode());
        Ok(state)
    }

    /// Record robots outcomes for origins without a lease (seeding, tests, benchmarks).
    /// Durable on return.
    pub fn set_robots(&self, outcomes: &[(&str, RobotsFetchOutcome)], now_ms: u64) -> Result<()> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut batch = Batch::new();
        let mut states = Vec::with_capacity(outcomes.len());
        for (origin, outcome) in outcomes {
            let st = self.apply_robots(inner, origin, outcome, now_ms, &mut batch)?;
            states.push((*origin, st));
        }
        self.store.apply(batch)?;
        self.store.flush()?;
        for (origin, st) in states {
            inner.robots.put(origin, st);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- inspection

    /// Whether a URL (any spelling) is in the seen-set.
    pub fn is_seen(&self, url: &str) -> Result<bool> {
        match canonicalize(url, self.cfg.max_url_len) {
            Err(_) => Ok(false),
            Ok(c) => {
                let hash = url_hash(c.as_str());
                let inner = self.inner.lock();
                Ok(self
                    .seen_hashes(&inner, std::iter::once(hash))?
                    .contains(&hash))
            }
        }
    }

    /// The drop / give-up record of a URL, if any.
    pub fn drop_record(&self, url: &str) -> Result<Option<DropRecord>> {
        let Ok(c) = canonicalize(url, self.cfg.max_url_len) else {
            return Ok(None);
        };
        match self.store.get(&keys::dropped(url_hash(c.as_str())))? {
            None => Ok(None),
            Some(v) => Ok(Some(DropRecord::decode(&v)?)),
        }
    }

    /// The stored record of a politeness key.
    pub fn host_record(&self, key: &str) -> Result<Option<HostRecord>> {
        // under the lock: a checkpoint moves records from the journal to `H`
        let inner = self.inner.lock();
        if let Some(h) = inner.by_key.get(key).and_then(|id| inner.hosts.get(id)) {
            return Ok(Some(h.rec));
        }
        if let Some(v) = inner.journal.evicted.get(key) {
            return Ok(Some(HostRecord::decode(v)?));
        }
        match self.store.get(&keys::host(key))? {
            None => Ok(None),
            Some(v) => Ok(Some(HostRecord::decode(&v)?)),
        }
    }

    /// The stored robots record of an origin (the backend's encoding).
    pub fn robots_record(&self, origin: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.store.get(&keys::robots(origin))?)
    }

    /// URLs dropped (robots, skipped host) or given up since the last call, oldest first,
    /// each durable before it is listed. Bounded: past 100 000 untaken events the newest
    /// are not kept (the store still has every [`DropRecord`]).
    pub fn take_drops(&self) -> Vec<DropRecord> {
        std::mem::take(&mut self.inner.lock().drop_events)
    }

    /// The caller has durably logged these drops (from [`Frontier::take_drops`]): they are
    /// not reported again after a restart. Drops taken but never acknowledged (a crash
    /// between the take and the log) are reported again at the next open.
    pub fn drops_logged(&self, drops: &[DropRecord]) -> Result<()> {
        if drops.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        for d in drops {
            batch.del(keys::unlogged(url_hash(&d.url)));
        }
        batch.cut();
        self.store.apply(batch)?;
        Ok(())
    }

    /// Stop handing out URLs of a politeness key (in flight ones finish). Durable before it
    /// returns: the pause survives a restart. Returns false if it was already paused.
    pub fn pause(&self, key: &str) -> Result<bool> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let added = inner.paused.insert(Arc::from(key));
        if let Some(&id) = inner.by_key.get(key) {
            if let Some(h) = inner.hosts.get_mut(&id) {
                h.scheduled = None;
            }
        }
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
        let removed = inner.paused.remove(key);
        if removed {
            let mut batch = Batch::new();
            batch.del(keys::paused(key));
            self.store.apply(batch)?;
            self.store.flush()?;
        }
        if let Some(&id) = inner.by_key.get(key) {
            self.schedule(inner, id);
        }
        Ok(removed)
    }

    /// Whether a politeness key is paused.
    pub fn is_paused(&self, key: &str) -> bool {
        self.inner.lock().paused.contains(key)
    }

    /// Politeness keys (in key order) with their records, up to `limit`, starting after
    /// `after` when given.
    pub fn hosts(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, HostRecord)>> {
        // held throughout: a checkpoint moves records from the journal to `H`
        let inner = self.inner.lock();
        let wanted = |key: &str| after.is_none_or(|a| key > a);
        let mut out: std::collections::BTreeMap<String, HostRecord> = Default::default();
        // the first `limit` stored keys after `after` ...
        let mut from_store = 0usize;
        for kv in self.store.scan_prefix(b"H") {
            if from_store >= limit {
                break;
            }
            let (k, v) = kv?;
            let key = String::from_utf8_lossy(&k[1..]).into_owned();
            if !wanted(&key) {
                continue;
            }
            from_store += 1;
            out.insert(key, HostRecord::decode(&v)?);
        }
        // ... merged with the records that are newer than `H` (in memory, or journaled)
        for (key, v) in &inner.journal.evicted {
            if wanted(key) {
                out.insert(key.to_string(), HostRecord::decode(v)?);
            }
        }
        for h in inner.hosts.values() {
            if wanted(&h.key) {
                out.insert(h.key.to_string(), h.rec);
            }
        }
        Ok(out.into_iter().take(limit).collect())
    }

    /// Stored robots records (origin, encoded state), in origin order, up to `limit`.
    pub fn robots_records(&self, limit: usize) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        for kv in self.store.scan_prefix(b"R") {
            if out.len() >= limit {
                break;
            }
            let (k, v) = kv?;
            out.push((String::from_utf8_lossy(&k[1..]).into_owned(), v));
        }
        Ok(out)
    }

    /// Every queued (not in flight) URL of a politeness key: in queue order, then those
    /// waiting out a retry back-off or set aside while their origin is held.
    pub fn queued_urls(&self, key: &str) -> Result<Vec<String>> {
        let inner = self.inner.lock();
        let Some(h) = inner.by_key.get(key).and_then(|id| inner.hosts.get(id)) else {
            return Ok(Vec::new());
        };
        let id = h.rec.id;
        let mut out = Vec::new();
        for &seq in &h.front {
            if let Some(b) = self.entry_bytes(id, h, seq)? {
                out.push(QueueEntry::decode(&b)?.url);
            }
        }
        let head = h.rec.head_seq;
        for &(first, n) in &h.segs {
            if first + n <= head {
                continue;
            }
            let Some(v) = self.store.get(&keys::queued(id, first))? else {
                continue;
            };
            let seg = Segment::parse(&v)?;
            for i in head.saturating_sub(first)..n {
                out.push(seg.entry(i as usize)?.url);
            }
        }
        for b in h.pending.from(head) {
            out.push(QueueEntry::decode(b)?.url);
        }
        // then the URLs waiting out their own retry back-off, and those of held origins
        let mut aside: Vec<u64> = h.delayed.iter().map(|d| d.seq).collect();
        for p in h.parked.values() {
            aside.extend(&p.seqs);
        }
        for seq in aside {
            if let Some(b) = self.entry_bytes(id, h, seq)? {
                out.push(QueueEntry::decode(&b)?.url);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    fn open(dir: &std::path::Path, checkpoint_always: bool) -> Frontier {
        let mut c = FrontierConfig::new(dir).without_gaps();
        c.seed = Some(1);
        if checkpoint_always {
            c.journal_checkpoint_bytes = 0;
        }
        Frontier::open(c).unwrap()
    }

    /// Host records survive reopening whether they were checkpointed to `H`, left only in
    /// the journal, or evicted from memory in between.
    #[test]
    fn journal_and_checkpoints_keep_host_records() {
        for checkpoint_always in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let hosts: Vec<String> = (0..30).map(|h| format!("j{h}.test")).collect();
            let mut expected = Vec::new();
            {
                let f = open(dir.path(), checkpoint_always);
                let outs: Vec<(String, RobotsFetchOutcome)> = hosts
                    .iter()
                    .map(|h| {
                        (
                            format!("http://{h}"),
                            RobotsFetchOutcome::ClientError { status: 404 },
                        )
                    })
                    .collect();
                let outs: Vec<(&str, RobotsFetchOutcome)> =
                    outs.iter().map(|(o, r)| (o.as_str(), r.clone())).collect();
                f.set_robots(&outs, T0).unwrap();
                for round in 0..3 {
                    let urls: Vec<String> = hosts
                        .iter()
                        .flat_map(|h| (0..3).map(move |i| format!("http://{h}/{round}/{i}")))
                        .collect();
                    f.enqueue_batch(&urls, T0).unwrap();
                    // dispatch and complete everything: hosts leave memory each round
                    loop {
                        let items = f.next_batch(T0 + round, 1000).unwrap();
                        if items.is_empty() {
                            break;
                        }
                        let done: Vec<(LeaseId, PageOutcome)> = items
                            .into_iter()
                            .filter_map(|w| match w {
                                WorkItem::Page(p) => {
                                    Some((p.id, PageOutcome::Done { response_ms: 7 }))
                                }
                                WorkItem::Robots(_) => None,
                            })
                            .collect();
                        f.complete_batch(&done, T0 + round).unwrap();
                    }
                }
                assert_eq!(f.hosts_in_memory(), 0);
                // one more URL each, half of them leased and left in flight
                let urls: Vec<String> = hosts.iter().map(|h| format!("http://{h}/last")).collect();
                f.enqueue_batch(&urls, T0 + 10).unwrap();
                let items = f.next_batch(T0 + 10, 15).unwrap();
                assert_eq!(items.len(), 15);
                for h in &hosts {
                    expected.push((h.clone(), f.host_record(h).unwrap().unwrap()));
                }
                let listed = f.hosts(None, 1000).unwrap();
                assert_eq!(listed.len(), hosts.len());
                // checkpointed after every batch, or never (16 MiB not reached)
                assert_eq!(f.store.scan_prefix(b"J").count() == 0, checkpoint_always);
            }
            // twice: the journal is kept at open (no checkpoint there), and a second
            // open over it must read the same
            for reopen in 0..2 {
                let f = open(dir.path(), false);
                assert_eq!(f.stats().recovered_leases, 15);
                assert_eq!(
                    f.store.scan_prefix(b"J").count() == 0,
                    checkpoint_always,
                    "reopen {reopen}"
                );
                for (h, before) in &expected {
                    let after = f.host_record(h).unwrap().unwrap();
                    assert_eq!(after.id, before.id, "{h}");
                    assert_eq!(after.in_flight, 0, "{h}");
                    assert_eq!(after.counters.enqueued, 10, "{h}");
                    assert_eq!(after.counters.completed, 9, "{h}");
                    assert_eq!(after.counters.queued, 1, "{h}");
                    assert_eq!(after.last_response_ms, 7, "{h}");
                    assert_eq!(f.queued_urls(h).unwrap(), vec![format!("http://{h}/last")]);
                }
                assert_eq!(f.hosts(None, 1000).unwrap().len(), hosts.len());
            }
            let f = open(dir.path(), false);
            assert_eq!(f.hosts(Some("j5.test"), 3).unwrap().len(), 3);
        }
    }

    fn done(items: Vec<WorkItem>) -> Vec<(LeaseId, PageOutcome, String)> {
        items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 1 }, p.url)),
                WorkItem::Robots(_) => None,
            })
            .collect()
    }

    /// With the intake log folded after every batch, queues live in segments and the
    /// seen-set in buckets (split as they grow); FIFO order, retries (behind the queue),
    /// leases returned at open and duplicates all behave as before, and consumed segments
    /// are deleted.
    #[test]
    fn folded_segments_and_seen_buckets_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mk = || {
            let mut c = FrontierConfig::new(dir.path()).without_gaps();
            c.seed = Some(3);
            c.intake_buffer_bytes = 1;
            c.max_in_flight_per_host = 4;
            Frontier::open(c).unwrap()
        };
        let hosts = 3;
        let urls: Vec<String> = (0..6000)
            .map(|k| format!("http://f{}.test/p/{k}", k % hosts))
            .collect();
        let mut completed: Vec<String> = Vec::new();
        let mut owed: Vec<String> = Vec::new();
        let mut failed: Vec<String> = Vec::new();
        {
            let f = mk();
            let outs: Vec<(String, RobotsFetchOutcome)> = (0..hosts)
                .map(|h| {
                    (
                        format!("http://f{h}.test"),
                        RobotsFetchOutcome::ClientError { status: 404 },
                    )
                })
                .collect();
            let outs: Vec<(&str, RobotsFetchOutcome)> =
                outs.iter().map(|(o, r)| (o.as_str(), r.clone())).collect();
            f.set_robots(&outs, T0).unwrap();
            for chunk in urls.chunks(500) {
                let r = f.enqueue_batch(chunk, T0).unwrap();
                assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
            }
            assert_eq!(f.store.scan_prefix(b"W").count(), 0, "log folded");
            assert!(f.store.scan_prefix(b"B").count() > 1, "buckets split");
            assert_eq!(f.store.scan_prefix(b"S").count(), 0);
            // 12 batches x 3 hosts, one segment each
            assert_eq!(f.store.scan_prefix(b"Q").count(), 36);
            let r = f.enqueue_batch(&urls[..50], T0).unwrap();
            assert!(r.iter().all(|x| *x == EnqueueResult::Duplicate));
            // a round: complete some, fail some, leave some in flight
            let items = done(f.next_batch(T0, 100).unwrap());
            assert_eq!(items.len(), 12);
            let mut batch = Vec::new();
            for (n, (id, ok, url)) in items.into_iter().enumerate() {
                match n % 3 {
                    0 => {
                        completed.push(url);
                        batch.push((id, ok));
                    }
                    1 => {
                        failed.push(url.clone());
                        owed.push(url);
                        batch.push((
                            id,
                            PageOutcome::Failed {
                                reason: "status 500".into(),
                            },
                        ));
                    }
                    _ => owed.push(url),
                }
            }
            f.complete_batch(&batch, T0).unwrap();
        }
        let f = mk();
        let r = f.enqueue_batch(&urls[5950..], T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Duplicate));
        for u in &owed {
            let host = u.split('/').nth(2).unwrap();
            assert!(f.queued_urls(host).unwrap().contains(u), "{u} owed");
        }
        // everything not completed comes out exactly once; returned and retried URLs
        // first, then each host in FIFO order
        let mut got: Vec<String> = Vec::new();
        let mut now = T0 + 10_000_000;
        loop {
            let items = done(f.next_batch(now, 1000).unwrap());
            if items.is_empty() {
                break;
            }
            let batch: Vec<(LeaseId, PageOutcome)> =
                items.iter().map(|(id, o, _)| (*id, o.clone())).collect();
            got.extend(items.into_iter().map(|(_, _, u)| u));
            f.complete_batch(&batch, now).unwrap();
            now += 1;
        }
        let mut all: Vec<String> = got.iter().chain(&completed).cloned().collect();
        all.sort();
        let mut want = urls.clone();
        want.sort();
        assert_eq!(all, want);
        // leases left in flight come back first; URLs that failed on their own go
        // behind the queue
        for u in &owed {
            let pos = got.iter().position(|g| g == u).unwrap();
            if failed.contains(u) {
                let host = u.split('/').nth(2).unwrap();
                let last_queued = got
                    .iter()
                    .rposition(|g| g.split('/').nth(2) == Some(host) && !owed.contains(g))
                    .unwrap();
                assert!(
                    pos > last_queued,
                    "{u} retried at {pos}, before {last_queued}"
                );
            } else {
                assert!(pos < 12, "{u} came back at {pos}");
            }
        }
        for h in 0..hosts {
            let idx: Vec<usize> = got
                .iter()
                .filter(|u| u.starts_with(&format!("http://f{h}.test/")) && !owed.contains(u))
                .map(|u| u.rsplit('/').next().unwrap().parse().unwrap())
                .collect();
            assert!(idx.windows(2).all(|w| w[0] < w[1]), "host {h} out of order");
        }
        assert_eq!(f.hosts_in_memory(), 0);
        assert_eq!(
            f.store.scan_prefix(b"T").count(),
            0,
            "retry entries deleted"
        );
        // consumed segments are deleted in the background: done once the frontier is
        // dropped (no reopen to clean up after it)
        let store = f.store.clone();
        drop(f);
        assert_eq!(
            store.scan_prefix(b"Q").count(),
            0,
            "consumed segments deleted"
        );
    }

    /// A store written by an earlier version (per-URL `S` and `Q` keys, a version-1 host
    /// record with a lease list, an `L` lease key) opens as it is: nothing queued is lost,
    /// leased URLs come back, and every URL it had seen is still a duplicate.
    #[test]
    fn store_of_an_earlier_version_opens_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let urls: Vec<String> = (0..5).map(|i| format!("http://old.test/{i}")).collect();
        {
            let store = SledStore::open(dir.path(), &crate::store::SledConfig::default()).unwrap();
            let mut b = Batch::new();
            // version 1: 18 fixed u64 fields (id 1, enqueued 5, queued 2), lease list [1]
            let mut rec = vec![1u8];
            for v in [1u64, 0, 1, 0, 0, 0, 0, 0, 5, 2] {
                rec.extend_from_slice(&v.to_le_bytes());
            }
            rec.extend_from_slice(&[0u8; 8 * 8]);
            rec.extend_from_slice(&1u64.to_le_bytes());
            rec.extend_from_slice(&1u64.to_le_bytes());
            b.put(keys::host("old.test"), rec);
            b.put(keys::NEXT_HOST_ID.to_vec(), 2u64.to_le_bytes().to_vec());
            let v1 = |u: &str| {
                let mut e = vec![1u8];
                e.extend_from_slice(&0u32.to_le_bytes());
                e.extend_from_slice(u.as_bytes());
                e
            };
            // /0 was completed (its entry deleted), /1 leased, /2 and /3 queued, /4 leased
            // the older way (an `L` key)
            for seq in 1..4u64 {
                b.put(keys::queued(1, seq), v1(&urls[seq as usize]));
            }
            b.put(keys::leased(1, 4), v1(&urls[4]));
            for u in &urls {
                b.put(keys::seen(url_hash(u)), Vec::new());
            }
            store.apply(b).unwrap();
            store.flush().unwrap();
        }
        let f = open(dir.path(), false);
        f.set_robots(
            &[(
                "http://old.test",
                RobotsFetchOutcome::ClientError { status: 404 },
            )],
            T0,
        )
        .unwrap();
        let r = f.enqueue_batch(&urls, T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Duplicate), "{r:?}");
        let r = f.enqueue_batch(&["http://old.test/new"], T0).unwrap();
        assert_eq!(r, vec![EnqueueResult::Queued]);
        let mut got = Vec::new();
        for t in 0..10 {
            let items = done(f.next_batch(T0 + t, 10).unwrap());
            let batch: Vec<(LeaseId, PageOutcome)> =
                items.iter().map(|(id, o, _)| (*id, o.clone())).collect();
            got.extend(items.into_iter().map(|(_, _, u)| u));
            f.complete_batch(&batch, T0 + t).unwrap();
        }
        let mut want: Vec<String> = urls[1..].to_vec();
        want.push("http://old.test/new".into());
        assert_eq!(got, want);
        drop(f);
        let f = open(dir.path(), false);
        assert_eq!(f.hosts_in_memory(), 0);
        assert!(f.is_seen("http://old.test/0").unwrap());
        assert!(f.is_seen("http://old.test/new").unwrap());
    }
}
