//! The done-set: URLs an external fetcher reported done for good (a lease completed with no
//! next date: url-frontier's KnownURLItem with date 0). A KnownURLItem with a date put later
//! queues such a URL again (StormCrawler's recrawl), while a URL still queued stays where it
//! is; see `Frontier::fetcher_done`.
//!
//! Stored like the seen-set, not as one key per URL: a sled insert per completed URL was the
//! largest single cost of a url-frontier report (docs/benchmarks.md, "gRPC"). Each
//! completion batch appends one log record (`keys::done_log`) with its hashes; they stay in
//! memory until a fold merges them into 4,096 buckets by the hashes' top 12 bits
//! (`keys::done_bucket`) and deletes the log records. A re-queue unmarks a hash the same way;
//! the last mark of a hash wins. A crash part way through a fold leaves the log, which is
//! replayed at open over whatever buckets were already rewritten (marks are idempotent).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::error::Result;
use crate::seen::UrlHashHasher;
use crate::store::codec::CodecError;
use crate::store::{keys, packed, Batch, Store};

/// Marks held in memory before a fold (about 10 MB of map at most).
pub(crate) const FOLD_AT: usize = 262_144;
/// A fold goes to the store in pieces of about this many bytes.
const FOLD_PIECE_BYTES: usize = 4 << 20;
const BUCKET_BITS: u32 = 12;

#[derive(Debug, Default)]
pub(crate) struct DoneSet {
    /// Marks since the last fold: true done, false no longer done.
    recent: HashMap<u128, bool, BuildHasherDefault<UrlHashHasher>>,
    /// Log records `log_first..log_next` are in the store.
    log_first: u64,
    log_next: u64,
}

fn bucket_index(hash: u128) -> u16 {
    (hash >> (128 - BUCKET_BITS)) as u16
}

/// A log record: the count of hashes marked done (u32 LE), those hashes, then the hashes
/// unmarked, each 16 bytes big-endian.
fn encode_record(done: &[u128], undone: &[u128]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 16 * (done.len() + undone.len()));
    out.extend_from_slice(&(done.len() as u32).to_le_bytes());
    for h in done.iter().chain(undone) {
        out.extend_from_slice(&h.to_be_bytes());
    }
    out
}

fn bad(why: &'static str) -> CodecError {
    CodecError {
        what: "done-set log record",
        why,
    }
}

/// The marks of a log record in order: (hash, done).
fn decode_record(bytes: &[u8]) -> std::result::Result<Vec<(u128, bool)>, CodecError> {
    let (n, body) = bytes
        .split_first_chunk::<4>()
        .ok_or_else(|| bad("shorter than its count"))?;
    let n = u32::from_le_bytes(*n) as usize;
    if body.len() % 16 != 0 || body.len() / 16 < n {
        return Err(bad("length does not match its count"));
    }
    Ok(body
        .chunks_exact(16)
        .enumerate()
        .map(|(i, c)| {
            let mut a = [0u8; 16];
            a.copy_from_slice(c);
            (u128::from_be_bytes(a), i < n)
        })
        .collect())
}

impl DoneSet {
    /// The done-set of `store`: its log replayed in order over the buckets.
    pub(crate) fn load(store: &dyn Store) -> Result<DoneSet> {
        let mut set = DoneSet::default();
        let mut first = None;
        for kv in store.scan_prefix(b"E") {
            let (k, v) = kv?;
            let Some(seq) = k
                .get(1..9)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
            else {
                continue;
            };
            first.get_or_insert(seq);
            set.log_next = seq + 1;
            for (hash, done) in decode_record(&v)? {
                set.recent.insert(hash, done);
            }
        }
        set.log_first = first.unwrap_or(0);
        Ok(set)
    }

    /// Mark `done` as done for good and `undone` as no longer so: one log record in
    /// `batch` (durable with it), and in memory at once.
    pub(crate) fn mark(&mut self, batch: &mut Batch, done: &[u128], undone: &[u128]) {
        if done.is_empty() && undone.is_empty() {
            return;
        }
        batch.put(keys::done_log(self.log_next), encode_record(done, undone));
        batch.cut();
        self.log_next += 1;
        for &h in done {
            self.recent.insert(h, true);
        }
        for &h in undone {
            self.recent.insert(h, false);
        }
    }

    /// Whether `hash` is marked done for good (the marks not yet folded, then its bucket,
    /// then the per-URL `e` key older versions wrote).
    #[cfg(test)]
    pub(crate) fn contains(&self, store: &dyn Store, hash: u128) -> Result<bool> {
        match self.recent_mark(hash) {
            Some(done) => Ok(done),
            None => DoneSet::stored_contains(store, hash),
        }
    }

    /// The last mark of `hash` not yet folded, if any (read under the frontier's lock).
    pub(crate) fn recent_mark(&self, hash: u128) -> Option<bool> {
        self.recent.get(&hash).copied()
    }

    /// Whether the folded buckets (or an older version's per-URL `e` key) mark `hash` done:
    /// store reads only, made without the frontier's lock.
    pub(crate) fn stored_contains(store: &dyn Store, hash: u128) -> Result<bool> {
        let mut found = Ok(false);
        store.read_with(&keys::done_bucket(bucket_index(hash)), &mut |v| {
            if let Some(v) = v {
                found = packed::bucket_contains(v, hash);
            }
        })?;
        if found? {
            return Ok(true);
        }
        Ok(store.contains(&keys::fetcher_done(hash))?)
    }

