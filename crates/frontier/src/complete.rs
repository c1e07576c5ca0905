//! Completion: what a fetch outcome does to its URL and host.

use crate::api::{Frontier, Inner};
use crate::config::CrawlDelayOverCap;
use crate::error::{FrontierError, Result};
use crate::events::FrontierEvent;
use crate::sched::aside::Delayed;
use crate::sched::failure::{host_backoff_ms, retry_wait_ms, FailureScope, PageOutcome};
use crate::sched::hosts::HostMem;
use crate::sched::politeness;
use crate::sched::recrawl::Visit;
use crate::sched::robots_gate::{OriginState, RobotsCache, RobotsFetchOutcome};
use crate::store::codec::{DropReason, DropRecord, QueueEntry};
use crate::store::keys;
use crate::store::Batch;
use crate::work::{url_hash, LeaseId, RobotsLease};

/// After a robots.txt outcome could not be stored, its host waits this long before its
/// robots.txt is fetched again (a failing disk is not hammered with retries).
const ROBOTS_RETRY_AFTER_STORE_ERROR_MS: u64 = 5_000;

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
    h.timeouts.retain(|&s| s != seq);
    tracing::info!(url = %entry.url, attempts = entry.attempts, %why, "URL given up");
    // drop_entry bookkeeping without touching the queue key
    let hash = url_hash(&entry.url);
    let detail = format!("{} attempts, last: {why}", entry.attempts);
    let rec = DropRecord::of(entry, DropReason::GaveUp, detail, now_ms);
    batch.put(keys::dropped(hash), rec.encode());
    batch.put(keys::unlogged(hash), Vec::new());
    batch.cut();
    h.rec.counters.given_up += 1;
    rec
}

/// A URL kept for a retry: its `T` entry written with the attempts raised.
fn keep_for_retry(h: &mut HostMem, batch: &mut Batch, (id, seq): (u64, u64), entry: &QueueEntry) {
    batch.put(keys::retry(id, seq), entry.encode());
    batch.cut();
    if !h.retries.contains(&seq) {
        h.retries.push(seq);
    }
}

