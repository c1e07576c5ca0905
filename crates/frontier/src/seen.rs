//! The seen-set's and the intake log's in-memory state.

use std::collections::HashSet;

use hashbrown::hash_table::{Entry, HashTable};

/// A set of URL hashes. They are xxh3-128 outputs, already uniform, so the set hashes them
/// by taking their low 64 bits instead of running SipHash over 16 bytes.
pub(crate) type HashSet128 = HashSet<u128, std::hash::BuildHasherDefault<UrlHashHasher>>;

/// Hasher for [`HashSet128`]: the low 64 bits of the u128 written.
#[derive(Default)]
pub(crate) struct UrlHashHasher(u64);

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
pub(crate) struct SeenSet {
    /// Lowest hash of each stored bucket, sorted; always starts with 0.
    pub(crate) starts: Vec<u128>,
    /// Hashes queued since the last fold (their URLs are in the intake log).
    pub(crate) recent: RecentHashes,
    /// The hashes of the fold under way, sorted (merged into the buckets a slice at a
    /// time; held until its last slice).
    pub(crate) folding: Vec<u128>,
    /// The store has per-URL `S` keys from an older version.
    pub(crate) legacy: bool,
}

impl SeenSet {
    /// Whether `hash` is held in memory: queued since the last fold, or being folded.
    pub(crate) fn holds(&self, hash: u128) -> bool {
        self.recent.contains(&hash) || self.folding.binary_search(&hash).is_ok()
    }

    pub(crate) fn bucket_of(&self, hash: u128) -> u128 {
        let i = self.starts.partition_point(|&s| s <= hash);
        self.starts[i.saturating_sub(1)]
    }
}

/// The hashes queued since the last fold: a list in arrival order and an index of 4-byte
/// positions into it. At 4M hashes (a fold's worth at a million hosts) that is about 27
/// bytes a hash, against 36 in a `HashSet<u128>` (17 bytes a bucket, twice as many buckets
/// as hashes), which `drain` also left allocated after the fold, all through the crawl;
/// and the fold sorts the list in place instead of copying the set into one (both were
/// held at once: 206 MB at 4M). Docs: benchmarks.md, "Memory at 10M URLs over 1M hosts".
#[derive(Default)]
pub(crate) struct RecentHashes {
    hashes: Vec<u128>,
    /// Positions in `hashes`, hashed by the hash's low 64 bits (uniform already).
    index: HashTable<u32>,
}

impl RecentHashes {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    pub(crate) fn contains(&self, hash: &u128) -> bool {
        let hashes = &self.hashes;
        self.index
            .find(*hash as u64, |&i| hashes.get(i as usize) == Some(hash))
            .is_some()
    }

    /// Adds `hash`; false if it was there.
    pub(crate) fn insert(&mut self, hash: u128) -> bool {
        let Self { hashes, index } = self;
        let at = |i: &u32| hashes.get(*i as usize).copied().unwrap_or_default();
        match index.entry(hash as u64, |i| at(i) == hash, |i| at(i) as u64) {
            Entry::Occupied(_) => false,
            Entry::Vacant(slot) => {
                // a fold comes long before 4 billion (the log is folded by 256 MiB); past
                // that a hash would be listed but not found, so a duplicate could be
                // queued: never lost, at worst fetched twice
                if let Ok(i) = u32::try_from(hashes.len()) {
                    slot.insert(i);
                }
                hashes.push(hash);
                true
            }
        }
    }

    /// Every hash, sorted; the set is left empty and its memory given back.
    pub(crate) fn take_sorted(&mut self) -> Vec<u128> {
        self.index = HashTable::new();
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.sort_unstable();
        hashes
    }

    /// Heap bytes held (the list and the index, as allocated).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.hashes.capacity() * std::mem::size_of::<u128>() + self.index.allocation_size()
    }
}

/// The intake log since the last fold.
pub(crate) struct IntakeLog {
    /// Sequence of the next `W` record.
    pub(crate) next_seq: u64,
    /// Oldest `W` record not yet folded.
    pub(crate) first_seq: u64,
    /// Bytes written to `W` records since the last fold started.
    pub(crate) bytes: u64,
    /// Number of the next fold (the first part of its segments' keys).
    pub(crate) next_fold: u32,
    /// Queue entries logged since the last fold, and the hosts they went to: a fold gives
    /// each such host a segment, so their ratio is the size of the segments it would make.
    pub(crate) entries: u64,
    pub(crate) hosts: u64,
    /// When the log last grew (unix ms; 0: not since the start): a quiet log is folded.
    pub(crate) last_logged_ms: u64,
}

