//! Packed on-disk formats: many URLs per store value.
//!
//! A store write costs about the same whether it carries 60 bytes or 60 KiB (measured on
//! sled: ~14 µs per key at 1M keys, ~250 MB/s for large values), so the frontier never
//! writes one key per URL on its hot paths:
//!
//! - **Intake log** (`W` records): the URLs an `enqueue_batch` queued (host id, queue
//!   sequence, entry), in values under [`VALUE_TARGET_BYTES`] written as one unit. It is
//!   what makes an enqueue durable.
//! - **Queue segments** (`Q` + host id + first sequence): up to [`SEGMENT_MAX_ENTRIES`]
//!   consecutive entries of one host's queue. The intake log is folded into segments once
//!   it holds `intake_buffer_bytes`; until then the host's newest entries are also held in
//!   memory ([`Pending`]), which that same setting bounds.
//! - **Seen buckets** (`B` + lowest hash): a sorted run of 128-bit URL hashes; the buckets
//!   partition the hash space and split when they grow past [`BUCKET_MAX`].
//!
//! Every decoder here checks lengths and returns a [`CodecError`] instead of panicking.

use crate::store::codec::{CodecError, QueueEntry};

/// Segment format version byte (distinct from a single queue entry's 1 or 2, which older
/// stores kept one per key: such a value reads as a one-entry segment; entries of version 3
/// and later were never stored one per key).
const SEGMENT_V1: u8 = 0x10;
/// Entries per segment written by a fold (a host with more pending gets several).
pub const SEGMENT_MAX_ENTRIES: usize = 256;
/// The size every packed value written on a hot path stays under (segments, seen buckets,
/// due-index keys, intake-log records): one entry may exceed it alone, never a value of
/// several.
///
/// Why: sled keeps up to 17 values in a leaf and writes a leaf larger than a quarter of its
/// 512 KiB log segment as a separate blob file, and its page cache then charges that leaf
/// only the ~40 bytes of its blob pointer. Such leaves are never evicted, whatever
/// `cache_bytes` says: with 32 KiB seen buckets and whole-batch due keys the daemon's
/// memory grew with every URL it knew (docs/benchmarks.md, "10M scheduled URLs"). 17 values
/// of 6 KiB stay under the threshold, so the cache bound holds.
pub const VALUE_TARGET_BYTES: usize = 6 * 1024;
/// Intake-log record version byte.
const INTAKE_V1: u8 = 0x30;
/// Seen-bucket version byte.
const BUCKET_V1: u8 = 0x20;
/// Hashes a bucket may hold before a fold splits it in halves: 16 bytes each, so a full
/// bucket stays under [`VALUE_TARGET_BYTES`].
pub const BUCKET_MAX: usize = 320;

fn err(what: &'static str, why: &'static str) -> CodecError {
    CodecError { what, why }
}

fn u32_at(b: &[u8], i: usize, what: &'static str) -> Result<u32, CodecError> {
    let a: [u8; 4] = b
        .get(i..i + 4)
        .and_then(|s| s.try_into().ok())
        .ok_or(err(what, "truncated"))?;
    Ok(u32::from_le_bytes(a))
}

fn u64_at(b: &[u8], i: usize, what: &'static str) -> Result<u64, CodecError> {
    let a: [u8; 8] = b
        .get(i..i + 8)
        .and_then(|s| s.try_into().ok())
        .ok_or(err(what, "truncated"))?;
    Ok(u64::from_le_bytes(a))
}

// ------------------------------------------------------------------- segments

