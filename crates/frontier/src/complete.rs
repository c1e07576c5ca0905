//! Completion: what a fetch outcome does to its URL and host.

use crate::api::{Frontier, Inner};
use crate::error::{FrontierError, Result};
use crate::sched::aside::Delayed;
use crate::sched::failure::{host_backoff_ms, retry_wait_ms, FailureScope, PageOutcome};
use crate::sched::hosts::HostMem;
use crate::sched::politeness;
use crate::sched::records::to_u32;
use crate::sched::recrawl::Visit;
use crate::store::codec::{DropReason, DropRecord, QueueEntry};
use crate::store::keys;
use crate::store::Batch;
use crate::work::{url_hash, LeaseId};

/// A URL out of attempts: its retry entry forgotten and its gave-up drop record written in
/// `batch`; returns the record for the caller to count and report.
fn give_up(
    h: &mut HostMem,
    batch: &mut Batch,
    (id, seq): (u64, u64),
    entry: QueueEntry,
    why: &str,
    now_ms: u64,
) -> DropRecord {
    if h.forget_retry(seq) {
        batch.del(keys::retry(id, seq));
    }
    if let Some(a) = h.aside.as_deref_mut() {
        a.timeouts.retain(|&s| s != seq);
    }
    tracing::info!(url = %entry.url, attempts = entry.attempts, %why, "URL given up");
    // drop_entry bookkeeping without touching the queue key
    let hash = url_hash(&entry.url);
    let detail = format!("{} attempts, last: {why}", entry.attempts);
    let rec = DropRecord::of(entry, DropReason::GaveUp, detail, now_ms);
    batch.put(keys::dropped(hash), rec.encode());
    batch.put(keys::unlogged(hash), Vec::new());
    batch.cut();
    crate::sched::records::bump(&mut h.rec.counters.given_up);
    rec
}

/// A URL kept for a retry: its `T` entry written with the attempts raised.
fn keep_for_retry(h: &mut HostMem, batch: &mut Batch, (id, seq): (u64, u64), entry: &QueueEntry) {
    batch.put(keys::retry(id, seq), entry.encode());
    batch.cut();
    if !h.aside().retries.contains(&seq) {
        h.aside_mut().retries.push(seq);
    }
}

/// Every lease of a batch is checked before any is applied: a batch with one unknown (or
/// repeated) lease changes nothing, so the caller can retry the others.
fn check_leases(inner: &Inner, done: &[(LeaseId, PageOutcome)]) -> Result<()> {
    let mut given = std::collections::HashSet::with_capacity(done.len());
    for (lease, _) in done {
        let known = inner.sched.host(lease.host_id).is_some_and(|h| {
            h.leased().contains(&lease.seq) || h.expired_waiting(lease.seq).is_some()
        });
        if !known || !given.insert(*lease) {
            return Err(FrontierError::UnknownLease(*lease));
        }
    }
    Ok(())
}

/// What the reports of one [`Frontier::complete_visits`] call write, and leave for after
/// them (under the same lock, in the same batch).
struct Completions<'v> {
    batch: Batch,
    /// Hosts whose records changed: scheduled again and settled.
    dirty: Vec<u64>,
    /// URLs whose next visit is scheduled from their answers.
    revisits: Vec<(QueueEntry, Option<&'v Visit>)>,
    /// URLs an external fetcher finished for good (the done-set).
    done_for_good: Vec<u128>,
}

impl Frontier {
    // ---------------------------------------------------------------- completion

    /// A report of an expired lease whose URL waits at `at` in its host's delayed list. Done:
    /// the URL is completed there (taken off the list, its `T` entry deleted). A failure:
    /// the expiry already counted the attempt and the URL waits its turn; nothing changes.
    fn complete_late(
        h: &mut HostMem,
        at: usize,
        id: u64,
        seq: u64,
        outcome: &PageOutcome,
        now_ms: u64,
        batch: &mut Batch,
    ) {
        let PageOutcome::Done { response_ms } = outcome else {
            return;
        };
        h.aside_mut().delayed.swap_remove(at);
        if h.forget_retry(seq) {
            batch.del(keys::retry(id, seq));
        }
        batch.cut();
        h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
        crate::sched::records::bump(&mut h.rec.counters.completed);
        h.rec.last_response_ms = to_u32(*response_ms);
        h.rec.backoff_level = 0;
        tracing::debug!(host = %h.key, seq, now_ms, "late report of an expired lease: completed");
    }

