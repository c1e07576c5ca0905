//! Recrawl: the due index joined to intake, dispatch and completion (the rules are in
//! `sched/recrawl.rs`, the reasons in `docs/recrawl.md`).
//!
//! A URL's recrawl record (interval, validators, 404/410 count) travels inside its queue
//! entry (version 4), so the schedule costs no key per URL: between two visits the entry
//! waits in the due index, `N` + due second + random id -> the entries of one completion
//! batch that come due in that second. Memory holds one number (`Inner::next_due_ms`, a
//! lower bound on the first due second): known URLs cost nothing until they are due, and
//! then a bounded scan moves them into their host queues (without the seen-set, which only
//! refuses new offers of a known URL).

use std::collections::BTreeMap;

use crate::api::{Frontier, Inner};
use crate::canon::{politeness_key_of, CanonicalUrl};
use crate::error::Result;
use crate::sched::recrawl::{self, Next, RevisitRecord, Visit, VisitOutcome};
use crate::store::codec::QueueEntry;
use crate::store::keys;
use crate::store::packed::{self, IntakeWriter};
use crate::store::revisit;
use crate::store::Batch;
use crate::work::{url_hash, EnqueueItem};

impl Frontier {
    /// URLs in the due index (a full scan: for tests and the operator, not a hot path).
    pub fn due_count(&self) -> Result<u64> {
        let mut n = 0u64;
        for kv in self.store.scan_prefix(b"N") {
            let (_, v) = kv?;
            n += revisit::decode_due(&v)?.len() as u64;
        }
        Ok(n)
    }

    /// The first `limit` URLs of the due index in due order: (due time, URL, its recrawl
    /// record). A scan from the start of the index.
    pub fn scheduled(&self, limit: usize) -> Result<Vec<(u64, String, RevisitRecord)>> {
        let mut out = Vec::new();
        for kv in self.store.scan_prefix(b"N") {
            let (_, v) = kv?;
            for (due, e) in revisit::decode_due(&v)? {
                if out.len() >= limit {
                    return Ok(out);
                }
                let entry = QueueEntry::decode(e)?;
                out.push((due, entry.url, entry.recrawl.unwrap_or_default()));
            }
        }
        Ok(out)
    }

    /// From now on completions look for recrawl records (durably: the marker goes in
    /// `batch`).
    fn mark_recrawl_in_use(inner: &mut Inner, batch: &mut Batch) {
        if !inner.revisit_records {
            batch.put(keys::RECRAWL_IN_USE.to_vec(), Vec::new());
            inner.revisit_records = true;
        }
    }

    /// At enqueue of a new URL with recrawl fields: its entry gets a recrawl record (its
    /// own interval), and with a `refetch_at_ms` in the future it goes to `deferred`
    /// (due time, entry) instead of its queue: returns the entry to queue now, if any.
    pub(crate) fn with_recrawl_fields(
        inner: &mut Inner,
        batch: &mut Batch,
        mut entry: QueueEntry,
        item: &EnqueueItem,
        deferred: &mut Vec<DueWrite>,
        now_ms: u64,
    ) -> Option<QueueEntry> {
        Self::mark_recrawl_in_use(inner, batch);
        entry.recrawl = Some(RevisitRecord {
            url_interval_ms: item.revisit_interval_ms,
            ..RevisitRecord::default()
        });
        match item.refetch_at_ms {
            Some(at) if at > now_ms => {
                deferred.push(DueWrite {
                    due_ms: at,
                    entry: entry.encode(),
                    locate: None,
                });
                None
            }
            _ => Some(entry),
        }
    }

