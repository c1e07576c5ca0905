//! Dispatch: the next URLs to fetch, through the robots gate and politeness.

use std::net::IpAddr;
use std::sync::Arc;

use crate::api::{Frontier, Inner};
use crate::crawl;
use crate::error::Result;
use crate::external::LeaseTerms;
use crate::resolve::{host_of_origin, ResolveRequest};
use crate::sched;
use crate::sched::aside::Source;
use crate::sched::dispatch::{Budget, Refusal, RobotsFirst, Step};
use crate::sched::hosts::{DueAt, HostMem};
use crate::sched::records::to_u32;
use crate::sched::robots_gate::{RobotsCache, RobotsDecision, RobotsVerdict};
use crate::store::codec::{DropReason, DropRecord, QueueEntry};
use crate::store::journal::UNSETTLED_MAX;
use crate::store::keys;
use crate::store::packed::Segment;
use crate::store::Batch;
use crate::work::{url_hash, LeaseId, PageLease, RobotsLease, WorkItem};

/// How a host visit goes on after one of its URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// With the host's next URL.
    NextUrl,
    /// With the next host; this one keeps whatever place it has.
    NextHost,
    /// With the next host, this one scheduled again first.
    Reschedule,
    /// Not at all: the global quota is spent, the call's visits end.
    Stop,
}

/// The URL at the head of a host, as read from the store: its sequence, its entry, and
/// where in the host's queue it is.
type Head = (u64, QueueEntry, Source);

/// Leases a dispatch call makes room for before it starts (a worker pool's batch).
const CALL_PRESIZE: usize = 256;

/// One dispatch call: its terms, and what its visits hand out, write, and leave for after
/// them.
#[derive(Default)]
struct Call<'t> {
    now_ms: u64,
    max: usize,
    terms: Option<LeaseTerms<'t>>,
    items: Vec<WorkItem>,
    batch: Batch,
    /// Hosts whose records changed: settled after the visits.
    dirty: Vec<u64>,
    /// Hosts passed over as not the caller's: scheduled again after the visits.
    skipped: Vec<u64>,
    /// The IP groups of the hosts visited: re-armed after the visits, so a woken waiter
    /// that found nothing to do does not leave its line asleep.
    visited_ips: Vec<IpAddr>,
    budget: Budget,
    /// robots.txt slots this call may fill: `max_robots_in_flight`, then its spare cap.
    robots_cap: Option<u64>,
}

impl Frontier {
    // ---------------------------------------------------------------- dispatch

    /// One unit of work that may be done now, if any.
    pub fn next(&self, now_ms: u64) -> Result<Option<WorkItem>> {
        Ok(self.next_batch(now_ms, 1)?.pop())
    }

    /// Up to `max` units of work that may be done now. Leases are written but not flushed:
    /// after a crash before the next flush, their URLs are simply handed out again.
    pub fn next_batch(&self, now_ms: u64, max: usize) -> Result<Vec<WorkItem>> {
        self.next_batch_with(now_ms, max, None)
    }

