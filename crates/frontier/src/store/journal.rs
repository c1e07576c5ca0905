//! The host-record journal: its binary format, checkpoints, eviction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::api::*;
use crate::error::*;
use crate::store::codec::*;
use crate::store::keys;
use crate::store::Batch;

/// Host-record journal state. Every batch that changes host records writes them as one
/// or a few `J` records (a few sled writes per batch instead of one per host); a
/// checkpoint writes the latest record of every journaled host to `H` and deletes the `J`
/// records. At open the journal is replayed over `H` (a later record wins).
pub(crate) struct Journal {
    /// Sequence of the next `J` record.
    pub(crate) next_seq: u64,
    /// Oldest `J` record not yet checkpointed.
    pub(crate) first_seq: u64,
    /// Bytes in `J` records since the last checkpoint.
    pub(crate) bytes: u64,
    /// In-memory hosts whose latest record is only in the journal.
    pub(crate) dirty: HashSet<u64>,
    /// Hosts that left memory while their latest record was only in the journal: that
    /// record (the stored value), until a checkpoint writes it to `H`.
    pub(crate) evicted: HashMap<Arc<str>, Vec<u8>>,
    /// No checkpoint below this many journal bytes (tests lower it).
    pub(crate) min_bytes: u64,
}

/// Largest `J` value (bytes); a batch touching more hosts writes several.
pub(crate) const JOURNAL_RECORD_BYTES: usize = 64 * 1024;
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
pub(crate) fn journal_decode(bytes: &[u8]) -> Result<Vec<crate::store::Kv>, CodecError> {
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

impl Frontier {
    /// Forget a host that has nothing queued and nothing in flight. If its latest record is
    /// only in the journal, it stays there (and in `journal.evicted`) until the next
    /// checkpoint writes it to `H`: one write per host per checkpoint, not per eviction.
    pub(crate) fn maybe_evict(inner: &mut Inner, id: u64) {
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
    pub(crate) fn settle_hosts(
        inner: &mut Inner,
        mut dirty: Vec<u64>,
        batch: &mut Batch,
        dead: &mut Vec<Vec<u8>>,
    ) {
        dirty.sort_unstable();
        dirty.dedup();
        for id in &dirty {
            if let Some(h) = inner.hosts.get_mut(id) {
                dead.extend(
                    h.drop_dead_segments()
                        .into_iter()
                        .map(|f| keys::queued(*id, f)),
                );
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
    pub(crate) fn journal_hosts(inner: &mut Inner, ids: &[u64], batch: &mut Batch) {
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
    pub(crate) fn maybe_checkpoint(inner: &mut Inner, batch: &mut Batch) {
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
}