/// Split `items` (with their encoded sizes) into runs of at most `max_items` whose sizes
/// add up to at most `max_bytes`; an item larger than `max_bytes` gets a run of its own.
pub fn chunk_by_size<T>(
    items: &[T],
    max_items: usize,
    max_bytes: usize,
    size: impl Fn(&T) -> usize,
) -> Vec<&[T]> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let n = size(item);
        if i > start && (i - start >= max_items || bytes + n > max_bytes) {
            runs.push(&items[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += n;
    }
    if start < items.len() {
        runs.push(&items[start..]);
    }
    runs
}

/// Encode a segment from encoded queue entries: version, count (u32 LE), one end offset
/// per entry (u32 LE, relative to the start of the data), then the entries back to back.
pub fn encode_segment<'a>(entries: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    let n = entries.len();
    let data: usize = entries.clone().map(|e| e.len()).sum();
    let mut out = Vec::with_capacity(5 + 4 * n + data);
    out.push(SEGMENT_V1);
    out.extend_from_slice(&(n as u32).to_le_bytes());
    let mut end = 0u32;
    for e in entries.clone() {
        end += e.len() as u32;
        out.extend_from_slice(&end.to_le_bytes());
    }
    for e in entries {
        out.extend_from_slice(e);
    }
    out
}

/// A decoded view of a stored segment (or of a single legacy entry).
pub struct Segment<'a> {
    bytes: &'a [u8],
    count: usize,
    legacy: bool,
}

impl<'a> Segment<'a> {
    /// View a stored `Q` value.
    pub fn parse(bytes: &'a [u8]) -> Result<Segment<'a>, CodecError> {
        match bytes.first() {
            Some(&SEGMENT_V1) => {
                let count = u32_at(bytes, 1, "segment")? as usize;
                let data_at = 5usize
                    .checked_add(count.checked_mul(4).ok_or(err("segment", "count"))?)
                    .ok_or(err("segment", "count"))?;
                if data_at > bytes.len() {
                    return Err(err("segment", "truncated offsets"));
                }
                let data_len = match count {
                    0 => 0,
                    _ => u32_at(bytes, 5 + 4 * (count - 1), "segment")? as usize,
                };
                if data_at + data_len != bytes.len() {
                    return Err(err("segment", "length mismatch"));
                }
                Ok(Segment {
                    bytes,
                    count,
                    legacy: false,
                })
            }
            Some(1) | Some(2) => Ok(Segment {
                bytes,
                count: 1,
                legacy: true,
            }),
            _ => Err(err("segment", "unknown version")),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded entry at `i`.
    pub fn raw(&self, i: usize) -> Result<&'a [u8], CodecError> {
        if i >= self.count {
            return Err(err("segment", "index out of range"));
        }
        if self.legacy {
            return Ok(self.bytes);
        }
        let data_at = 5 + 4 * self.count;
        let start = if i == 0 {
            0
        } else {
            u32_at(self.bytes, 5 + 4 * (i - 1), "segment")? as usize
        };
        let end = u32_at(self.bytes, 5 + 4 * i, "segment")? as usize;
        self.bytes
            .get(data_at + start..data_at + end)
            .filter(|_| start <= end)
            .ok_or(err("segment", "bad offsets"))
    }

    /// The decoded entry at `i`.
    pub fn entry(&self, i: usize) -> Result<QueueEntry, CodecError> {
        QueueEntry::decode(self.raw(i)?)
    }
}

// ------------------------------------------------------------------- pending

// ------------------------------------------------------------------- intake log

/// Builds the intake-log records of one enqueue: each under [`VALUE_TARGET_BYTES`] (an
/// entry larger than that alone in one). One record per batch, up to megabytes, was a
/// leaf sled's cache never evicts (see the module's note): the whole log stayed in memory
/// beside the pending entries until the fold, 256 MiB at a million hosts.
pub struct IntakeWriter {
    done: Vec<Vec<u8>>,
    buf: Vec<u8>,
}

impl Default for IntakeWriter {
    fn default() -> Self {
        IntakeWriter {
            done: Vec::new(),
            buf: intake_record_start(),
        }
    }
}

impl IntakeWriter {
    /// Add one queued entry.
    pub fn push(&mut self, host_id: u64, seq: u64, encoded: &[u8]) {
        let size = intake_entry_bytes(encoded);
        if self.buf.len() > 1 && self.buf.len() + size > VALUE_TARGET_BYTES {
            let full = std::mem::replace(&mut self.buf, intake_record_start());
            self.done.push(full);
        }
        intake_record_push(&mut self.buf, host_id, seq, encoded);
    }
    /// Nothing added.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty() && self.buf.len() == 1
    }
    /// The records, in the order their entries were added.
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        if self.buf.len() > 1 {
            self.done.push(self.buf);
        }
        self.done
    }
}