    /// Write entries to the due index: one key per due second. An entry with a locator
    /// gets its `Y` key (where it waits, for a sitemap's `lastmod`) in the same batch.
    pub(crate) fn write_due(inner: &mut Inner, batch: &mut Batch, entries: Vec<DueWrite>) {
        let mut by_slot: BTreeMap<u64, Vec<DueWrite>> = BTreeMap::new();
        for w in entries {
            by_slot.entry(keys::due_slot(w.due_ms)).or_default().push(w);
        }
        for (slot, group) in by_slot {
            // several keys per second when the group is large: see VALUE_TARGET_BYTES
            let chunks =
                packed::chunk_by_size(&group, usize::MAX, packed::VALUE_TARGET_BYTES, |w| {
                    w.entry.len() + 12
                });
            for chunk in chunks {
                let id: u64 = inner.sched.random_u64();
                let mut pairs = Vec::with_capacity(chunk.len());
                for w in chunk {
                    if let Some((hash, fetched_ms)) = w.locate {
                        let loc = revisit::Locator {
                            slot_ms: slot,
                            id,
                            fetched_ms,
                        };
                        batch.put(keys::locator(hash), revisit::encode_locator(&loc));
                    }
                    pairs.push((w.due_ms, w.entry.as_slice()));
                }
                batch.put(keys::due(slot, id), revisit::encode_due(&pairs));
            }
            inner.next_due_ms = inner.next_due_ms.min(slot);
        }
    }

