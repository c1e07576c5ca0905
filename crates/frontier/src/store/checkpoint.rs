//! Settling hosts after a call: dead segments, journaling changed host records,
//! eviction of idle hosts, checkpoints of the journal.

use std::sync::Arc;

use crate::events::{EventQueue, FrontierEvent};
use crate::sched::scheduler::Scheduler;
use crate::store::journal::{
    journal_encode_entry, Journal, CHECKPOINT_BYTES_PER_HOST, JOURNAL_MAX_BYTES,
    JOURNAL_RECORD_BYTES,
};
use crate::store::keys;
use crate::store::Batch;

/// What settling needs of the frontier's state, borrowed apart from the rest of it: the
/// scheduler's hosts, the journal and the event queue (a checkpoint reports itself).
pub(crate) struct Settling<'a> {
    pub(crate) sched: &'a mut Scheduler,
    pub(crate) journal: &'a mut Journal,
    pub(crate) events: &'a mut EventQueue,
    pub(crate) packs: &'a mut crate::pack::Packs,
}

impl Settling<'_> {
    /// Forget a host that has nothing queued and nothing in flight. If its latest record is
    /// only in the journal, it stays there (and in `journal.evicted`) until the next
    /// checkpoint writes it to `H`: one write per host per checkpoint, not per eviction.
    pub(crate) fn maybe_evict(&mut self, id: u64) {
        if self.journal.unsettled.contains(&id) {
            // its latest record is not written yet; the next settle writes it first
            return;
        }
        let idle = self.sched.host(id).is_some_and(|h| {
            h.rec.counters.queued == 0
                && h.rec.in_flight == 0
                && h.robots_pending_origin().is_none()
                && h.aside().front.is_empty()
                && h.segs.is_empty()
                && h.aside().retries.is_empty()
        });
        if idle {
            if let Some(h) = self.sched.remove_host(id) {
                // the journal has its latest record: the next checkpoint (or the one in
                // progress) writes it to `H` from `evicted`
                if self.journal.dirty.remove(&id)
                    || self.journal.pending.binary_search(&h.key).is_ok()
                {
                    self.journal
                        .evicted
                        .insert(h.key.clone(), crate::store::codec::host_value(&h));
                }
            }
        }
    }

    /// After a dispatch or completion changed the hosts `dirty` (and earlier dispatches
    /// the hosts they left unsettled): their segments nothing points into go to `dead`
    /// (deleted once `batch` is durable), their records to the journal; hosts left without
    /// work leave memory; the journal is checkpointed if due.
    pub(crate) fn settle_hosts(
        &mut self,
        mut dirty: Vec<u64>,
        batch: &mut Batch,
        dead: &mut Vec<Vec<u8>>,
    ) {
        dirty.extend(self.journal.unsettled.drain());
        dirty.sort_unstable();
        dirty.dedup();
        for id in &dirty {
            if let Some(h) = self.sched.host_mut(*id) {
                for s in h.drop_dead_segments() {
                    dead.extend(self.packs.release(&s, *id));
                }
            }
        }
        self.journal_hosts(&dirty, batch);
        for id in dirty {
            self.maybe_evict(id);
        }
        self.maybe_checkpoint(batch);
    }

    /// Journal the current records of the in-memory hosts `ids` (one `J` record per
    /// ~64 KiB, each its own unit).
    pub(crate) fn journal_hosts(&mut self, ids: &[u64], batch: &mut Batch) {
        let Settling { sched, journal, .. } = self;
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
            let Some(h) = sched.host(*id) else {
                continue;
            };
            if buf.is_empty() {
                buf.reserve(JOURNAL_RECORD_BYTES + 512);
                buf.push(1);
            }
            journal_encode_entry(&mut buf, &h.key, &crate::store::codec::host_value(h));
            journal.dirty.insert(*id);
            if buf.len() >= JOURNAL_RECORD_BYTES {
                emit(&mut buf, journal, batch);
            }
        }
        emit(&mut buf, journal, batch);
    }

    /// Checkpoint the journal when it holds enough bytes to pay for one: the latest record
    /// of every journaled host goes to `H`, then the `J` records up to that point go. A
    /// checkpoint writes at most `journal.slice` records per call (each its own unit), in
    /// key order, and goes on in the following calls; the `J` records stay until its last
    /// record is written, so a crash in between replays them over a partly written `H`
    /// (every record written is at least as new as the journal's, and any newer change
    /// is journaled after the checkpoint began, so the replay ends at the latest).
    ///
    /// The `J` records then go oldest first, [`journal_deletes_per_call`] per call: sled
    /// reads each deleted record's leaf back from disk (long evicted from its cache) and
    /// keeps every leaf a call touches until the call returns, so deleting a 256 MiB
    /// journal (about 44 000 records) in one call took seconds under the lock
    /// (docs/benchmarks.md, "The store under sled"). A crash in between leaves a suffix of
    /// the old journal, whose replay (oldest first, then the newer records) still ends
    /// at the latest record of every host.
    pub(crate) fn maybe_checkpoint(&mut self, batch: &mut Batch) {
        let Settling {
            sched,
            journal,
            events,
            ..
        } = self;
        let deleting = journal.first_seq < journal.pending_upto_seq;
        if journal.pending.is_empty() && !deleting {
            let cost =
                (journal.dirty.len() + journal.evicted.len()) as u64 * CHECKPOINT_BYTES_PER_HOST;
            // 0 means: after every batch (tests use it to exercise checkpoints)
            // ... and a journal past JOURNAL_MAX_BYTES is checkpointed whatever it costs,
            // which bounds the replay at open and the space the journal takes
            let wait = journal.min_bytes > 0
                && (journal.bytes < journal.min_bytes
                    || journal.bytes < cost.min(JOURNAL_MAX_BYTES));
            if wait || journal.bytes == 0 {
                return;
            }
            // Written in key order: sled grows many times the bytes written when a call's
            // keys land on leaves all over its tree (500k records in scattered order took
            // 1.5 GB, in key order 150 MB), as each leaf then keeps a chain of small updates.
            let evicted = journal.evicted.len();
            let mut keys: Vec<Arc<str>> = journal.evicted.keys().cloned().collect();
            keys.extend(
                journal
                    .dirty
                    .drain()
                    .filter_map(|id| sched.host(id).map(|h| h.key.clone())),
            );
            keys.sort_unstable();
            keys.dedup();
            tracing::debug!(
                hosts = keys.len(),
                evicted,
                journal_bytes = journal.bytes,
                "host journal checkpoint begun"
            );
            journal.pending_hosts = keys.len() as u64;
            journal.pending_journal_bytes = journal.bytes;
            journal.pending = keys.into();
            journal.pending_upto_seq = journal.next_seq;
            // journal bytes from here on count toward the next checkpoint
            journal.bytes = 0;
        }
        batch.cut();
        for _ in 0..journal.slice {
            let Some(key) = journal.pending.pop_front() else {
                break;
            };
            let value = match sched.host_of_key(&key) {
                Some(h) => crate::store::codec::host_value(h),
                // `H` is read under the lock after this batch is applied
                None => match journal.evicted.remove(&key) {
                    Some(v) => v,
                    None => continue,
                },
            };
            batch.put(keys::host(&key), value);
            batch.cut();
        }
        if journal.pending.is_empty() && journal.first_seq < journal.pending_upto_seq {
            let upto = journal
                .pending_upto_seq
                .min(journal.first_seq + journal_deletes_per_call(journal.slice));
            for seq in journal.first_seq..upto {
                batch.del(keys::journal(seq));
                batch.cut();
            }
            journal.first_seq = upto;
            if upto < journal.pending_upto_seq {
                return;
            }
            events.push(FrontierEvent::JournalCheckpointed {
                hosts: journal.pending_hosts,
                journal_bytes: journal.pending_journal_bytes,
            });
        }
    }
}

