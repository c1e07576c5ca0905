//! Recrawl: the due index and the per-URL records joined to intake, dispatch and
//! completion (the rules are in `sched/recrawl.rs`, the reasons in `docs/recrawl.md`).
//!
//! The schedule is on disk only: `V` + URL hash holds a URL's record (interval, validators,
//! 404/410 count, due time) and `N` + due time + URL hash its queue entry, so the index is
//! ordered by due time. Memory holds one number (`Inner::next_due_ms`, a lower bound on
//! the first due time): known URLs cost nothing until they are due, and then a bounded
//! scan moves them into their host queues (without the seen-set, which only refuses new
//! offers of a known URL).

use crate::api::{Frontier, Inner};
use crate::canon::{politeness_key_of, CanonicalUrl};
use crate::error::Result;
use crate::sched::recrawl::{self, Next, RevisitRecord, Visit};
use crate::store::codec::QueueEntry;
use crate::store::keys;
use crate::store::packed::IntakeWriter;
use crate::store::revisit;
use crate::store::Batch;
use crate::work::{url_hash, EnqueueItem};

impl Frontier {
    /// The recrawl record of a URL (any spelling), if it has one.
    pub fn revisit_record(&self, url: &str) -> Result<Option<RevisitRecord>> {
        let Ok(c) = crate::canon::canonicalize(url, self.cfg.max_url_len) else {
            return Ok(None);
        };
        self.revisit_of(c.as_str())
    }

    /// URLs in the due index (a full scan of its keys: for tests and the operator, not
    /// for a hot path).
    pub fn due_count(&self) -> Result<u64> {
        let mut n = 0;
        self.store.visit_prefix(b"N", &mut |_, _| n += 1)?;
        Ok(n)
    }

    /// The stored record of a canonical URL.
    pub(crate) fn revisit_of(&self, canonical: &str) -> Result<Option<RevisitRecord>> {
        match self.store.get(&keys::revisit(url_hash(canonical)))? {
            None => Ok(None),
            Some(v) => Ok(Some(revisit::decode(&v)?)),
        }
    }

    /// At enqueue of a new URL with recrawl fields: a `refetch_at_ms` in the future puts it
    /// in the due index instead of its queue (true: not to be queued now); its own
    /// interval is written to its record either way.
    pub(crate) fn defer_or_note(
        &self,
        inner: &mut Inner,
        batch: &mut Batch,
        hash: u128,
        canon: &CanonicalUrl,
        item: &EnqueueItem,
        now_ms: u64,
    ) -> bool {
        let mut rec = RevisitRecord {
            url_interval_ms: item.revisit_interval_ms,
            ..RevisitRecord::default()
        };
        let deferred = match item.refetch_at_ms {
            Some(at) if at > now_ms => {
                let entry = QueueEntry::new(
                    canon.as_str().to_string(),
                    item.depth,
                    item.via.clone(),
                    item.hops.clone(),
                );
                batch.put(keys::due(at, hash), entry.encode());
                rec.due_ms = at;
                inner.next_due_ms = inner.next_due_ms.min(at);
                true
            }
            _ => false,
        };
        batch.put(keys::revisit(hash), revisit::encode(&rec));
        inner.revisit_records = true;
        deferred
    }

    /// Move the URLs due at `now_ms` (at most `due_per_dispatch`) from the due index to
    /// their host queues, through the intake log like any queued URL. Applied, not
    /// flushed: a crash before the next flush leaves them in the index (the index key
    /// and the intake record go in one atomic group), to be moved again.
    pub(crate) fn requeue_due(&self, inner: &mut Inner, now_ms: u64) -> Result<()> {
        if now_ms < inner.next_due_ms {
            return Ok(());
        }
        let limit = self.cfg.recrawl.due_per_dispatch.max(1);
        let mut due = Vec::new();
        let mut next_due = u64::MAX;
        for kv in self.store.scan_prefix(b"N") {
            let (k, v) = kv?;
            let Some(at) = keys::parse_due(&k) else {
                tracing::error!(key = ?k, "due-index key of the wrong shape removed");
                due.push((k, None));
                continue;
            };
            if at > now_ms || due.len() >= limit {
                next_due = at;
                break;
            }
            due.push((k, Some(v)));
        }
        // past the limit the next call looks again at once
        inner.next_due_ms = next_due;
        if due.is_empty() {
            return Ok(());
        }
        let old_next_id = inner.next_host_id;
        let mut log = IntakeWriter::default();
        let mut buf = Vec::new();
        let mut moves = Batch::new();
        let mut dirty = Vec::new();
        for (k, v) in due {
            moves.del(k);
            let Some(v) = v else { continue };
            let entry = match QueueEntry::decode(&v) {
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
        self.write_intake(inner, log, dirty, old_next_id, moves)?;
        self.commit.written();
        Ok(())
    }

    /// After a page lease ended (an answer, or given up): its record and due-index key,
    /// written into `batch` (the completion's, so one flush makes both durable).
    pub(crate) fn reschedule(
        &self,
        inner: &mut Inner,
        batch: &mut Batch,
        entry: &QueueEntry,
        visit: Option<&Visit>,
        now_ms: u64,
    ) -> Result<()> {
        let hash = url_hash(&entry.url);
        let stored = match self.store.get(&keys::revisit(hash))? {
            None => None,
            Some(v) => match revisit::decode(&v) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(url = %entry.url, error = %e, "recrawl record not decodable; started afresh");
                    None
                }
            },
        };
        let had = stored.is_some();
        let mut rec = stored.unwrap_or_default();
        let host = CanonicalUrl::from_canonical(entry.url.clone())
            .map(|c| c.host().to_string())
            .unwrap_or_default();
        let base =
            recrawl::base_interval(&self.cfg.recrawl, &entry.url, &host, rec.url_interval_ms);
        if base.is_none() && !had {
            return Ok(());
        }
        let (next, gone_count) = recrawl::next_visit(&self.cfg.recrawl, base, &rec, visit, now_ms);
        if rec.due_ms != 0 {
            batch.del(keys::due(rec.due_ms, hash));
        }
        if let Some(v) = visit {
            rec.validators = recrawl::merge_validators(&rec.validators, v);
            rec.visits = rec.visits.saturating_add(1);
            if matches!(
                v.outcome,
                recrawl::VisitOutcome::First | recrawl::VisitOutcome::Changed
            ) {
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
                let mut e = entry.clone();
                e.attempts = 0;
                batch.put(keys::due(due_ms, hash), e.encode());
                batch.put(keys::revisit(hash), revisit::encode(&rec));
                inner.next_due_ms = inner.next_due_ms.min(due_ms);
                inner.revisit_records = true;
                inner.stats.revisits_scheduled += 1;
            }
            Next::Unscheduled => {
                batch.del(keys::revisit(hash));
            }
            Next::Gone => {
                tracing::info!(url = %entry.url, answers = gone_count, "URL gone (404/410 in a row): it leaves the recrawl schedule");
                batch.del(keys::revisit(hash));
                inner.stats.revisits_gone += 1;
            }
        }
        Ok(())
    }
}
