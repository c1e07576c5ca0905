//! Intake: canonicalize, dedup against the seen-set, queue durably (the intake log's fold:
//! fold.rs).

use std::sync::Arc;

use crate::api::{Frontier, Inner};
use crate::canon::{politeness_key_of, CanonicalUrl, Rejection};
use crate::crawl::canonicalize_stored;
use crate::error::Result;
use crate::sched::hosts::HostMem;
use crate::seen::HashSet128;
use crate::store::codec::{HostRecord, QueueEntry};
use crate::store::keys;
use crate::store::packed::{self, IntakeWriter};
use crate::store::{Batch, Op};
use crate::work::{url_hash, EnqueueItem, EnqueueResult};

/// Bytes a deferred URL counts toward the intake buffer besides its queue entry: its due
/// time and length in the due index (12) and its hash in `recent` (16).
const DEFERRED_RECORD_OVERHEAD: usize = 12 + 16;

/// A URL offered, prepared: canonical form, stored form, hash, the item.
type Prepared<'a> = (CanonicalUrl, String, u128, &'a EnqueueItem);

impl Frontier {
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
        self.enqueue_with(items, now_ms, false)
    }

    /// Queue again URLs an external fetcher reported done for good (url-frontier's
    /// KnownURLItem with a `refetchable_from_date` for a URL it completed with date 0; see
    /// [`Frontier::fetcher_done`]): queued although seen, at their `refetch_at_ms` (in the
    /// due index until then), and no longer marked done. Durable on return.
    pub fn enqueue_again(&self, items: &[EnqueueItem], now_ms: u64) -> Result<Vec<EnqueueResult>> {
        self.enqueue_with(items, now_ms, true)
    }

    /// Canonicalize and hash, outside the lock (a URL of a crawl other than the default
    /// keeps its crawl tag: crawl.rs).
    fn prepare<'a>(
        &self,
        items: &'a [EnqueueItem],
    ) -> Vec<std::result::Result<Prepared<'a>, Rejection>> {
        items
            .iter()
            .map(|item| {
                canonicalize_stored(&item.url, self.cfg.max_url_len).map(|(c, stored)| {
                    let h = url_hash(&stored);
                    (c, stored, h, item)
                })
            })
            .collect()
    }

    fn enqueue_with(
        &self,
        items: &[EnqueueItem],
        now_ms: u64,
        again: bool,
    ) -> Result<Vec<EnqueueResult>> {
        let prepared = self.prepare(items);
        let mut results = Vec::with_capacity(items.len());
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let seen = self.seen_hashes(
                inner,
                prepared.iter().filter_map(|p| p.as_ref().ok().map(|x| x.2)),
            )?;
            let mut in_batch =
                HashSet128::with_capacity_and_hasher(items.len(), Default::default());
            let mut dirty: Vec<u64> = Vec::new();
            let old_next_id = inner.sched.next_host_id();
            let mut log = IntakeWriter::default();
            let mut buf = Vec::new();
            let mut extra = Batch::new();
            let mut deferred = Vec::new();
            let mut undone: Vec<u128> = Vec::new();
            for p in prepared {
                let (canon, stored, hash, item) = match p {
                    Err(r) => {
                        inner.stats.rejected += 1;
                        results.push(EnqueueResult::Rejected(r));
                        continue;
                    }
                    Ok(x) => x,
                };
                if in_batch.contains(&hash) || (seen.contains(&hash) && !again) {
                    inner.stats.duplicates += 1;
                    results.push(EnqueueResult::Duplicate);
                    continue;
                }
                in_batch.insert(hash);
                if again {
                    // no longer done (and the per-URL key of older versions goes)
                    undone.push(hash);
                    extra.del(keys::fetcher_done(hash));
                    extra.cut();
                }
                // a URL not to be fetched before a later time waits in the due index, not
                // in its queue (its host is not loaded for it)
                let deferred_url = item.refetch_at_ms.is_some_and(|at| at > now_ms);
                let id = match deferred_url {
                    true => None,
                    false => {
                        Some(self.host_id_for(inner, politeness_key_of(&canon, self.cfg.key_mode))?)
                    }
                };
                let mut entry = QueueEntry {
                    kind: item.kind,
                    ..QueueEntry::new(stored, item.depth, item.via.clone(), item.hops.clone())
                };
                // recrawl fields: the entry carries its own interval
                if item.revisit_interval_ms.is_some() || item.refetch_at_ms.is_some() {
                    let now_entry = Self::with_recrawl_fields(
                        inner,
                        &mut extra,
                        entry,
                        item,
                        &mut deferred,
                        now_ms,
                    );
                    match now_entry {
                        Some(e) => entry = e,
                        None => {
                            inner.stats.enqueued += 1;
                            results.push(EnqueueResult::Queued);
                            continue;
                        }
                    }
                }
                let Some(id) = id else {
                    continue;
                };
                if !Self::push_entry(inner, id, &entry, now_ms, &mut buf, &mut log) {
                    continue;
                }
                dirty.push(id);
                inner.stats.enqueued += 1;
                results.push(EnqueueResult::Queued);
            }
            if !in_batch.is_empty() {
                inner.intake.last_logged_ms = now_ms;
            }
            for h in in_batch {
                inner.seen.recent.insert(h);
            }
            if !deferred.is_empty() {
                // Deferred URLs write no intake record, but their hashes join `recent` all
                // the same, and only a fold empties it: count what they write (and the hash
                // each holds in `recent`) toward the fold trigger, or `recent` grows with
                // every scheduled URL and their hashes are never stored in the seen buckets.
                inner.intake.bytes += deferred
                    .iter()
                    .map(|w| (DEFERRED_RECORD_OVERHEAD + w.entry.len()) as u64)
                    .sum::<u64>();
                Self::write_due(inner, &mut extra, deferred);
            }
            inner.done.mark(&mut extra, &[], &undone);
            if log.is_empty() && extra.is_empty() {
                return Ok(results);
            }
            self.write_intake(inner, log, dirty, old_next_id, extra)?;
            ticket = self.commit.written();
        }
        self.commit.sync(self.store.as_ref(), ticket)?;
        Ok(results)
    }

    /// Queue one entry on host `id` (pending, and in the intake record being built).
    /// False if the host is not in memory (cannot happen after `host_id_for`).
    pub(crate) fn push_entry(
        inner: &mut Inner,
        id: u64,
        entry: &QueueEntry,
        now_ms: u64,
        buf: &mut Vec<u8>,
        log: &mut IntakeWriter,
    ) -> bool {
        let Some(h) = inner.sched.host_mut(id) else {
            return false;
        };
        if h.rec.counters.queued == 0 && h.rec.in_flight == 0 {
            // new work for an idle host: its politeness wait starts now
            h.free_since_ms = now_ms;
        }
        // a host asleep because only set-aside URLs were left has work again
        if h.aside().held_origin.is_none() {
            h.set_hold_until(0);
        }
        if h.pending.is_empty() {
            inner.intake.hosts += 1;
        }
        inner.intake.entries += 1;
        let seq = h.pending.end();
        crate::sched::records::bump(&mut h.rec.counters.enqueued);
        h.rec.counters.queued += 1;
        buf.clear();
        entry.encode_into(buf);
        h.pending.push(buf);
        log.push(id, seq, buf);
        true
    }

    /// Write what an intake queued: new host records and the id counter, then `extra`
    /// (recrawl records, due-index moves) with the intake record in one atomic group, then
    /// a checkpoint or fold if due. Applied, not flushed: the caller syncs or lets the
    /// next flush carry it.
    pub(crate) fn write_intake(
        &self,
        inner: &mut Inner,
        log: IntakeWriter,
        mut dirty: Vec<u64>,
        old_next_id: u64,
        extra: Batch,
    ) -> Result<()> {
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
        inner.settling().journal_hosts(&created, &mut batch);
        for id in dirty {
            inner.sched.schedule(id);
        }
        if inner.sched.next_host_id() != old_next_id {
            batch.put(
                keys::NEXT_HOST_ID.to_vec(),
                inner.sched.next_host_id().to_le_bytes().to_vec(),
            );
        }
        batch.cut();
        let (ops, _) = extra.into_parts();
        for op in ops {
            match op {
                Op::Put(k, v) => batch.put(k, v),
                Op::Del(k) => batch.del(k),
            }
        }
        // the whole batch's URLs, in records sled can evict, in one unit with `extra`
        // (a due-index move must not be applied without the entries it moved)
        for record in log.finish() {
            inner.intake.bytes += record.len() as u64;
            batch.put(keys::intake(inner.intake.next_seq), record);
            inner.intake.next_seq += 1;
        }
        batch.cut();
        inner.settling().maybe_checkpoint(&mut batch);
        let due = inner.intake.fold_due(self.cfg.intake_buffer_bytes);
        self.fold_step(inner, &mut batch, due)?;
        self.store.apply(batch)?;
        Ok(())
    }

    /// Which of `hashes` the seen-set holds: in memory (queued since the last fold, or
    /// being folded), or in
    /// the stored buckets (and per-URL keys of older versions), each bucket read once, in
    /// hash order.
    pub(crate) fn seen_hashes(
        &self,
        inner: &Inner,
        hashes: impl Iterator<Item = u128>,
    ) -> Result<HashSet128> {
        let mut found = HashSet128::default();
        let mut todo: Vec<u128> = Vec::new();
        for h in hashes {
            if inner.seen.holds(h) {
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

    /// The in-memory id of a politeness key, loading or creating its record.
    pub(crate) fn host_id_for(&self, inner: &mut Inner, pkey: &str) -> Result<u64> {
        if let Some(id) = inner.sched.id_of(pkey) {
            return Ok(id);
        }
        let journaled = inner.journal.evicted.remove(pkey);
        let from_journal = journaled.is_some();
        let stored = match journaled {
            Some(v) => Some(v),
            None => self.store.get(&keys::host(pkey))?,
        };
        let stored_before = stored.is_some();
        let rec = match &stored {
            Some(v) => HostRecord::decode(v)?,
            None => {
                let id = inner.sched.allocate_host_id();
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
        let mut h = HostMem::empty(key.clone(), rec);
        // a host seen before keeps its IP group (a new one has no address yet)
        if let Some(v) = &stored {
            h.ip = self.stored_address(&key, v)?;
        }
        inner.sched.insert_host(h, stored_before);
        Ok(id)
    }
}