    /// [`Frontier::next_batch`], with an external fetcher's terms when given: only hosts
    /// whose politeness key `accept` takes are visited (the others keep their turn), and
    /// each page lease gets a deadline after which it returns to its queue.
    pub(crate) fn next_batch_with(
        &self,
        now_ms: u64,
        max: usize,
        terms: Option<LeaseTerms<'_>>,
    ) -> Result<Vec<WorkItem>> {
        // sized for the call up front: grown a lease at a time, the two were reallocated
        // several times a call
        let room = max.min(CALL_PRESIZE);
        let mut call = Call {
            now_ms,
            max,
            terms,
            robots_cap: self.cfg.max_robots_in_flight,
            items: Vec::with_capacity(room),
            dirty: Vec::with_capacity(room),
            ..Call::default()
        };
        let mut dead = Vec::new();
        let items = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            self.requeue_due(inner, now_ms)?;
            inner.sched.handle_call_start(now_ms);
            let ran_out = self.visit_hosts(inner, &mut call)?;
            if ran_out && call.terms.is_none() {
                self.visit_robots_spare(inner, &mut call)?;
            }
            let (skipped, visited_ips) = (
                std::mem::take(&mut call.skipped),
                std::mem::take(&mut call.visited_ips),
            );
            inner.sched.handle_call_end(skipped, visited_ips);
            let (mut batch, dirty) = (call.batch, call.dirty);
            if batch.is_empty() && inner.journal.unsettled.len() + dirty.len() <= UNSETTLED_MAX {
                // Nothing else to write: the hosts' records wait for the next call that
                // writes, in the same batch as it (a lease's completion at the latest): a
                // store write per dispatch woke sled's I/O threads each time, a large share
                // of the CPU per page at few workers (docs/benchmarks.md, issue 13 session
                // 17). A crash loses no more than the unflushed write did: the URLs go again.
                inner.journal.unsettled.extend(dirty);
                return Ok(call.items);
            }
            inner.settling().settle_hosts(dirty, &mut batch, &mut dead);
            if batch.is_empty() {
                return Ok(call.items);
            }
            if let Err(e) = self.store.apply(batch) {
                Self::unlease_unwritten(inner, &call.items, now_ms);
                return Err(e.into());
            }
            self.commit.written();
            call.items
        };
        // No flush here: the next one (a completion's, an enqueue's, a robots outcome's)
        // carries these writes. The engine's log is ordered, so whatever a crash keeps is
        // a prefix of what was applied: a lease lost with it only returns its URL to the
        // queue (served again, at-least-once), a durable completion implies its lease is
        // durable, and the reclaimer's deletes below, applied after the head moves that
        // made the segments dead, cannot outlive them.
        self.reclaimer.delete(dead);
        Ok(items)
    }

    /// The writes of a dispatch call failed: its leases, never handed to anyone, are taken
    /// back (each host's and address's slot, each robots.txt slot, the URL to the front of
    /// its queue) and their hosts go again; otherwise each would hold its host, and each
    /// robots.txt lease a robots.txt slot, for the process's life. What else the call did
    /// in memory stands (a URL it dropped is dropped again after a restart); its hosts'
    /// records are journaled with the next write.
    fn unlease_unwritten(inner: &mut Inner, items: &[WorkItem], now_ms: u64) {
        for item in items {
            let id = match item {
                WorkItem::Page(p) => {
                    Self::unlease_page(inner, p.id, now_ms);
                    p.id.host_id
                }
                WorkItem::Robots(r) => {
                    Self::give_back_robots_lease(inner, r, now_ms);
                    r.host_id
                }
            };
            inner.journal.unsettled.insert(id);
            inner.sched.schedule(id);
        }
    }

    /// Visits the hosts that are ready, earliest first, until the call has `max` items or
    /// has dropped its share, no host is ready, or the global quota is spent. True when it
    /// stopped short of `max` because no host was ready any more.
    fn visit_hosts(&self, inner: &mut Inner, call: &mut Call<'_>) -> Result<bool> {
        while call.items.len() < call.max && call.budget.call_open() {
            let Some((ready, id)) = Self::next_host(inner, call) else {
                return Ok(true);
            };
            match self.visit_host(inner, call, ready, id)? {
                Then::Stop => return Ok(false),
                Then::Reschedule => inner.sched.schedule(id),
                Then::NextHost | Then::NextUrl => {}
            }
        }
        Ok(false)
    }

    /// Everything else that may go went and the call is still short (the caller's
    /// workers would idle): hosts waiting in line for a robots.txt slot get the rest, up to
    /// `max_robots_in_flight_spare` in flight. The cap that keeps a robots.txt wall off
    /// the pages holds only while pages fill the calls.
    fn visit_robots_spare(&self, inner: &mut Inner, call: &mut Call<'_>) -> Result<()> {
        let Some(spare) = self.cfg.max_robots_in_flight_spare else {
            return Ok(());
        };
        let room = call.max.saturating_sub(call.items.len()) as u64;
        if inner.sched.readmit_robots_waiting(spare, room) > 0 {
            call.robots_cap = Some(spare);
            self.visit_hosts(inner, call)?;
        }
        Ok(())
    }

    /// The host to visit next and its ready time, from the scheduler; hosts that are
    /// not the caller's are passed over (and scheduled again after the visits).
    fn next_host(inner: &mut Inner, call: &mut Call<'_>) -> Option<(u64, u64)> {
        let Call {
            now_ms,
            terms,
            skipped,
            visited_ips,
            ..
        } = call;
        let accept = terms
            .as_mut()
            .map(|t| &mut t.accept as &mut dyn FnMut(&str) -> bool);
        inner
            .sched
            .poll_ready(*now_ms, accept, skipped, visited_ips)
    }

    /// One visit of host `id`, whose turn came at `ready`: its URLs from the head on, each
    /// read from the store, gated and decided by the scheduler, and the decision applied,
    /// until one is handed out, the host has to wait, or the visit has spent its budget.
    fn visit_host(
        &self,
        inner: &mut Inner,
        call: &mut Call<'_>,
        ready: u64,
        id: u64,
    ) -> Result<Then> {
        if let Some(h) = inner.sched.host_mut(id) {
            h.scheduled = DueAt::NEVER;
        }
        call.budget.start_visit();
        self.release_parked(inner, id, call.now_ms)?;
        loop {
            let Some(h) = inner.sched.host_mut(id) else {
                return Ok(Then::NextHost);
            };
            let Some(head) = self.head_entry(id, h, call.now_ms)? else {
                return Ok(Self::nothing_to_hand_out(h, call, id));
            };
            let want = call.terms.as_ref().and_then(|t| t.crawl);
            let then = match sched::dispatch::admit(&inner.crawls, &head.1.url, &h.key, want) {
                Ok(origin) => self.dispatch_url(inner, call, (ready, id), head, origin)?,
                Err(refusal) => Self::refuse(h, call, id, head, refusal),
            };
            if then != Then::NextUrl {
                return Ok(then);
            }
        }
    }

    /// The host has no URL to hand out now. With only URLs of held origins or waiting
    /// retries, it looks again when the first of them may go; with nothing queued after
    /// all, its count is fixed.
    fn nothing_to_hand_out(h: &mut HostMem, call: &mut Call<'_>, id: u64) -> Then {
        match h.set_aside_wake() {
            Some(wake) => {
                h.set_hold_until(wake.max(call.now_ms + 1));
                Then::Reschedule
            }
            None => {
                h.rec.counters.queued = 0;
                call.dirty.push(id);
                Then::NextHost
            }
        }
    }

    /// A URL that does not go on to its robots verdict (see [`sched::dispatch::admit`]).
    fn refuse(h: &mut HostMem, call: &mut Call<'_>, id: u64, head: Head, refusal: Refusal) -> Then {
        let (seq, entry, from) = head;
        match refusal {
            Refusal::DeadQueue => {
                tracing::debug!(url = %entry.url, "URL of a deleted crawl queue discarded");
                Self::discard_entry(&mut call.batch, (id, h), (seq, from));
                call.dirty.push(id);
                if call.budget.count_discard() {
                    return Then::Reschedule;
                }
                Then::NextUrl
            }
            Refusal::AtLimit(name) => {
                Self::set_aside(h, &mut call.batch, id, (seq, &entry, from), &name, u64::MAX);
                call.dirty.push(id);
                Then::NextUrl
            }
            Refusal::OtherCrawl => {
                call.skipped.push(id);
                Then::NextHost
            }
            Refusal::NotCanonical => {
                tracing::warn!(url = %entry.url, "non-canonical URL in queue dropped");
                Self::discard_entry(&mut call.batch, (id, h), (seq, from));
                call.dirty.push(id);
                Then::NextUrl
            }
        }
    }

    /// A URL past the gates before robots.txt: its origin's robots verdict, for which the
    /// rules may be read from the store, and then the scheduler's step for it.
    fn dispatch_url(
        &self,
        inner: &mut Inner,
        call: &mut Call<'_>,
        (ready, id): (u64, u64),
        head: Head,
        origin: String,
    ) -> Result<Then> {
        let now_ms = call.now_ms;
        let path = &crawl::untagged(&head.1.url)[origin.len()..];
        self.cached_robots(inner, &origin)?;
        let verdict = match inner.robots.parts(&origin) {
            Some((backend, agent, e)) => RobotsCache::verdict(backend, agent, e, path, now_ms),
            None => RobotsVerdict::FetchRobots,
        };
        Ok(self.apply_step(inner, call, (ready, id), head, (origin, verdict)))
    }

    /// The scheduler's step for the URL at the head of host `id`, given its origin's robots
    /// verdict, applied: to the host, the call's batch and items, and the visit's budget.
    fn apply_step(
        &self,
        inner: &mut Inner,
        call: &mut Call<'_>,
        (ready, id): (u64, u64),
        (seq, entry, from): Head,
        (origin, verdict): (String, RobotsVerdict),
    ) -> Then {
        let now_ms = call.now_ms;
        let Some(h) = inner.sched.host_mut(id) else {
            return Then::NextHost;
        };
        let set_aside = call.budget.set_aside();
        let step = sched::dispatch::decide(
            verdict,
            &self.cfg,
            h.rec.crawl_delay_ms.into(),
            set_aside,
            now_ms,
        );
        match step {
            Step::Sleep { until_ms } => {
                // enough set aside for one visit: look again later
                h.set_hold_until(until_ms);
                h.aside_mut().held_origin = Some(Arc::from(origin.as_str()));
                Then::Reschedule
            }
            Step::SetAside { until_ms } => {
                // a held origin holds its own URLs only: set this one aside and go on with
                // the host's next URL
                if Self::set_aside(
                    h,
                    &mut call.batch,
                    id,
                    (seq, &entry, from),
                    &origin,
                    until_ms,
                ) {
                    tracing::info!(%origin, until_ms, "robots.txt holds the origin: its URLs are set aside, the host's other origins go on");
                }
                call.budget.count_set_aside();
                call.dirty.push(id);
                Then::NextUrl
            }
            Step::Drop { reason, detail } => {
                if reason == DropReason::CrawlDelayTooLong {
                    h.rec.skipped = true;
                    crate::sched::records::bump(&mut h.rec.counters.crawl_delay_skipped);
                    inner.stats.crawl_delay_skipped += 1;
                }
                let rec = Self::drop_entry(
                    &mut call.batch,
                    (id, h),
                    (seq, from),
                    entry,
                    reason,
                    detail,
                    now_ms,
                );
                inner.push_drop(rec);
                inner.stats.dropped += 1;
                call.dirty.push(id);
                if call.budget.count_drop() {
                    return Then::Reschedule;
                }
                Then::NextUrl
            }
            Step::FetchRobots => {
                let external = call.terms.is_some();
                let first = sched::dispatch::robots_first(
                    &self.cfg,
                    call.robots_cap,
                    external,
                    h.ip.is_some(),
                    h.resolve,
                    inner.sched.robots_slots_taken(),
                );
                self.fetch_robots(inner, call, (ready, id), origin, first)
            }
            Step::Lease {
                crawl_delay_ms,
                clamped,
            } => {
                if clamped {
                    crate::sched::records::bump(&mut h.rec.counters.crawl_delay_clamped);
                    inner.stats.crawl_delay_clamped += 1;
                }
                // the gap running was counted with a shorter crawl-delay than the rules
                // give now: the host waits out the longer one first
                let later =
                    sched::politeness::lengthened_until(&self.cfg, &h.rec, crawl_delay_ms, now_ms);
                h.rec.crawl_delay_ms = to_u32(crawl_delay_ms);
                if let Some(until) = later {
                    h.rec.next_allowed_ms = until;
                    call.dirty.push(id);
                    return Then::Reschedule;
                }
                h.rec.skipped = false;
                if !self.quota_ok(inner, now_ms) {
                    inner.sched.keep_turn(ready, id);
                    call.dirty.push(id);
                    return Then::Stop;
                }
                self.lease_page(inner, call, (ready, id), (seq, entry, from))
            }
        }
    }

    /// The URL's origin needs its robots.txt: what comes first ([`RobotsFirst`]), then the
    /// global quota, then a robots lease for the origin.
    fn fetch_robots(
        &self,
        inner: &mut Inner,
        call: &mut Call<'_>,
        (ready, id): (u64, u64),
        origin: String,
        first: RobotsFirst,
    ) -> Then {
        let now_ms = call.now_ms;
        match first {
            RobotsFirst::AskAddress => {
                inner.sched.handle_resolve_asked(id);
                inner.resolves.push(ResolveRequest {
                    host_id: id,
                    host: host_of_origin(&origin).to_string(),
                });
                inner.stats.resolves_asked += 1;
                return Then::NextHost;
            }
            RobotsFirst::AwaitAddress => return Then::NextHost,
            RobotsFirst::AwaitSlot => {
                inner.sched.wait_for_robots_slot(ready, id);
                return Then::NextHost;
            }
            RobotsFirst::Fetch => {}
        }
        if !self.quota_ok(inner, now_ms) {
            inner.sched.keep_turn(ready, id);
            return Then::Stop;
        }
        if !inner.sched.handle_robots_lease(id, &origin, now_ms) {
            return Then::NextHost;
        }
        inner.stats.robots_fetches += 1;
        call.dirty.push(id);
        call.items.push(WorkItem::Robots(RobotsLease {
            host_id: id,
            url: format!("{origin}/robots.txt"),
            origin,
        }));
        Then::NextHost
    }

    /// Hands out the URL at `seq` as a page lease. The lease is the host record's lease
    /// list (written with the record); the entry stays until completion.
    fn lease_page(
        &self,
        inner: &mut Inner,
        call: &mut Call<'_>,
        (ready, id): (u64, u64),
        (seq, entry, from): Head,
    ) -> Then {
        let now_ms = call.now_ms;
        let deadline_ms = call.terms.as_ref().map(|t| now_ms + t.lease_ms);
        let Some(leased) =
            inner
                .sched
                .handle_page_lease((ready, id), (seq, from), now_ms, deadline_ms)
        else {
            return Then::NextHost;
        };
        inner.stats.dispatched += 1;
        call.dirty.push(id);
        call.items.push(WorkItem::Page(PageLease {
            id: LeaseId { host_id: id, seq },
            url: entry.url,
            attempt: entry.attempts + 1,
            depth: entry.depth,
            via: entry.via,
            hops: entry.hops,
            kind: entry.kind,
            politeness_wait_ms: leased.politeness_wait_ms,
            revisit: entry.recrawl,
            last_queued: leased.last_queued,
        }));
        Then::Reschedule
    }

    /// Sets the URL at `seq` aside under `origin` until `until_ms`, out of the queue's order;
    /// its entry is kept as a retry entry, from where it is handed out later. True for the
    /// origin's first URL set aside.
    fn set_aside(
        h: &mut HostMem,
        batch: &mut Batch,
        id: u64,
        (seq, entry, from): (u64, &QueueEntry, Source),
        origin: &str,
        until_ms: u64,
    ) -> bool {
        if h.keep_entry(seq) {
            batch.put(keys::retry(id, seq), entry.encode());
            batch.cut();
        }
        h.consume(seq, from);
        h.park(origin, seq, until_ms)
    }

    /// The encoded entry with sequence `seq` of host `id`: its retry entry, its pending
    /// entry, or its place in a segment.
    pub(crate) fn entry_bytes(&self, id: u64, h: &HostMem, seq: u64) -> Result<Option<Vec<u8>>> {
        if h.aside().retries.contains(&seq) {
            return Ok(self.store.get(&keys::retry(id, seq))?);
        }
        if let Some(b) = h.pending.get(seq) {
            return Ok(Some(b.to_vec()));
        }
        let i = h.segs.partition_point(|s| s.first <= seq);
        let Some(&s) = i.checked_sub(1).and_then(|i| h.segs.get(i)) else {
            return Ok(None);
        };
        if seq >= s.end() {
            return Ok(None);
        }
        let Some(v) = self.store.get(&crate::store::keys::segment_key(&s, id))? else {
            return Ok(None);
        };
        if s.pack_no().is_some() {
            return Ok(crate::pack::entry_in(&v, id, seq)?.map(<[u8]>::to_vec));
        }
        let seg = Segment::parse(&v)?;
        Ok(Some(seg.raw((seq - s.first) as usize)?.to_vec()))
    }

    pub(crate) fn quota_ok(&self, inner: &mut Inner, now_ms: u64) -> bool {
        let ok = inner.sched.poll_quota(now_ms);
        if !ok {
            inner.stats.rate_limited += 1;
        }
        ok
    }

    /// Take the entry at `seq` out of the host's queue for good (with its retry record, if
    /// any) and count it out of `queued`: what every way of ending an entry unserved shares.
    pub(crate) fn discard_entry(
        batch: &mut Batch,
        (id, h): (u64, &mut HostMem),
        (seq, from): (u64, Source),
    ) {
        h.consume(seq, from);
        if h.forget_retry(seq) {
            batch.del(keys::retry(id, seq));
        }
        h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
    }

    pub(crate) fn drop_entry(
        batch: &mut Batch,
        (id, h): (u64, &mut HostMem),
        (seq, from): (u64, Source),
        entry: QueueEntry,
        reason: DropReason,
        detail: String,
        now_ms: u64,
    ) -> DropRecord {
        tracing::debug!(url = %entry.url, reason = reason.code(), %detail, "URL dropped");
        Self::discard_entry(batch, (id, h), (seq, from));
        let hash = url_hash(&entry.url);
        let rec = DropRecord::of(entry, reason, detail, now_ms);
        batch.put(keys::dropped(hash), rec.encode());
        batch.put(keys::unlogged(hash), Vec::new());
        batch.cut();
        match reason {
            DropReason::GaveUp => crate::sched::records::bump(&mut h.rec.counters.given_up),
            _ => crate::sched::records::bump(&mut h.rec.counters.dropped),
        }
        rec
    }

    /// The next entry to hand out: the front (returned leases, host-throttled retries,
    /// released URLs of held origins) first, then a per-URL retry that is due, then the
    /// head of the queue.
    pub(crate) fn head_entry(
        &self,
        id: u64,
        h: &mut HostMem,
        now_ms: u64,
    ) -> Result<Option<(u64, QueueEntry, Source)>> {
        while let Some(&seq) = h.aside().front.first() {
            match self.entry_bytes(id, h, seq)? {
                Some(b) => return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Front))),
                None => {
                    tracing::error!(host = %h.key, seq, "returned URL has no entry; skipped");
                    h.aside_mut().front.remove(0);
                }
            }
        }
        while let Some(i) = h.due_retry(now_ms) {
            let seq = h.aside().delayed[i].seq;
            match self.entry_bytes(id, h, seq)? {
                Some(b) => return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Delayed))),
                None => {
                    tracing::error!(host = %h.key, seq, "retried URL has no entry; skipped");
                    h.aside_mut().delayed.swap_remove(i);
                }
            }
        }
        while let Some(seq) = h.next_seq_from(h.rec.head_seq) {
            match self.entry_bytes(id, h, seq)? {
                Some(b) => {
                    h.rec.head_seq = seq;
                    return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Head)));
                }
                None => h.rec.head_seq = seq + 1,
            }
        }
        Ok(None)
    }

    /// Origins whose URLs were set aside and whose robots state no longer holds them: the
    /// URLs go back to the front (they are older than the head), to be gated again.
    pub(crate) fn release_parked(&self, inner: &mut Inner, id: u64, now_ms: u64) -> Result<()> {
        let due = match inner.sched.host(id) {
            Some(h) => h.parked_due(now_ms),
            None => return Ok(()),
        };
        for origin in due {
            let key = inner.sched.host(id).map(|h| h.key.clone());
            let limited = key.and_then(|k| crawl::limit_park_holds(&inner.crawls, &origin, &k));
            let held_until = match limited {
                // a crawl's URLs set aside at its limit: until the limit changes
                Some(true) => Some(u64::MAX),
                Some(false) => None,
                None => {
                    let entry = self.cached_robots(inner, &origin)?;
                    match entry.state.decide(now_ms) {
                        RobotsDecision::Hold(until) => {
                            Some(until.unwrap_or(now_ms + self.cfg.robots_hold_recheck_ms))
                        }
                        _ => None,
                    }
                }
            };
            let Some(h) = inner.sched.host_mut(id) else {
                return Ok(());
            };
            let back = h.recheck_parked(&origin, held_until, now_ms);
            if back > 0 {
                tracing::info!(%origin, urls = back, "origin no longer held: its set-aside URLs go back to the front");
            }
        }
        Ok(())
    }
}