/// An empty intake-log record (the format packs share, see `pack.rs`).
pub fn intake_record_start() -> Vec<u8> {
    vec![INTAKE_V1]
}

/// Add one entry (host id, queue sequence, encoded entry) to an intake-log record.
pub fn intake_record_push(buf: &mut Vec<u8>, host_id: u64, seq: u64, encoded: &[u8]) {
    buf.extend_from_slice(&host_id.to_le_bytes());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
    buf.extend_from_slice(encoded);
}

/// One entry of an intake-log record: host id, queue sequence, encoded entry.
pub type IntakeEntry<'a> = (u64, u64, &'a [u8]);

/// The bytes one entry takes in an intake-log record: host id, sequence and length
/// (20 bytes), then the encoded entry.
pub fn intake_entry_bytes(encoded: &[u8]) -> usize {
    20 + encoded.len()
}

/// The entries of an intake-log record.
pub fn intake_entries(bytes: &[u8]) -> Result<Vec<IntakeEntry<'_>>, CodecError> {
    intake_entries_iter(bytes)?.collect()
}

/// The entries of an intake-log record, read as they are asked for (a pack's reader looks
/// for one entry and stops there, allocating nothing).
pub fn intake_entries_iter(
    bytes: &[u8],
) -> Result<impl Iterator<Item = Result<IntakeEntry<'_>, CodecError>>, CodecError> {
    const W: &str = "intake log";
    if bytes.first() != Some(&INTAKE_V1) {
        return Err(err(W, "unknown version"));
    }
    let mut at = 1;
    Ok(std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let entry = (|| {
            let id = u64_at(bytes, at, W)?;
            let seq = u64_at(bytes, at + 8, W)?;
            let len = u32_at(bytes, at + 16, W)? as usize;
            let e = bytes
                .get(at + 20..at + 20 + len)
                .ok_or(err(W, "truncated entry"))?;
            Ok((id, seq, e))
        })();
        // a damaged entry ends the walk after its error
        at = match &entry {
            Ok((_, _, e)) => at + intake_entry_bytes(e),
            Err(_) => bytes.len(),
        };
        Some(entry)
    }))
}

// ------------------------------------------------------------------- seen buckets

/// Encode a bucket: version, then the hashes (sorted, unique) as 16 bytes big-endian.
pub fn encode_bucket(hashes: &[u128]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 16 * hashes.len());
    out.push(BUCKET_V1);
    for h in hashes {
        out.extend_from_slice(&h.to_be_bytes());
    }
    out
}

fn bucket_body(bytes: &[u8]) -> Result<&[u8], CodecError> {
    match bytes.split_first() {
        Some((&BUCKET_V1, body)) if body.len() % 16 == 0 => Ok(body),
        Some((&BUCKET_V1, _)) => Err(err("seen bucket", "length not a multiple of 16")),
        _ => Err(err("seen bucket", "unknown version")),
    }
}

fn hash_at(body: &[u8], i: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&body[16 * i..16 * i + 16]);
    u128::from_be_bytes(a)
}

