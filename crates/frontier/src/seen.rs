//! The seen-set's and the intake log's in-memory state.

use std::collections::HashSet;

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
    pub(crate) recent: HashSet128,
    /// The store has per-URL `S` keys from an older version.
    pub(crate) legacy: bool,
}

impl SeenSet {
    pub(crate) fn bucket_of(&self, hash: u128) -> u128 {
        let i = self.starts.partition_point(|&s| s <= hash);
        self.starts[i.saturating_sub(1)]
    }
}

/// The intake log since the last fold.
pub(crate) struct IntakeLog {
    /// Sequence of the next `W` record.
    pub(crate) next_seq: u64,
    /// Oldest `W` record not yet folded.
    pub(crate) first_seq: u64,
    /// Bytes written to `W` records since the last fold.
    pub(crate) bytes: u64,
    /// Number of the next fold (the first part of its segments' keys).
    pub(crate) next_fold: u32,
    /// Queue entries logged since the last fold, and the hosts they went to: a fold gives
    /// each such host a segment, so their ratio is the size of the segments it would make.
    pub(crate) entries: u64,
    pub(crate) hosts: u64,
}

/// A fold makes segments of at least this many entries on average, unless the log has
/// grown to [`THIN_FOLD_FACTOR`] times the buffer. Spread over a million hosts, the buffer
/// holds about one URL per host: folding then would write one key per URL, and sled's
/// memory grows with its keys (docs/benchmarks.md, "Issue 13, session 7").
pub(crate) const MIN_ENTRIES_PER_SEGMENT: u64 = 4;

/// How far past `intake_buffer_bytes` the log may grow while the fold would be thin.
pub(crate) const THIN_FOLD_FACTOR: u64 = 4;

impl IntakeLog {
    /// Whether the log since the last fold, `bytes` long, is to be folded now.
    pub(crate) fn fold_due(&self, buffer_bytes: u64) -> bool {
        let thin = self.entries < MIN_ENTRIES_PER_SEGMENT.saturating_mul(self.hosts);
        self.bytes >= buffer_bytes
            && (!thin || self.bytes >= buffer_bytes.saturating_mul(THIN_FOLD_FACTOR))
    }
}
