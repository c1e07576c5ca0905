//! The host-record journal: its binary format, checkpoints, eviction.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::store::codec::CodecError;

/// Host-record journal state. Every batch that changes host records writes them as one
/// or a few `J` records (a few sled writes per batch instead of one per host); a
/// checkpoint writes the latest record of every journaled host to `H` and deletes the `J`
/// records. At open the journal is replayed over `H` (a later record wins).
pub(crate) struct Journal {
    /// Sequence of the next `J` record.
    pub(crate) next_seq: u64,
    /// Oldest `J` record not yet deleted (below `pending_upto_seq` while a checkpoint that
    /// wrote its host records is still deleting them).
    pub(crate) first_seq: u64,
    /// Bytes in `J` records since the last checkpoint.
    pub(crate) bytes: u64,
    /// In-memory hosts whose latest record is only in the journal.
    pub(crate) dirty: HashSet<u64>,
    /// In-memory hosts a dispatch changed (a lease, a head moved) and left unsettled: their
    /// records, dead segments and eviction wait for the next call that writes (at the
    /// latest the completion of the lease). At most [`UNSETTLED_MAX`].
    pub(crate) unsettled: HashSet<u64>,
    /// Hosts that left memory while their latest record was only in the journal: that
    /// record (the stored value), until a checkpoint writes it to `H`.
    pub(crate) evicted: HashMap<Arc<str>, Vec<u8>>,
    /// No checkpoint below this many journal bytes (tests lower it).
    pub(crate) min_bytes: u64,
    /// Host records a checkpoint writes per call, at most.
    pub(crate) slice: usize,
    /// The checkpoint in progress: keys of the hosts whose records it has still to write
    /// to `H`, in key order (so membership is a binary search). Their latest records are in
    /// memory (`hosts`, or `evicted`: a pending host that leaves memory goes there whether
    /// dirty or not).
    pub(crate) pending: VecDeque<Arc<str>>,
    /// `J` records below this sequence go once `pending` is written, oldest first, a few
    /// per call; the checkpoint ends when the last of them is gone.
    pub(crate) pending_upto_seq: u64,
    /// Host records the checkpoint in progress writes in all (reported when it ends).
    pub(crate) pending_hosts: u64,
    /// Journal bytes the checkpoint in progress makes obsolete (reported when it ends).
    pub(crate) pending_journal_bytes: u64,
}

/// Hosts left unsettled by dispatches, at most: past it a dispatch writes its own (so
/// leases that are never completed, e.g. by an external fetcher, cannot grow the set).
pub(crate) const UNSETTLED_MAX: usize = 4096;

/// Largest `J` value (bytes); a batch touching more hosts writes several. Kept under
/// sled's blob threshold so the page cache can evict journal leaves (see
/// [`super::packed::VALUE_TARGET_BYTES`]).
pub(crate) const JOURNAL_RECORD_BYTES: usize = super::packed::VALUE_TARGET_BYTES;
/// What one record written by a checkpoint costs, in journal bytes: a store write costs
/// about what 2 KiB of log bytes do (sled: ~14 µs per key, ~250 MB/s for large values),
/// and a checkpoint writes one key per host. The journal is checkpointed once it holds
/// this much per host it would write, so checkpoints stay a small part of the writes.
pub(crate) const CHECKPOINT_BYTES_PER_HOST: u64 = 2048;
/// A fold is handed to the store in pieces of about this many bytes.
pub(crate) const FOLD_PIECE_BYTES: usize = 8 * 1024 * 1024;
/// Journal bytes past which a checkpoint is made whatever it costs.
pub(crate) const JOURNAL_MAX_BYTES: u64 = 256 * 1024 * 1024;

pub(crate) fn journal_encode_entry(buf: &mut Vec<u8>, key: &str, value: &[u8]) {
    let kl = u16::try_from(key.len()).unwrap_or(u16::MAX) as usize;
    buf.extend_from_slice(&(kl as u16).to_le_bytes());
    buf.extend_from_slice(&key.as_bytes()[..kl]);
    buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
    buf.extend_from_slice(value);
}

/// Entries (politeness key, stored host value) of one `J` record.
pub(crate) fn journal_decode(
    bytes: &[u8],
) -> std::result::Result<Vec<crate::store::Kv>, CodecError> {
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