/// The intake is quiet once nothing has been queued for this long (ms): the log is then
/// folded without waiting for it to fill ([`IntakeLog::quiet_fold_due`]).
pub(crate) const QUIET_FOLD_AFTER_MS: u64 = 60_000;
/// ... if it holds at least this many bytes.
pub(crate) const QUIET_FOLD_MIN_BYTES: u64 = 1 << 20;

/// A fold makes segments of at least this many entries on average, unless the log has
/// grown to [`THIN_FOLD_FACTOR`] times the buffer. Spread over a million hosts, the buffer
/// holds about one URL per host: folding then would write one key per URL, and sled's
/// memory grows with its keys (docs/benchmarks.md, "The store under sled").
pub(crate) const MIN_ENTRIES_PER_SEGMENT: u64 = 4;

/// How far past `intake_buffer_bytes` the log may grow while the fold would be thin.
pub(crate) const THIN_FOLD_FACTOR: u64 = 4;

impl IntakeLog {
    /// Whether the log is to be folded now because nothing has been queued for a while:
    /// after a bulk submit the log may not grow again for hours, and until its fold its
    /// entries (the last URLs of a million hosts) and their hashes (27 bytes each) are
    /// held in memory while the crawl drains them (docs/benchmarks.md, "Memory at 10M
    /// URLs over 1M hosts").
    pub(crate) fn quiet_fold_due(&self, now_ms: u64) -> bool {
        self.bytes >= QUIET_FOLD_MIN_BYTES
            && now_ms.saturating_sub(self.last_logged_ms) >= QUIET_FOLD_AFTER_MS
    }

    /// Whether the log since the last fold, `bytes` long, is to be folded now.
    pub(crate) fn fold_due(&self, buffer_bytes: u64) -> bool {
        let thin = self.entries < MIN_ENTRIES_PER_SEGMENT.saturating_mul(self.hosts);
        self.bytes >= buffer_bytes
            && (!thin || self.bytes >= buffer_bytes.saturating_mul(THIN_FOLD_FACTOR))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u64) -> u128 {
        xxhash_rust::xxh3::xxh3_128(&i.to_le_bytes())
    }

    /// What went in is found, a second insert says so, and the fold's list is every hash
    /// once, sorted, leaving the set empty.
    #[test]
    fn recent_hashes_answer_like_a_set() {
        let mut r = RecentHashes::default();
        let mut model = std::collections::BTreeSet::new();
        for i in 0..10_000u64 {
            let h = hash(i % 7_000);
            assert_eq!(r.insert(h), model.insert(h), "insert #{i}");
        }
        assert_eq!(r.len(), model.len());
        assert!((0..7_000).all(|i| r.contains(&hash(i))));
        assert!((7_000..9_000).all(|i| !r.contains(&hash(i))));
        // hashes equal in their low 64 bits (the index's hash) are still told apart
        let twin = hash(1) ^ (1u128 << 100);
        assert!(!r.contains(&twin));
        assert!(r.insert(twin));
        assert!(r.contains(&twin) && r.contains(&hash(1)));
        model.insert(twin);
        let sorted = r.take_sorted();
        assert_eq!(sorted, model.into_iter().collect::<Vec<_>>());
        assert_eq!(r.len(), 0);
        assert!(!r.contains(&hash(1)));
        assert_eq!(r.heap_bytes(), 0);
    }

    /// Half a fold's worth at a million hosts (2M hashes) in under 30 bytes a hash; the
    /// `HashSet<u128>` it replaces held 36.
    #[test]
    fn two_million_recent_hashes_stay_within_their_budget() {
        let n = 2_000_000u64;
        let mut r = RecentHashes::default();
        for i in 0..n {
            r.insert(hash(i));
        }
        let per_hash = r.heap_bytes() as f64 / n as f64;
        assert!(per_hash < 30.0, "{per_hash:.1} bytes a hash");
    }
}
