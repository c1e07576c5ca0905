//! Completion of robots.txt fetches: the new state durable before anything is gated by it,
//! the crawl-delay it gives made durable with it, the host's slot and gap.

use crate::api::{Frontier, Inner};
use crate::config::CrawlDelayOverCap;
use crate::error::{FrontierError, Result};
use crate::events::FrontierEvent;
use crate::sched::hosts::HostMem;
use crate::sched::politeness;
use crate::sched::records::to_u32;
use crate::sched::robots_gate::{OriginState, RobotsCache, RobotsFetchOutcome};
use crate::store::keys;
use crate::store::Batch;
use crate::work::RobotsLease;

/// After a robots.txt outcome could not be stored, its host waits this long before its
/// robots.txt is fetched again (a failing disk is not hammered with retries).
const ROBOTS_RETRY_AFTER_STORE_ERROR_MS: u64 = 5_000;

impl Frontier {
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
        if delay <= u64::from(h.rec.crawl_delay_ms) {
            return false;
        }
        h.rec.crawl_delay_ms = to_u32(delay);
        if clamped {
            crate::sched::records::bump(&mut h.rec.counters.crawl_delay_clamped);
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
            h.rec.last_response_ms = to_u32(response_ms);
            // (a longer crawl-delay is already in the record, see note_crawl_delay; a
            // shorter one is set when the next page is handed out, as for every page)
            let gap = politeness::gap_ms(&self.cfg, &h.rec).max(crawl_delay.unwrap_or(0));
            h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(now_ms + gap);
            h.set_hold_until(0);
        }
        true
    }

    /// A robots.txt lease whose request was never sent (a cluster node found, right before
    /// sending it, that the host's shard is no longer open to it): the robots.txt slot and
    /// the host's and its address's slots come back, and the host waits its gap from
    /// `now_ms` before its robots.txt is asked for again. False when the lease is no longer
    /// the one its host waits for.
    pub fn give_back_robots(&self, lease: &RobotsLease, now_ms: u64) -> bool {
        let mut inner = self.inner.lock();
        if !Self::give_back_robots_lease(&mut inner, lease, now_ms) {
            return false;
        }
        if let Some(h) = inner.sched.host_mut(lease.host_id) {
            let gap = politeness::gap_ms(&self.cfg, &h.rec);
            h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(now_ms + gap);
        }
        inner.sched.schedule(lease.host_id);
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
            let until_ms = h
                .hold_until_ms()
                .max(now_ms + ROBOTS_RETRY_AFTER_STORE_ERROR_MS);
            h.set_hold_until(until_ms);
        }
        inner.sched.schedule(lease.host_id);
    }

    /// Ends `lease` if it is still the one its host waits for: frees the robots.txt slot,
    /// the host's and its address's in-flight slots. False if it was not (nothing done).
    pub(crate) fn give_back_robots_lease(
        inner: &mut Inner,
        lease: &RobotsLease,
        now_ms: u64,
    ) -> bool {
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
            .and_then(HostMem::robots_pending_origin)
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

    /// robots.txt answers another node got for origins this frontier has no record of (a
    /// shard taken over in a cluster): each (origin, outcome, when it was answered in unix
    /// ms) applied as of its own time, so it expires as it would have there; origins with a
    /// record of their own keep it. One flush for all; durable on return. Returns how many
    /// were taken.
    pub fn adopt_robots(
        &self,
        answers: &[(&str, RobotsFetchOutcome, u64)],
        now_ms: u64,
    ) -> Result<usize> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut batch = Batch::new();
        let mut states = Vec::new();
        for (origin, outcome, at_ms) in answers {
            if self.store.get(&keys::robots(origin))?.is_some() {
                continue;
            }
            let (st, _) = self.apply_robots(inner, origin, outcome, *at_ms, &mut batch)?;
            states.push((*origin, st));
        }
        if states.is_empty() {
            return Ok(0);
        }
        self.store.apply(batch)?;
        self.store.flush()?;
        let n = states.len();
        for (origin, st) in states {
            inner.census.note(origin, &st, now_ms);
            inner.robots.put(origin, st);
        }
        Ok(n)
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