/// Whether a stored bucket holds `hash` (binary search, no allocation).
pub fn bucket_contains(bytes: &[u8], hash: u128) -> Result<bool, CodecError> {
    let body = bucket_body(bytes)?;
    let (mut lo, mut hi) = (0usize, body.len() / 16);
    while lo < hi {
        let mid = (lo + hi) / 2;
        match hash_at(body, mid).cmp(&hash) {
            std::cmp::Ordering::Equal => return Ok(true),
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    Ok(false)
}

/// The hashes of a stored bucket.
pub fn decode_bucket(bytes: &[u8]) -> Result<Vec<u128>, CodecError> {
    let body = bucket_body(bytes)?;
    Ok((0..body.len() / 16).map(|i| hash_at(body, i)).collect())
}

/// Merge sorted unique `new` hashes into sorted unique `old`.
pub fn merge_sorted(old: &[u128], new: &[u128]) -> Vec<u128> {
    let mut out = Vec::with_capacity(old.len() + new.len());
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < new.len() {
        match old[i].cmp(&new[j]) {
            std::cmp::Ordering::Less => {
                out.push(old[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(new[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(old[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&old[i..]);
    out.extend_from_slice(&new[j..]);
    out
}

/// Split a merged bucket that starts at `start` into buckets of at most [`BUCKET_MAX`]
/// (half full, so they have room to grow): (start, hashes) pairs, the first keeping
/// `start`.
pub fn split_bucket(start: u128, hashes: Vec<u128>) -> Vec<(u128, Vec<u128>)> {
    if hashes.len() <= BUCKET_MAX {
        return vec![(start, hashes)];
    }
    let pieces = hashes.len().div_ceil(BUCKET_MAX / 2);
    let per = hashes.len().div_ceil(pieces);
    hashes
        .chunks(per)
        .enumerate()
        .map(|(i, c)| (if i == 0 { start } else { c[0] }, c.to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::pending::Pending;

    #[test]
    fn runs_keep_order_and_stay_within_count_and_bytes() {
        let sizes = [100, 3000, 3000, 50, 7000, 10, 10, 10];
        let runs = chunk_by_size(&sizes, 3, 6000, |&n| n);
        assert_eq!(
            runs,
            vec![
                &[100, 3000][..],
                &[3000, 50][..],
                &[7000][..],
                &[10, 10, 10][..]
            ]
        );
        let few = chunk_by_size(&[1usize; 7], 3, 6144, |&n| n);
        assert_eq!(
            few.iter().map(|r| r.len()).collect::<Vec<_>>(),
            vec![3, 3, 1]
        );
        assert!(chunk_by_size(&[] as &[usize], 3, 10, |&n| n).is_empty());
    }

    fn entry(url: &str, depth: u32) -> Vec<u8> {
        QueueEntry::new(url.into(), depth, None, String::new()).encode()
    }

    #[test]
    fn segment_roundtrip_and_legacy_entry() {
        let es: Vec<Vec<u8>> = (0..5).map(|i| entry(&format!("http://a/{i}"), i)).collect();
        let v = encode_segment(es.iter().map(|e| e.as_slice()));
        let s = Segment::parse(&v).unwrap();
        assert_eq!(s.len(), 5);
        for i in 0..5 {
            let e = s.entry(i).unwrap();
            assert_eq!((e.url, e.depth), (format!("http://a/{i}"), i as u32));
        }
        assert!(s.raw(5).is_err());
        // one entry per key, as older stores kept queues (version 2: they predate via)
        let mut one = vec![2u8, 0, 0, 0, 0, 0, 0, 0, 0];
        one.extend_from_slice(b"http://a/x");
        let s = Segment::parse(&one).unwrap();
        assert_eq!(
            (s.len(), s.entry(0).unwrap().url.as_str()),
            (1, "http://a/x")
        );
        // damaged values are errors, not panics
        for bad in [
            &v[..3],
            &v[..v.len() - 1],
            &[0x10, 255, 255, 255, 255][..],
            // an empty segment with bytes after it
            &[0x10, 0, 0, 0, 0, 7][..],
            &[9][..],
            &[][..],
        ] {
            assert!(Segment::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pending_by_sequence() {
        let mut p = Pending::starting_at(10);
        p.push(b"a");
        p.push(b"bb");
        assert_eq!((p.first, p.end(), p.len()), (10, 12, 2));
        assert_eq!(p.get(11), Some(&b"bb"[..]));
        assert_eq!(p.get(9), None);
        assert_eq!(p.get(12), None);
        let rest: Vec<&[u8]> = p.from(11).collect();
        assert_eq!(rest, vec![&b"bb"[..]]);
        assert_eq!(p.from(0).len(), 2);
        assert_eq!(p.from(99).len(), 0);
        p.reset(12);
        assert!(p.is_empty());
        assert_eq!(p.end(), 12);
    }

    #[test]
    fn intake_roundtrip_and_truncation() {
        let mut w = IntakeWriter::default();
        assert!(w.is_empty());
        w.push(3, 7, b"xyz");
        w.push(4, 0, b"");
        let records = w.finish();
        assert_eq!(records.len(), 1);
        let v = &records[0];
        assert_eq!(
            intake_entries(v).unwrap(),
            vec![(3, 7, &b"xyz"[..]), (4, 0, &b""[..])]
        );
        for cut in 1..v.len() {
            if cut != 1 && cut != 24 {
                assert!(intake_entries(&v[..cut]).is_err(), "cut at {cut}");
            }
        }
        assert!(intake_entries(&[]).is_err());
        assert!(IntakeWriter::default().finish().is_empty());
    }

    /// A large enqueue is logged as records sled's cache can evict, every entry once and
    /// in order; an entry larger than a record's target gets one of its own.
    #[test]
    fn intake_records_stay_under_the_value_target() {
        let mut w = IntakeWriter::default();
        let mut want = Vec::new();
        for i in 0..1_000u64 {
            let e = vec![b'e'; (i as usize * 7) % 300];
            w.push(i % 13, i, &e);
            want.push((i % 13, i, e));
        }
        let big = vec![b'b'; 3 * VALUE_TARGET_BYTES];
        w.push(99, 1_000, &big);
        want.push((99, 1_000, big));
        w.push(5, 1_001, b"tail");
        want.push((5, 1_001, b"tail".to_vec()));
        let records = w.finish();
        assert!(records.len() > 20, "{} records", records.len());
        let mut got = Vec::new();
        for r in &records {
            let entries = intake_entries(r).unwrap();
            assert!(
                r.len() <= VALUE_TARGET_BYTES || entries.len() == 1,
                "a record of {} bytes holds {} entries",
                r.len(),
                entries.len()
            );
            got.extend(entries.into_iter().map(|(h, s, e)| (h, s, e.to_vec())));
        }
        assert_eq!(got, want);
    }

    #[test]
    fn buckets_merge_split_and_search() {
        let old: Vec<u128> = (0..10).map(|i| i * 10).collect();
        let new: Vec<u128> = vec![5, 10, 95, 1000];
        let m = merge_sorted(&old, &new);
        assert_eq!(m.len(), 13);
        assert!(m.windows(2).all(|w| w[0] < w[1]));
        let v = encode_bucket(&m);
        assert_eq!(decode_bucket(&v).unwrap(), m);
        for h in &m {
            assert!(bucket_contains(&v, *h).unwrap());
        }
        assert!(!bucket_contains(&v, 11).unwrap());
        assert!(bucket_contains(&v[..v.len() - 1], 5).is_err());
        let big: Vec<u128> = (0..(BUCKET_MAX as u128 * 3)).map(|i| i * 7 + 100).collect();
        let parts = split_bucket(1, big.clone());
        assert_eq!(parts[0].0, 1);
        assert!(parts.iter().all(|(_, p)| p.len() <= BUCKET_MAX));
        assert!(parts.windows(2).all(|w| w[0].1.last() < w[1].1.first()));
        assert!(parts[1..].iter().all(|(s, p)| *s == p[0]));
        let back: Vec<u128> = parts.into_iter().flat_map(|(_, p)| p).collect();
        assert_eq!(back, big);
    }
}