    /// Move the index keys due at `now_ms` (whole keys, until at least `due_per_dispatch`
    /// URLs) to their host queues, through the intake log like any queued URL. Applied, not
    /// flushed: a crash before the next flush leaves them in the index (the index key and
    /// the intake record go in one atomic group), to be moved again.
    pub(crate) fn requeue_due(&self, inner: &mut Inner, now_ms: u64) -> Result<()> {
        if now_ms < inner.next_due_ms {
            return Ok(());
        }
        let limit = self.cfg.recrawl.due_per_dispatch.max(1);
        let mut due = Vec::new();
        let mut urls = 0usize;
        let mut next_due = u64::MAX;
        for kv in self.store.scan_prefix(b"N") {
            let (k, v) = kv?;
            let Some(slot) = keys::parse_due(&k) else {
                tracing::error!(key = ?k, "due-index key of the wrong shape removed");
                due.push((k, None));
                continue;
            };
            if slot > now_ms || urls >= limit {
                next_due = slot;
                break;
            }
            match revisit::decode_due(&v) {
                Ok(entries) => {
                    urls += entries.len();
                    let owned: Vec<Vec<u8>> =
                        entries.into_iter().map(|(_, e)| e.to_vec()).collect();
                    due.push((k, Some(owned)));
                }
                Err(e) => {
                    tracing::error!(error = %e, "due-index value not decodable; removed");
                    due.push((k, None));
                }
            }
        }
        // past the limit the next call looks again at once
        inner.next_due_ms = next_due;
        if due.is_empty() {
            return Ok(());
        }
        let old_next_id = inner.sched.next_host_id();
        let mut log = IntakeWriter::default();
        let mut buf = Vec::new();
        let mut moves = Batch::new();
        let mut dirty = Vec::new();
        for (k, entries) in due {
            moves.del(k);
            for bytes in entries.into_iter().flatten() {
                let entry = match QueueEntry::decode(&bytes) {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::error!(error = %e, "due-index entry not decodable; removed");
                        continue;
                    }
                };
                let Some(canon) = CanonicalUrl::from_canonical(entry.url.clone()) else {
                    tracing::error!(url = %entry.url, "non-canonical URL in the due index removed");
                    continue;
                };
                let id = self.host_id_for(inner, politeness_key_of(&canon, self.cfg.key_mode))?;
                if Self::push_entry(inner, id, &entry, now_ms, &mut buf, &mut log) {
                    dirty.push(id);
                    inner.stats.revisits_queued += 1;
                    tracing::debug!(url = %entry.url, "due URL back in its host queue");
                }
            }
        }
        self.write_intake(inner, log, dirty, old_next_id, moves)?;
        self.commit.written();
        Ok(())
    }

    /// After a page lease ended (an answer, or given up): the URL's entry for the due
    /// index (due time, entry with its updated record), or None when it leaves the
    /// schedule or never had one. The caller writes it with the completion.
    pub(crate) fn reschedule(
        &self,
        inner: &mut Inner,
        entry: QueueEntry,
        visit: Option<&Visit>,
        now_ms: u64,
    ) -> Option<DueWrite> {
        let had = entry.recrawl.is_some();
        let mut rec = entry.recrawl.clone().unwrap_or_default();
        let host = CanonicalUrl::from_canonical(entry.url.clone())
            .map(|c| c.host().to_string())
            .unwrap_or_default();
        let base =
            recrawl::base_interval(&self.cfg.recrawl, &entry.url, &host, rec.url_interval_ms);
        // an external fetcher's own time for the next visit wins over the interval rules
        let fetchers_time = visit.and_then(|v| v.refetch_at_ms);
        if base.is_none() && !had && fetchers_time.is_none() {
            return None;
        }
        let (next, gone_count) = match fetchers_time {
            Some(due_ms) => (
                Next::At {
                    due_ms,
                    interval_ms: rec.interval_ms,
                },
                rec.gone_count,
            ),
            None => recrawl::next_visit(&self.cfg.recrawl, base, &rec, visit, now_ms),
        };
        if let Some(v) = visit {
            rec.validators = recrawl::merge_validators(&rec.validators, v);
            rec.visits = rec.visits.saturating_add(1);
            if matches!(v.outcome, VisitOutcome::First | VisitOutcome::Changed) {
                rec.captured_ms = v.fetched_at_ms;
            }
        }
        rec.gone_count = gone_count;
        match next {
            Next::At {
                due_ms,
                interval_ms,
            } => {
                rec.due_ms = due_ms;
                rec.interval_ms = interval_ms;
                // when it was last fetched: this visit, or (given up) the last full one
                let fetched_ms = visit.map_or(rec.captured_ms, |v| v.fetched_at_ms);
                let locate = self
                    .cfg
                    .recrawl
                    .locate_for_lastmod
                    .then(|| (url_hash(&entry.url), fetched_ms));
                let e = QueueEntry {
                    attempts: 0,
                    recrawl: Some(rec),
                    ..entry
                };
                inner.stats.revisits_scheduled += 1;
                Some(DueWrite {
                    due_ms,
                    entry: e.encode(),
                    locate,
                })
            }
            Next::Unscheduled => None,
            Next::Gone => {
                tracing::info!(url = %entry.url, answers = gone_count, "URL gone (404/410 in a row): it leaves the recrawl schedule");
                inner.stats.revisits_gone += 1;
                None
            }
        }
    }

    /// [`Frontier::reschedule`] for each, written to `batch` (one index key per second).
    /// A URL that leaves the schedule loses its locator too.
    pub(crate) fn reschedule_all(
        &self,
        inner: &mut Inner,
        batch: &mut Batch,
        done: Vec<(QueueEntry, Option<&Visit>)>,
        now_ms: u64,
    ) {
        let locate = self.cfg.recrawl.locate_for_lastmod;
        let mut due = Vec::with_capacity(done.len());
        for (e, v) in done {
            let hash = locate.then(|| url_hash(&e.url));
            match self.reschedule(inner, e, v, now_ms) {
                Some(w) => due.push(w),
                None => {
                    if let Some(h) = hash {
                        batch.del(keys::locator(h));
                    }
                }
            }
        }
        if !due.is_empty() {
            Self::mark_recrawl_in_use(inner, batch);
            Self::write_due(inner, batch, due);
        }
    }
}

/// One entry for the due index: its due time, the encoded queue entry, and, when
/// locators are kept, the URL's hash and last fetch time (its `Y` key).
pub(crate) struct DueWrite {
    pub(crate) due_ms: u64,
    pub(crate) entry: Vec<u8>,
    pub(crate) locate: Option<(u128, u64)>,
}