    pub(crate) fn fold_due(&self) -> bool {
        self.recent.len() >= FOLD_AT
    }

    /// Merge the marks held in memory into the buckets, then delete the log records. Call it
    /// after the batch with the latest log record is applied; the caller's flush makes it
    /// durable.
    pub(crate) fn fold(&mut self, store: &dyn Store) -> Result<()> {
        let mut marks: Vec<(u128, bool)> = self.recent.drain().collect();
        marks.sort_unstable_by_key(|m| m.0);
        let mut out = Batch::new();
        let mut held = 0usize;
        let mut i = 0;
        while i < marks.len() {
            let index = bucket_index(marks[i].0);
            let n = marks[i..]
                .iter()
                .take_while(|m| bucket_index(m.0) == index)
                .count();
            let group = &marks[i..i + n];
            i += n;
            let key = keys::done_bucket(index);
            let old = match store.get(&key)? {
                Some(v) => packed::decode_bucket(&v)?,
                None => Vec::new(),
            };
            let added: Vec<u128> = group.iter().filter(|m| m.1).map(|m| m.0).collect();
            let mut merged = packed::merge_sorted(&old, &added);
            if group.iter().any(|m| !m.1) {
                merged.retain(|h| {
                    group
                        .binary_search_by_key(h, |m| m.0)
                        .map_or(true, |at| group[at].1)
                });
            }
            let v = packed::encode_bucket(&merged);
            held += v.len();
            out.put(key, v);
            out.cut();
            if held >= FOLD_PIECE_BYTES {
                store.apply(std::mem::take(&mut out))?;
                held = 0;
            }
        }
        for seq in self.log_first..self.log_next {
            out.del(keys::done_log(seq));
            out.cut();
        }
        store.apply(out)?;
        self.log_first = self.log_next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SledStore;

    fn store() -> (tempfile::TempDir, SledStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = SledStore::open(dir.path(), &crate::store::SledConfig::default()).expect("open");
        (dir, s)
    }

    /// A hash in bucket `b` (top 12 bits), distinct by `low`.
    fn h(b: u16, low: u64) -> u128 {
        (u128::from(b) << 116) | u128::from(low)
    }

    #[test]
    fn marks_survive_a_fold_and_a_reopen_and_the_last_mark_wins() {
        let (_dir, s) = store();
        let mut set = DoneSet::default();
        let mut b = Batch::new();
        set.mark(&mut b, &[h(1, 1), h(1, 2), h(7, 3)], &[]);
        set.mark(&mut b, &[], &[h(1, 2)]);
        s.apply(b).expect("apply");
        for (hash, want) in [(h(1, 1), true), (h(1, 2), false), (h(7, 3), true)] {
            assert_eq!(set.contains(&s, hash).expect("contains"), want, "{hash:x}");
        }
        // reopened from the log alone
        let again = DoneSet::load(&s).expect("load");
        assert_eq!(again.recent.len(), 3);
        assert!(again.contains(&s, h(1, 1)).expect("contains"));
        assert!(!again.contains(&s, h(1, 2)).expect("contains"));
        // folded: the buckets answer, the log is gone
        let mut set = again;
        set.fold(&s).expect("fold");
        assert!(set.recent.is_empty());
        assert!(s.scan_prefix(b"E").next().is_none(), "log deleted");
        assert!(set.contains(&s, h(1, 1)).expect("contains"));
        assert!(!set.contains(&s, h(1, 2)).expect("contains"));
        assert!(set.contains(&s, h(7, 3)).expect("contains"));
        // an unmark after the fold removes the hash from its bucket at the next fold
        let mut b = Batch::new();
        set.mark(&mut b, &[h(7, 4)], &[h(7, 3)]);
        s.apply(b).expect("apply");
        set.fold(&s).expect("fold");
        let reopened = DoneSet::load(&s).expect("load");
        assert!(!reopened.contains(&s, h(7, 3)).expect("contains"));
        assert!(reopened.contains(&s, h(7, 4)).expect("contains"));
        assert!(!reopened.contains(&s, h(9, 9)).expect("contains"));
    }

    #[test]
    fn a_fold_cut_short_is_completed_by_replaying_the_log() {
        let (_dir, s) = store();
        let mut set = DoneSet::default();
        let mut b = Batch::new();
        set.mark(&mut b, &[h(2, 1)], &[]);
        set.mark(&mut b, &[], &[h(2, 1)]);
        s.apply(b).expect("apply");
        // the bucket written as an earlier fold left it (h(2, 1) done), the log not deleted
        let mut b = Batch::new();
        b.put(keys::done_bucket(2), packed::encode_bucket(&[h(2, 1)]));
        s.apply(b).expect("apply");
        let set = DoneSet::load(&s).expect("load");
        assert!(
            !set.contains(&s, h(2, 1)).expect("contains"),
            "the log's last mark wins"
        );
    }

    #[test]
    fn a_malformed_log_record_is_an_error_naming_it() {
        assert!(decode_record(&[1, 0]).is_err());
        let e = decode_record(&[2, 0, 0, 0, 1]).expect_err("bad length");
        assert_eq!(e.what, "done-set log record");
        assert_eq!(
            decode_record(&encode_record(&[5], &[6])).expect("ok"),
            vec![(5, true), (6, false)]
        );
    }
}