/// Every lease of a batch is checked before any is applied: a batch with one unknown (or
/// repeated) lease changes nothing, so the caller can retry the others.
fn check_leases(inner: &Inner, done: &[(LeaseId, PageOutcome)]) -> Result<()> {
    let mut given = std::collections::HashSet::with_capacity(done.len());
    for (lease, _) in done {
        let known = inner.sched.host(lease.host_id).is_some_and(|h| {
            h.leased.contains(&lease.seq) || h.expired_waiting(lease.seq).is_some()
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
        h.delayed.swap_remove(at);
        if h.forget_retry(seq) {
            batch.del(keys::retry(id, seq));
        }
        batch.cut();
        h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
        h.rec.counters.completed += 1;
        h.rec.last_response_ms = *response_ms;
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
        let Some(pos) = h.leased.iter().position(|&s| s == seq) else {
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
        h.delayed.push(Delayed {
            seq,
            due_ms: now_ms,
            behind: h.pending.end(),
            expired: true,
        });
        h.rec.counters.queued += 1;
        h.rec.counters.retried += 1;
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
        let Some(pos) = h.leased.iter().position(|&s| s == seq) else {
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
        if outcome.host_answered() {
            h.timeouts.clear();
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
            h.delayed.push(Delayed {
                seq,
                due_ms: now_ms + wait,
                behind: h.pending.end(),
                expired: false,
            });
            h.rec.counters.queued += 1;
            h.rec.counters.retried += 1;
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
        h.rec.last_response_ms = response_ms;
        h.rec.backoff_level = 0;
        h.rec.counters.completed += 1;
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
            h.rec.last_response_ms = *response_ms;
        }
        if matches!(outcome, PageOutcome::TimedOut { .. }) && !h.timeouts.contains(&seq) {
            h.timeouts.push(seq);
        }
        let scope = outcome.scope(h.timeouts.len()).unwrap_or(FailureScope::Url);
        if scope == FailureScope::Host {
            h.rec.backoff_level += 1;
            let wait = host_backoff_ms(outcome, &self.cfg, h.rec.backoff_level, jitter);
            h.rec.backoff_until_ms = now_ms + wait;
            tracing::info!(host = %h.key, level = h.rec.backoff_level, wait_ms = wait, %why, "host backs off");
        }
        h.rec.next_allowed_ms = h
            .rec
            .next_allowed_ms
            .max(now_ms + politeness::gap_ms(&self.cfg, &h.rec));
        scope
    }

    /// Report the outcome of a robots.txt fetch handed out by `next`. The new robots state
    /// is durable before any URL is gated by it. One item of
    /// [`Frontier::complete_robots_batch`].
    pub fn complete_robots(
        &self,
        lease: &RobotsLease,
        outcome: &RobotsFetchOutcome,
        response_ms: u64,
        now_ms: u64,
    ) -> Result<()> {
        let done = [(lease.clone(), outcome.clone(), response_ms)];
        self.complete_robots_batch(&done, now_ms)?
            .pop()
            .unwrap_or(Ok(()))
    }

    /// Report the outcomes of several robots.txt fetches at once: one scheduler lock to
    /// write them, one flush for all, one lock to act on them. With thousands of new hosts
    /// a lock, a store write and a flush per robots.txt made the answers queue behind each
    /// other (and the dispatcher behind them), so each robots.txt slot stayed taken for
    /// several times the fetch itself.
    ///
    /// Each item is (lease, outcome, response time in ms); the answer has one result per
    /// item, in order (an unknown lease or a state that cannot be read fails alone). `Err`:
    /// the outcomes could not be made durable; every lease of the batch was given back
    /// (their hosts fetch robots.txt again after a pause).
    ///
    /// The scheduler lock is not held across the flush: the states are written under the
    /// lock, made durable by a group flush (shared with other callers), and only then put
    /// into the cache and acted on. Until then each host keeps its robots lease, so it is
    /// not scheduled and nothing of it is gated by the new state early.
    pub fn complete_robots_batch(
        &self,
        done: &[(RobotsLease, RobotsFetchOutcome, u64)],
        now_ms: u64,
    ) -> Result<Vec<Result<()>>> {
        let mut results: Vec<Result<()>> = Vec::with_capacity(done.len());
        // (index into `done`, the new state, its event) of the outcomes written
        let mut written = Vec::new();
        // hosts whose record takes a longer crawl-delay from these answers
        let mut noted = Vec::new();
        let ticket = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let mut batch = Batch::new();
            for (i, (lease, outcome, _)) in done.iter().enumerate() {
                if !Self::robots_pending(inner, lease) {
                    results.push(Err(FrontierError::UnknownRobotsLease(lease.origin.clone())));
                    continue;
                }
                match self.apply_robots(inner, &lease.origin, outcome, now_ms, &mut batch) {
                    Ok((state, event)) => {
                        if self.note_crawl_delay(inner, lease.host_id, &state, now_ms) {
                            noted.push(lease.host_id);
                        }
                        written.push((i, state, event));
                        results.push(Ok(()));
                    }
                    Err(e) => {
                        self.release_robots_lease(inner, lease, now_ms);
                        results.push(Err(e));
                    }
                }
            }
            if written.is_empty() {
                return Ok(results);
            }
            // durable with the states they come from (see note_crawl_delay)
            inner.settling().journal_hosts(&noted, &mut batch);
            if let Err(e) = self.store.apply(batch) {
                for (i, _, _) in &written {
                    self.release_robots_lease(inner, &done[*i].0, now_ms);
                }
                return Err(e.into());
            }
            self.commit.written()
        };
        if let Err(e) = self.commit.sync(self.store.as_ref(), ticket) {
            let mut guard = self.inner.lock();
            for (i, _, _) in &written {
                self.release_robots_lease(&mut guard, &done[*i].0, now_ms);
            }
            return Err(e.into());
        }
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut freed = Vec::with_capacity(written.len());
        for (i, state, event) in written {
            let (lease, _, response_ms) = &done[i];
            if self.robots_answered(inner, lease, state, event, *response_ms, now_ms) {
                freed.push(lease.host_id);
            }
        }
        let mut batch = Batch::new();
        // the host records are written without a flush, like a lease: losing them in a
        // crash only returns the hosts to the state recovery rebuilds anyway (nothing in
        // flight)
        inner.settling().journal_hosts(&freed, &mut batch);
        // a host left with nothing to do leaves memory (nothing to schedule then)
        for &id in &freed {
            inner.settling().maybe_evict(id);
        }
        inner.settling().maybe_checkpoint(&mut batch);
        if !batch.is_empty() {
            self.store.apply(batch)?;
            self.commit.written();
        }
        for id in freed {
            inner.sched.schedule(id);
        }
        Ok(results)
    }

    /// A robots.txt answer that sets a longer crawl-delay than host `id`'s record holds
    /// puts it in the record (capped, or the cap when clamped, counted once), so the record
    /// written with the robots state in one flush has it: a process killed right after the
    /// answer, or after the page that followed, restarts knowing it, and holds the host
    /// for it (`hold_hosts_after_restart`). Without it the delay only reached the record
    /// with the first page's lease, which a crash could lose, and a restart waited the
    /// plain gap (issue 36). True if the record changed.
    fn note_crawl_delay(
        &self,
        inner: &mut Inner,
        id: u64,
        state: &OriginState,
        now_ms: u64,
    ) -> bool {
        let rules = RobotsCache::crawl_delay_of(
            inner.robots.backend().as_ref(),
            &self.cfg.user_agent,
            state,
            now_ms,
        );
        let Some(rules_ms) = rules.map(|d| d.as_millis() as u64) else {
            return false;
        };
        let cap = self.cfg.max_crawl_delay_ms;
        let (delay, clamped) = match (rules_ms <= cap, self.cfg.crawl_delay_over_cap) {
            (true, _) => (rules_ms, false),
            (false, CrawlDelayOverCap::Clamp) => (cap, true),
            // the host is skipped at its first page: nothing to hold it for
            (false, CrawlDelayOverCap::Skip) => return false,
        };
        let Some(h) = inner.sched.host_mut(id) else {
            return false;
        };
        if delay <= h.rec.crawl_delay_ms {
            return false;
        }
        h.rec.crawl_delay_ms = delay;
        if clamped {
            h.rec.counters.crawl_delay_clamped += 1;
            inner.stats.crawl_delay_clamped += 1;
        }
        true
    }

    /// A durable robots.txt outcome takes effect: the state goes into the cache, the
    /// lease ends and the host's next request waits for the gap. False if the lease was no
    /// longer the one its host waited for (nothing of the host changed then).
    fn robots_answered(
        &self,
        inner: &mut Inner,
        lease: &RobotsLease,
        state: OriginState,
        event: FrontierEvent,
        response_ms: u64,
        now_ms: u64,
    ) -> bool {
        // robots.txt was a request to the site: the gap after it is the crawl-delay it
        // just gave (capped), from its answer on, like after any page
        let crawl_delay = RobotsCache::crawl_delay_of(
            inner.robots.backend().as_ref(),
            &self.cfg.user_agent,
            &state,
            now_ms,
        )
        .map(|d| (d.as_millis() as u64).min(self.cfg.max_crawl_delay_ms));
        inner.census.note(&lease.origin, &state, now_ms);
        inner.robots.put(&lease.origin, state);
        inner.events.push(event);
        // (the lease is still ours: only this call clears it)
        if !Self::give_back_robots_lease(inner, lease, now_ms) {
            return false;
        }
        if let Some(h) = inner.sched.host_mut(lease.host_id) {
            h.rec.last_response_ms = response_ms;
            // (a longer crawl-delay is already in the record, see note_crawl_delay; a
            // shorter one is set when the next page is handed out, as for every page)
            let gap = politeness::gap_ms(&self.cfg, &h.rec).max(crawl_delay.unwrap_or(0));
            h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(now_ms + gap);
            h.hold_until_ms = 0;
        }
        true
    }

    /// The outcome of `lease` could not be made durable (a store error): give back the
    /// robots.txt slot and the host's lease, so the host is not stuck waiting for an answer
    /// that will never come; its robots.txt is fetched again after a pause. The state the
    /// outcome would have set is not used (it is not durable).
    fn release_robots_lease(&self, inner: &mut Inner, lease: &RobotsLease, now_ms: u64) {
        if !Self::give_back_robots_lease(inner, lease, now_ms) {
            return;
        }
        if let Some(h) = inner.sched.host_mut(lease.host_id) {
            h.hold_until_ms = h
                .hold_until_ms
                .max(now_ms + ROBOTS_RETRY_AFTER_STORE_ERROR_MS);
        }
        inner.sched.schedule(lease.host_id);
    }

    /// Ends `lease` if it is still the one its host waits for: frees the robots.txt slot,
    /// the host's and its address's in-flight slots. False if it was not (nothing done).
    fn give_back_robots_lease(inner: &mut Inner, lease: &RobotsLease, now_ms: u64) -> bool {
        if !Self::robots_pending(inner, lease) {
            return false;
        }
        inner.sched.handle_robots_done(lease.host_id, now_ms);
        true
    }

    /// Whether `lease` is the robots.txt fetch its host is waiting for.
    fn robots_pending(inner: &Inner, lease: &RobotsLease) -> bool {
        inner
            .sched
            .host(lease.host_id)
            .and_then(|h| h.robots_pending.as_deref())
            == Some(lease.origin.as_str())
    }

    pub(crate) fn apply_robots(
        &self,
        inner: &mut Inner,
        origin: &str,
        outcome: &RobotsFetchOutcome,
        now_ms: u64,
        batch: &mut Batch,
    ) -> Result<(OriginState, FrontierEvent)> {
        let backend = inner.robots.backend().clone();
        let mut state = match self.store.get(&keys::robots(origin))? {
            Some(b) => backend.decode(&b)?,
            None => backend.unknown(),
        };
        let from = state.kind();
        let jitter: u64 = inner.sched.random_u64();
        state.apply(outcome, now_ms, jitter);
        batch.put(keys::robots(origin), state.encode());
        // handed out (to be logged and counted by the caller) once durable
        let event = FrontierEvent::RobotsTransition {
            origin: origin.to_string(),
            from,
            to: state.kind(),
        };
        Ok((state, event))
    }

    /// Record robots outcomes for origins without a lease (seeding, tests, benchmarks).
    /// Durable on return.
    pub fn set_robots(&self, outcomes: &[(&str, RobotsFetchOutcome)], now_ms: u64) -> Result<()> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut batch = Batch::new();
        let mut states = Vec::with_capacity(outcomes.len());
        for (origin, outcome) in outcomes {
            // no event: these are the caller's own outcomes, not news to it (a preset of
            // many origins would otherwise fill the event queue)
            let (st, _) = self.apply_robots(inner, origin, outcome, now_ms, &mut batch)?;
            states.push((*origin, st));
        }
        self.store.apply(batch)?;
        self.store.flush()?;
        for (origin, st) in states {
            inner.census.note(origin, &st, now_ms);
            inner.robots.put(origin, st);
        }
        Ok(())
    }
}