/// `J` records a checkpoint deletes per call once its host records are written: a 64th of
/// the host records it writes per call (64 at the default 4 096: about 400 KiB of journal
/// for sled to read back, a few ms).
pub(crate) fn journal_deletes_per_call(slice: usize) -> u64 {
    (slice as u64 / 64).max(1)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::store::{keys, Batch, MemStore, Op, Store, StoreError};
    use crate::tests::allow_all;
    use crate::*;

    /// A memory store that remembers the `H` keys of every `apply`, in order, and what
    /// each `apply` wrote to and deleted from the journal.
    #[derive(Default)]
    struct HostWrites {
        store: MemStore,
        calls: Mutex<Vec<Vec<Vec<u8>>>>,
        log: Mutex<Vec<Step>>,
    }

    /// One `apply`'s journal and host-record writes, or a checkpoint's end reported.
    #[derive(Debug, Clone, PartialEq)]
    enum Step {
        Apply {
            hosts_written: usize,
            journal_deleted: Vec<u64>,
        },
        Reported,
    }

    impl Store for HostWrites {
        crate::store::delegate_store_reads!(store);
        fn apply(&self, batch: Batch) -> Result<(), StoreError> {
            let ops = batch.clone().into_ops();
            let hosts: Vec<Vec<u8>> = ops
                .into_iter()
                .filter_map(|op| match op {
                    Op::Put(k, _) if k.first() == Some(&b'H') => Some(k),
                    _ => None,
                })
                .collect();
            let journal_deleted: Vec<u64> = batch
                .clone()
                .into_ops()
                .into_iter()
                .filter_map(|op| match op {
                    Op::Del(k) => keys::parse_journal(&k),
                    Op::Put(..) => None,
                })
                .collect();
            self.log.lock().unwrap().push(Step::Apply {
                hosts_written: hosts.len(),
                journal_deleted,
            });
            if !hosts.is_empty() {
                self.calls.lock().unwrap().push(hosts);
            }
            self.store.apply(batch)
        }
        fn flush(&self) -> Result<(), StoreError> {
            self.store.flush()
        }
    }

    /// The pages among `items`, each fetched.
    fn pages_done(items: Vec<WorkItem>) -> Vec<(LeaseId, PageOutcome)> {
        items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 5 })),
                WorkItem::Robots(_) => None,
            })
            .collect()
    }

    /// A checkpoint writes host records in key order, whatever order the hosts were
    /// created in (ids) and whether they are in memory or evicted: sled's memory grows
    /// several times over when one call's keys are scattered over its tree.
    #[test]
    fn checkpoints_write_host_records_in_key_order() {
        const T0: u64 = 1_700_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = FrontierConfig::new(dir.path()).without_gaps();
        cfg.seed = Some(3);
        cfg.journal_checkpoint_bytes = 0;
        let store = Arc::new(HostWrites::default());
        let f = Frontier::open_store(cfg, store.clone(), RobotsEngine::default()).unwrap();
        // created in an order far from key order: z9, a0, y8, b1, ...
        let hosts: Vec<String> = (0..40)
            .map(|i| {
                let c = if i % 2 == 0 {
                    b'z' - (i / 2) as u8
                } else {
                    b'a' + (i / 2) as u8
                };
                format!("{}{i}.test", c as char)
            })
            .collect();
        let urls: Vec<String> = hosts
            .iter()
            .flat_map(|h| (0..2).map(move |k| format!("http://{h}/{k}")))
            .collect();
        f.enqueue_batch(&urls, T0).unwrap();
        allow_all(&f, &hosts, T0);
        // one URL of every host: all stay in memory; then the rest: all leave memory
        for _ in 0..2 {
            let items = f.next_batch(T0, 40).unwrap();
            let done = pages_done(items);
            assert!(!done.is_empty());
            f.complete_batch(&done, T0).unwrap();
        }
        let calls = store.calls.lock().unwrap();
        let most = calls.iter().map(Vec::len).max().unwrap_or(0);
        assert!(most >= 20, "a checkpoint wrote {most} host records at most");
        for keys in calls.iter() {
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "host records written out of key order: {:?}",
                keys.iter()
                    .map(|k| String::from_utf8_lossy(k))
                    .collect::<Vec<_>>()
            );
        }
        // each checkpoint is reported once it ends, with what it wrote
        let reported: Vec<(u64, u64)> = f
            .drain_events()
            .into_iter()
            .filter_map(|e| match e {
                FrontierEvent::JournalCheckpointed {
                    hosts,
                    journal_bytes,
                } => Some((hosts, journal_bytes)),
                _ => None,
            })
            .collect();
        assert!(reported.iter().all(|&(_, bytes)| bytes > 0), "{reported:?}");
        assert_eq!(
            reported.iter().map(|&(hosts, _)| hosts).max(),
            Some(most as u64),
            "{reported:?}"
        );
    }

    /// A checkpoint deletes the journal records it made obsolete a few per call, oldest
    /// first, after its host records, and is reported once the last is gone: sled reads
    /// each deleted record back, so thousands in one call cost hundreds of MB at once.
    #[test]
    fn checkpoints_delete_the_journal_a_few_records_per_call_oldest_first() {
        const T0: u64 = 1_700_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = FrontierConfig::new(dir.path()).without_gaps();
        cfg.seed = Some(5);
        // a checkpoint once the journal holds 2 KiB per host: tens of records for 3 hosts
        cfg.journal_checkpoint_bytes = 1;
        cfg.journal_checkpoint_slice = 128;
        let per_call = super::journal_deletes_per_call(128) as usize;
        assert_eq!(per_call, 2);
        let store = Arc::new(HostWrites::default());
        let f = Frontier::open_store(cfg, store.clone(), RobotsEngine::default()).unwrap();
        let hosts = ["a.test", "b.test", "c.test"];
        let urls: Vec<String> = hosts
            .iter()
            .flat_map(|h| (0..400).map(move |k| format!("http://{h}/{k}")))
            .collect();
        f.enqueue_batch(&urls, T0).unwrap();
        allow_all(&f, &hosts, T0);
        let note_reports = |f: &Frontier| {
            for e in f.drain_events() {
                if matches!(e, FrontierEvent::JournalCheckpointed { .. }) {
                    store.log.lock().unwrap().push(Step::Reported);
                }
            }
        };
        // one page at a time: every completion journals the host's record
        loop {
            let items = f.next_batch(T0, 1).unwrap();
            note_reports(&f);
            if items.is_empty() {
                break;
            }
            let done = pages_done(items);
            f.complete_batch(&done, T0).unwrap();
            note_reports(&f);
        }
        let log = store.log.lock().unwrap().clone();
        let deleted: Vec<u64> = log
            .iter()
            .flat_map(|s| match s {
                Step::Apply {
                    journal_deleted, ..
                } => journal_deleted.clone(),
                Step::Reported => Vec::new(),
            })
            .collect();
        assert!(
            deleted.windows(2).all(|w| w[0] < w[1]),
            "journal records deleted out of order or twice: {deleted:?}"
        );
        let reports = log.iter().filter(|s| **s == Step::Reported).count();
        assert!(reports >= 2, "{reports} checkpoints ended");
        assert!(deleted.len() >= 20 * reports, "{} deleted", deleted.len());
        // per checkpoint: host records, then its deletions (at most `per_call` a call),
        // then the report; no deletion between a report and the next host records
        let mut phase = "idle";
        for step in &log {
            match step {
                Step::Apply {
                    hosts_written,
                    journal_deleted,
                } => {
                    assert!(
                        journal_deleted.len() <= per_call,
                        "one call deleted {} journal records",
                        journal_deleted.len()
                    );
                    if *hosts_written > 0 {
                        assert_ne!(phase, "deleting", "host records written while deleting");
                        phase = "written";
                    }
                    if !journal_deleted.is_empty() {
                        assert_ne!(phase, "idle", "journal deleted before host records");
                        phase = "deleting";
                    }
                }
                Step::Reported => {
                    assert_eq!(phase, "deleting", "reported before the deletions");
                    phase = "idle";
                }
            }
        }
        // what is left of the journal is newer than everything deleted
        let left: Vec<u64> = store
            .store
            .scan_prefix(b"J")
            .map(|kv| keys::parse_journal(&kv.unwrap().0).unwrap())
            .collect();
        let newest_deleted = deleted.last().copied().unwrap_or(0);
        assert!(left.iter().all(|&s| s > newest_deleted), "{left:?}");
    }
}
