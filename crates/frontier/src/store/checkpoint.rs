//! Settling hosts after a call: dead segments, journaling changed host records,
//! eviction of idle hosts, checkpoints of the journal.

use std::sync::Arc;

use crate::api::{Frontier, Inner};
use crate::store::journal::{
    journal_encode_entry, Journal, CHECKPOINT_BYTES_PER_HOST, JOURNAL_MAX_BYTES,
    JOURNAL_RECORD_BYTES,
};
use crate::store::keys;
use crate::store::Batch;

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
                if let Some(ip) = h.ip {
                    inner.ip_groups.leave(ip, id, 0);
                }
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
                dead.extend(h.drop_dead_segments().into_iter().map(|s| s.key(*id)));
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
        tracing::debug!(
            hosts = journal.dirty.len() + journal.evicted.len(),
            journal_bytes = journal.bytes,
            "host journal checkpointed"
        );
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