    /// One expired page lease (see [`Frontier::expire_leases`]): its slots freed, one
    /// attempt counted, then behind the host's queued URLs or given up. False when the
    /// lease is no longer out (completed meanwhile).
    pub(crate) fn expire_one(
        &self,
        inner: &mut Inner,
        batch: &mut Batch,
        lease: LeaseId,
        now_ms: u64,
        revisits: &mut Vec<(QueueEntry, Option<&Visit>)>,
    ) -> Result<bool> {
        let (id, seq) = (lease.host_id, lease.seq);
        let recrawl_on = inner.revisit_records;
        let Some(h) = inner.sched.host(id) else {
            return Ok(false);
        };
        let Some(pos) = h.leased().iter().position(|&s| s == seq) else {
            return Ok(false);
        };
        let entry = self.entry_bytes(id, h, seq)?;
        let Some(h) = inner.sched.handle_page_done(id, pos, now_ms) else {
            return Ok(false);
        };
        let Some(bytes) = entry else {
            tracing::error!(host = %h.key, seq, "expired lease has no entry; forgotten");
            return Ok(true);
        };
        let mut entry = QueueEntry::decode(&bytes)?;
        entry.attempts += 1;
        if entry.attempts >= self.cfg.max_attempts {
            if recrawl_on {
                revisits.push((entry.clone(), None));
            }
            let why = "lease expired without a report";
            let rec = give_up(h, batch, (id, seq), entry, why, now_ms);
            inner.stats.given_up += 1;
            inner.push_drop(rec);
            return Ok(true);
        }
        // behind the URLs queued now, with no wait of its own: the others go first
        keep_for_retry(h, batch, (id, seq), &entry);
        let behind = h.pending.end();
        h.aside_mut().delayed.push(Delayed {
            seq,
            due_ms: now_ms,
            behind,
            expired: true,
        });
        h.rec.counters.queued += 1;
        crate::sched::records::bump(&mut h.rec.counters.retried);
        inner.stats.retried += 1;
        Ok(true)
    }

    /// Report how a page lease ended. Durable on return.
    pub fn complete(&self, lease: LeaseId, outcome: PageOutcome, now_ms: u64) -> Result<()> {
        self.complete_batch(&[(lease, outcome)], now_ms)
    }

    /// Report several page leases at once (one flush). If any lease is unknown (or given
    /// twice), nothing is applied and that lease is named in the error.
    pub fn complete_batch(&self, done: &[(LeaseId, PageOutcome)], now_ms: u64) -> Result<()> {
        self.complete_visits(done, &[], now_ms)
    }

    /// [`Frontier::complete_batch`] with what each answer said for the recrawl schedule
    /// (`visits[i]` belongs to `done[i]`; missing or `None`: no answer to judge). The
    /// URL's next due time, validators and 404/410 count are written in the same batch as
    /// the completion, so one flush makes both durable.
    pub fn complete_visits(
        &self,
        done: &[(LeaseId, PageOutcome)],
        visits: &[Option<Visit>],
        now_ms: u64,
    ) -> Result<()> {
        let mut dead = Vec::new();
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            check_leases(inner, done)?;
            let mut out = Completions {
                batch: Batch::new(),
                dirty: Vec::with_capacity(done.len()),
                revisits: Vec::new(),
                done_for_good: Vec::new(),
            };
            for (i, (lease, outcome)) in done.iter().enumerate() {
                let visit = visits.get(i).and_then(Option::as_ref);
                self.complete_one(inner, &mut out, (*lease, outcome, visit), now_ms)?;
            }
            let mut batch = out.batch;
            self.reschedule_all(inner, &mut batch, out.revisits, now_ms);
            batch.cut();
            for &id in &out.dirty {
                inner.sched.schedule(id);
            }
            inner
                .settling()
                .settle_hosts(out.dirty, &mut batch, &mut dead);
            inner.done.mark(&mut batch, &out.done_for_good, &[]);
            // a bulk submit's last part is not left in memory while the crawl drains it
            // (and a fold under way goes on a slice)
            let quiet = inner.intake.quiet_fold_due(now_ms);
            self.fold_step(inner, &mut batch, quiet)?;
            self.store.apply(batch)?;
            if inner.done.fold_due() {
                inner.done.fold(self.store.as_ref())?;
            }
            ticket = self.commit.written();
        }
        self.commit.sync(self.store.as_ref(), ticket)?;
        // only now: the completions that made these segments dead are durable
        self.reclaimer.delete(dead);
        Ok(())
    }

    /// One report of a [`Frontier::complete_visits`] call, applied to its host; what it
    /// writes and leaves for after the batch goes to `out`.
    fn complete_one<'v>(
        &self,
        inner: &mut Inner,
        out: &mut Completions<'v>,
        (lease, outcome, visit): (LeaseId, &PageOutcome, Option<&'v Visit>),
        now_ms: u64,
    ) -> Result<()> {
        let (id, seq) = (lease.host_id, lease.seq);
        let recrawl_on = inner.revisit_records;
        let has_deadline = inner.sched.lease_deadline(lease).is_some();
        let Some(h) = inner.sched.host_mut(id) else {
            return Err(FrontierError::UnknownLease(lease));
        };
        let Some(pos) = h.leased().iter().position(|&s| s == seq) else {
            // a report of a lease that expired and has not been handed out again (a fetch
            // slower than its lease): it completes the URL, no refetch
            let Some(at) = h.expired_waiting(seq) else {
                return Err(FrontierError::UnknownLease(lease));
            };
            let report = (lease, outcome, visit);
            if self.complete_expired(h, at, out, report, recrawl_on, now_ms)? {
                inner.stats.completed += 1;
                inner.stats.late_reports += 1;
            }
            out.dirty.push(id);
            return Ok(());
        };
        let done_ok = matches!(outcome, PageOutcome::Done { .. });
        let fetchers_time = visit.is_some_and(|v| v.refetch_at_ms.is_some());
        // an external fetcher's lease (it has a deadline) done with no next date: marked
        // done for good, so a KnownURLItem with a date can queue it again (with [recrawl]
        // on the configuration schedules it instead)
        let fetcher_done_for_good = done_ok && !fetchers_time && !recrawl_on && has_deadline;
        // a retry needs the entry (attempts, URL); a success does not, unless it is to be
        // scheduled for a revisit or marked done
        let wanted = !done_ok || recrawl_on || fetchers_time || fetcher_done_for_good;
        let entry = if wanted {
            self.leased_entry(id, h, lease, done_ok)?
        } else {
            None
        };
        // one draw per failed report, as before the lease ends
        let jitter: f64 = match done_ok {
            true => 0.0,
            false => inner.sched.jitter_fraction(),
        };
        let Some(h) = inner.sched.handle_page_done(id, pos, now_ms) else {
            return Ok(());
        };
        if let Some(a) = h.aside.as_deref_mut().filter(|_| outcome.host_answered()) {
            a.timeouts.clear();
        }
        if let PageOutcome::Done { response_ms } = outcome {
            if let Some(e) = entry.as_ref().filter(|_| fetcher_done_for_good) {
                out.done_for_good.push(url_hash(&e.url));
            }
            self.record_success(h, &mut out.batch, (id, seq), *response_ms, now_ms);
            if let Some(e) = entry {
                out.revisits.push((e, visit));
            }
            inner.stats.completed += 1;
            out.dirty.push(id);
            return Ok(());
        }
        let why = outcome.reason();
        let scope = self.charge_failure(h, seq, outcome, &why, jitter, now_ms);
        let Some(mut entry) = entry else {
            return Ok(());
        };
        entry.attempts += 1;
        if entry.attempts >= self.cfg.max_attempts {
            if recrawl_on {
                // a known URL that fails for a while keeps its place in the schedule (only
                // 404/410 answers make it gone)
                out.revisits.push((entry.clone(), None));
            }
            let rec = give_up(h, &mut out.batch, (id, seq), entry, &why, now_ms);
            inner.stats.given_up += 1;
            inner.push_drop(rec);
        } else {
            // a retry entry with the attempts raised
            keep_for_retry(h, &mut out.batch, (id, seq), &entry);
            let wait = retry_wait_ms(scope, &self.cfg, entry.attempts, jitter);
            if scope == FailureScope::Url {
                tracing::debug!(url = %entry.url, wait_ms = wait, %why, "URL retried later");
            }
            let behind = h.pending.end();
            h.aside_mut().delayed.push(Delayed {
                seq,
                due_ms: now_ms + wait,
                behind,
                expired: false,
            });
            h.rec.counters.queued += 1;
            crate::sched::records::bump(&mut h.rec.counters.retried);
            inner.stats.retried += 1;
        }
        out.dirty.push(id);
        Ok(())
    }

    /// A report of an expired lease whose URL waits at `at` in its host's delayed list
    /// (see `complete_late`). A success's entry goes to its next visit, or to the
    /// done-set (an entry that cannot be read is completed all the same). True for a
    /// success.
    fn complete_expired<'v>(
        &self,
        h: &mut HostMem,
        at: usize,
        out: &mut Completions<'v>,
        (lease, outcome, visit): (LeaseId, &PageOutcome, Option<&'v Visit>),
        recrawl_on: bool,
        now_ms: u64,
    ) -> Result<bool> {
        let (id, seq) = (lease.host_id, lease.seq);
        let done_ok = matches!(outcome, PageOutcome::Done { .. });
        let fetchers_time = visit.is_some_and(|v| v.refetch_at_ms.is_some());
        if done_ok {
            if let Some(Ok(e)) = self
                .entry_bytes(id, h, seq)?
                .map(|v| QueueEntry::decode(&v))
            {
                if fetchers_time || recrawl_on {
                    // its next visit from this answer, as on time
                    out.revisits.push((e, visit));
                } else {
                    out.done_for_good.push(url_hash(&e.url));
                }
            }
        }
        Self::complete_late(h, at, id, seq, outcome, now_ms, &mut out.batch);
        Ok(done_ok)
    }

    /// The leased URL's entry for its completion. After a failure it must be there (a
    /// retry needs its attempts and URL): none is an unknown lease. After a success it is
    /// only for its next visit: one that cannot be read costs the URL its place in the
    /// schedule, not the completion.
    fn leased_entry(
        &self,
        id: u64,
        h: &HostMem,
        lease: LeaseId,
        done_ok: bool,
    ) -> Result<Option<QueueEntry>> {
        let seq = lease.seq;
        if !done_ok {
            return match self.entry_bytes(id, h, seq)? {
                Some(v) => Ok(Some(QueueEntry::decode(&v)?)),
                None => Err(FrontierError::UnknownLease(lease)),
            };
        }
        Ok(
            match self
                .entry_bytes(id, h, seq)?
                .map(|v| QueueEntry::decode(&v))
            {
                Some(Ok(e)) => Some(e),
                Some(Err(e)) => {
                    tracing::error!(host = %h.key, seq, error = %e, "leased entry not decodable; not rescheduled");
                    None
                }
                None => None,
            },
        )
    }

    /// A page fetched: its retry entry (if any) goes, the host's back-off is over, and it
    /// keeps its normal gap after this request.
    fn record_success(
        &self,
        h: &mut HostMem,
        batch: &mut Batch,
        (id, seq): (u64, u64),
        response_ms: u64,
        now_ms: u64,
    ) {
        if h.forget_retry(seq) {
            batch.del(keys::retry(id, seq));
        }
        batch.cut();
        h.rec.last_response_ms = to_u32(response_ms);
        h.rec.backoff_level = 0;
        crate::sched::records::bump(&mut h.rec.counters.completed);
        h.rec.next_allowed_ms = h
            .rec
            .next_allowed_ms
            .max(now_ms + politeness::gap_ms(&self.cfg, &h.rec));
    }

    /// What a failed fetch of `seq` does to its host: its timeouts counted, a server-wide
    /// failure backs the host off, and either way the host keeps its normal gap after this
    /// request. Returns whom the failure is blamed on.
    fn charge_failure(
        &self,
        h: &mut HostMem,
        seq: u64,
        outcome: &PageOutcome,
        why: &str,
        jitter: f64,
        now_ms: u64,
    ) -> FailureScope {
        if let PageOutcome::Throttled { response_ms, .. } = outcome {
            h.rec.last_response_ms = to_u32(*response_ms);
        }
        if matches!(outcome, PageOutcome::TimedOut { .. }) && !h.aside().timeouts.contains(&seq) {
            h.aside_mut().timeouts.push(seq);
        }
        let scope = outcome
            .scope(h.aside().timeouts.len())
            .unwrap_or(FailureScope::Url);
        if scope == FailureScope::Host {
            // (a host failing without end must not wrap round to no back-off)
            h.rec.backoff_level = h.rec.backoff_level.saturating_add(1);
            let wait = host_backoff_ms(outcome, &self.cfg, h.rec.backoff_level.into(), jitter);
            h.rec.backoff_until_ms = now_ms + wait;
            tracing::info!(host = %h.key, level = h.rec.backoff_level, wait_ms = wait, %why, "host backs off");
        }
        h.rec.next_allowed_ms = h
            .rec
            .next_allowed_ms
            .max(now_ms + politeness::gap_ms(&self.cfg, &h.rec));
        scope
    }
}
