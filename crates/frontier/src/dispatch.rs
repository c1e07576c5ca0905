//! Dispatch: the next URLs to fetch, through the robots gate and politeness.

use std::cmp::Reverse;
use std::sync::Arc;

use crate::api::{Frontier, Inner};
use crate::canon::origin_of;
use crate::crawl::{self, CrawlGate};
use crate::error::Result;
use crate::external::{client_delay_ms, LeaseTerms};
use crate::resolve::{host_of_origin, ResolveRequest};
use crate::sched;
use crate::sched::aside::Source;
use crate::sched::dispatch::{Step, DROPS_PER_CALL, DROPS_PER_VISIT};

/// Dead URLs (of deleted crawl queues) discarded per host visit, at most (bounds the time
/// under the lock; the host is scheduled again at once).
const DISCARDS_PER_VISIT: usize = 4096;
use crate::sched::hosts::HostMem;
use crate::sched::ipgroup::{IpGate, Resolve};
use crate::sched::politeness;
use crate::sched::robots_gate::{RobotsCache, RobotsDecision, RobotsVerdict};
use crate::store::codec::{DropReason, DropRecord, QueueEntry};
use crate::store::journal::UNSETTLED_MAX;
use crate::store::keys;
use crate::store::packed::Segment;
use crate::store::Batch;
use crate::work::{url_hash, LeaseId, PageLease, RobotsLease, WorkItem};

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
        mut terms: Option<LeaseTerms<'_>>,
    ) -> Result<Vec<WorkItem>> {
        let mut items = Vec::new();
        let mut batch = Batch::new();
        let mut dead = Vec::new();
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            self.requeue_due(inner, now_ms)?;
            Self::release_robots_waiting(&self.cfg, inner);
            Self::release_ip_waiting(inner, now_ms);
            let mut dirty: Vec<u64> = Vec::new();
            let mut skipped: Vec<u64> = Vec::new();
            // the IP groups of the hosts visited: re-armed after the visits, so a woken
            // waiter that found nothing to do does not leave its line asleep
            let mut visited_ips = Vec::new();
            let mut dropped_in_call = 0usize;
            'hosts: while items.len() < max && dropped_in_call < DROPS_PER_CALL {
                let Some(&Reverse((ready, id))) = inner.heap.peek() else {
                    break;
                };
                if ready > now_ms {
                    break;
                }
                inner.heap.pop();
                let ip = match inner.hosts.get_mut(&id) {
                    Some(h) if h.scheduled == Some(ready) => {
                        if let Some(t) = terms.as_mut() {
                            if !(t.accept)(&h.key) {
                                // not this caller's: scheduled again after the visit
                                h.scheduled = None;
                                skipped.push(id);
                                continue;
                            }
                        }
                        h.ip
                    }
                    _ => continue,
                };
                if let Some(ip) = ip {
                    visited_ips.push(ip);
                    if inner.ip_groups.gate(ip, now_ms) != IpGate::Go {
                        // ready by its own rules, but its address is busy: it waits in
                        // the address's line (keeping its place, like in the heap)
                        inner.ip_groups.wait(ip, ready, id);
                        continue;
                    }
                }
                if let Some(h) = inner.hosts.get_mut(&id) {
                    h.scheduled = None;
                }
                let mut drops = 0usize;
                let mut discarded = 0usize;
                let mut parked_now = 0usize;
                self.release_parked(inner, id, now_ms)?;
                loop {
                    let Some(h) = inner.hosts.get_mut(&id) else {
                        continue 'hosts;
                    };
                    let head_entry = self.head_entry(id, h, now_ms)?;
                    let Some((seq, entry, from)) = head_entry else {
                        match h.set_aside_wake() {
                            // only URLs of held origins or waiting retries: look again
                            // when the first of them may go
                            Some(wake) => {
                                h.hold_until_ms = wake.max(now_ms + 1);
                                self.schedule(inner, id);
                            }
                            None => {
                                // nothing queued after all: fix the count
                                h.rec.counters.queued = 0;
                                dirty.push(id);
                            }
                        }
                        continue 'hosts;
                    };
                    match crawl::gate(&inner.crawls, &entry.url, &h.key) {
                        CrawlGate::Go => {}
                        CrawlGate::Dead => {
                            // its crawl or queue was deleted: discarded unserved
                            tracing::debug!(url = %entry.url, "URL of a deleted crawl queue discarded");
                            Self::discard_entry(&mut batch, (id, h), (seq, from));
                            dirty.push(id);
                            discarded += 1;
                            if discarded >= DISCARDS_PER_VISIT {
                                self.schedule(inner, id);
                                continue 'hosts;
                            }
                            continue;
                        }
                        CrawlGate::Limited(name) => {
                            // its crawl reached its limit at this queue: set aside (until
                            // the limit changes) so that other crawls' URLs go on
                            if h.keep_entry(seq) {
                                batch.put(keys::retry(id, seq), entry.encode());
                                batch.cut();
                            }
                            h.consume(seq, from);
                            h.park(&name, seq, u64::MAX);
                            dirty.push(id);
                            continue;
                        }
                    }
                    if let Some(want) = terms.as_ref().and_then(|t| t.crawl) {
                        if crawl::split_stored(&entry.url).crawl != want {
                            // the host's next URL is another crawl's: not this caller's
                            // (one queue per host holds every crawl's URLs in order)
                            skipped.push(id);
                            continue 'hosts;
                        }
                    }
                    let Some(origin) = origin_of(&entry.url).map(str::to_string) else {
                        // not canonical: cannot happen for what we stored; drop it
                        tracing::warn!(url = %entry.url, "non-canonical URL in queue dropped");
                        Self::discard_entry(&mut batch, (id, h), (seq, from));
                        dirty.push(id);
                        continue;
                    };
                    let path = &crawl::untagged(&entry.url)[origin.len()..];
                    self.cached_robots(inner, &origin)?;
                    let verdict = match inner.robots.parts(&origin) {
                        Some((backend, agent, e)) => {
                            RobotsCache::verdict(backend, agent, e, path, now_ms)
                        }
                        None => RobotsVerdict::FetchRobots,
                    };
                    let Some(h) = inner.hosts.get_mut(&id) else {
                        continue 'hosts;
                    };
                    let step = sched::dispatch::decide(
                        verdict,
                        &self.cfg,
                        h.rec.crawl_delay_ms,
                        parked_now,
                        now_ms,
                    );
                    match step {
                        Step::Sleep { until_ms } => {
                            // enough set aside for one visit: look again later
                            h.hold_until_ms = until_ms;
                            h.held_origin = Some(Arc::from(origin.as_str()));
                            self.schedule(inner, id);
                            continue 'hosts;
                        }
                        Step::SetAside { until_ms } => {
                            // a held origin holds its own URLs only: set this one aside
                            // and go on with the host's next URL
                            if h.keep_entry(seq) {
                                batch.put(keys::retry(id, seq), entry.encode());
                                batch.cut();
                            }
                            h.consume(seq, from);
                            if h.park(&origin, seq, until_ms) {
                                tracing::info!(%origin, until_ms, "robots.txt holds the origin: its URLs are set aside, the host's other origins go on");
                            }
                            parked_now += 1;
                            dirty.push(id);
                            continue;
                        }
                        Step::Drop { reason, detail } => {
                            if reason == DropReason::CrawlDelayTooLong {
                                h.rec.skipped = 1;
                                h.rec.counters.crawl_delay_skipped += 1;
                                inner.stats.crawl_delay_skipped += 1;
                            }
                            let rec = Self::drop_entry(
                                &mut batch,
                                (id, h),
                                (seq, from),
                                entry,
                                reason,
                                detail,
                                now_ms,
                            );
                            inner.push_drop(rec);
                            inner.stats.dropped += 1;
                            dirty.push(id);
                            drops += 1;
                            dropped_in_call += 1;
                            if drops >= DROPS_PER_VISIT || dropped_in_call >= DROPS_PER_CALL {
                                self.schedule(inner, id);
                                continue 'hosts;
                            }
                            continue;
                        }
                        Step::FetchRobots => {
                            // a new host's address first, so that even its first request
                            // waits for its IP group (an external fetcher's hosts skip this)
                            if self.cfg.resolve_before_robots && terms.is_none() && h.ip.is_none() {
                                match h.resolve {
                                    Resolve::NotAsked => {
                                        h.resolve = Resolve::Asked;
                                        inner.resolves.push(ResolveRequest {
                                            host_id: id,
                                            host: host_of_origin(&origin).to_string(),
                                        });
                                        inner.stats.resolves_asked += 1;
                                        continue 'hosts;
                                    }
                                    // waits for the answer (`resolved` schedules it)
                                    Resolve::Asked => continue 'hosts,
                                    // did not resolve: the fetch says so, as an outcome
                                    Resolve::Failed => {}
                                }
                            }
                            if self
                                .cfg
                                .max_robots_in_flight
                                .is_some_and(|cap| inner.robots_in_flight >= cap)
                            {
                                // wait in line for a robots.txt slot; the heap goes on
                                // with hosts whose rules are known
                                h.scheduled = Some(ready);
                                inner.robots_waiting.push_back((ready, id));
                                continue 'hosts;
                            }
                            if !self.quota_ok(inner, now_ms) {
                                inner.heap.push(Reverse((ready, id)));
                                if let Some(h) = inner.hosts.get_mut(&id) {
                                    h.scheduled = Some(ready);
                                }
                                break 'hosts;
                            }
                            let Some(h) = inner.hosts.get_mut(&id) else {
                                continue 'hosts;
                            };
                            h.robots_pending = Some(origin.as_str().into());
                            h.rec.in_flight += 1;
                            if let Some(ip) = h.ip {
                                inner.ip_groups.charge(ip, now_ms);
                            }
                            h.rec.counters.robots_fetches += 1;
                            h.rec.next_allowed_ms = now_ms + politeness::gap_ms(&self.cfg, &h.rec);
                            inner.stats.robots_fetches += 1;
                            inner.robots_in_flight += 1;
                            dirty.push(id);
                            items.push(WorkItem::Robots(RobotsLease {
                                host_id: id,
                                url: format!("{origin}/robots.txt"),
                                origin,
                            }));
                            continue 'hosts;
                        }
                        Step::Lease {
                            crawl_delay_ms,
                            clamped,
                        } => {
                            if clamped {
                                h.rec.counters.crawl_delay_clamped += 1;
                                inner.stats.crawl_delay_clamped += 1;
                            }
                            h.rec.crawl_delay_ms = crawl_delay_ms;
                            h.rec.skipped = 0;
                            if !self.quota_ok(inner, now_ms) {
                                inner.heap.push(Reverse((ready, id)));
                                if let Some(h) = inner.hosts.get_mut(&id) {
                                    h.scheduled = Some(ready);
                                }
                                dirty.push(id);
                                break 'hosts;
                            }
                            let Some(h) = inner.hosts.get_mut(&id) else {
                                continue 'hosts;
                            };
                            // the lease is the host record's lease list (written below with
                            // the record); the entry stays until completion
                            let politeness_wait_ms =
                                ready.min(now_ms).saturating_sub(h.free_since_ms);
                            h.leased.push(seq);
                            h.consume(seq, from);
                            h.held_origin = None;
                            h.rec.in_flight += 1;
                            if let Some(ip) = h.ip {
                                inner.ip_groups.charge(ip, now_ms);
                            }
                            h.rec.counters.queued = h.rec.counters.queued.saturating_sub(1);
                            let last_queued = h.rec.counters.queued == 0;
                            h.rec.counters.dispatched += 1;
                            let client_delay = client_delay_ms(&inner.controls, &h.key);
                            h.rec.next_allowed_ms = now_ms
                                + sched::lease::gap_with_client_delay(
                                    politeness::gap_ms(&self.cfg, &h.rec),
                                    client_delay,
                                );
                            inner.stats.dispatched += 1;
                            if let Some(t) = &terms {
                                inner
                                    .lease_clock
                                    .set(LeaseId { host_id: id, seq }, now_ms + t.lease_ms);
                            }
                            dirty.push(id);
                            items.push(WorkItem::Page(PageLease {
                                id: LeaseId { host_id: id, seq },
                                url: entry.url,
                                attempt: entry.attempts + 1,
                                depth: entry.depth,
                                via: entry.via,
                                hops: entry.hops,
                                kind: entry.kind,
                                politeness_wait_ms,
                                revisit: entry.recrawl,
                                last_queued,
                            }));
                            self.schedule(inner, id);
                            continue 'hosts;
                        }
                    }
                }
            }
            for id in skipped {
                self.schedule(inner, id);
            }
            for ip in visited_ips {
                inner.ip_groups.arm(ip);
            }
            if batch.is_empty() && inner.journal.unsettled.len() + dirty.len() <= UNSETTLED_MAX {
                // Nothing else to write: the hosts' records wait for the next call that
                // writes, in the same batch as it (a lease's completion at the latest): a
                // store write per dispatch woke sled's I/O threads each time, a large share
                // of the CPU per page at few workers (docs/benchmarks.md, issue 13 session
                // 17). A crash loses no more than the unflushed write did: the URLs go again.
                inner.journal.unsettled.extend(dirty);
                return Ok(items);
            }
            Self::settle_hosts(inner, dirty, &mut batch, &mut dead);
            if batch.is_empty() {
                return Ok(items);
            }
            self.store.apply(batch)?;
            self.commit.written();
        }
        // No flush here: the next one (a completion's, an enqueue's, a robots outcome's)
        // carries these writes. The engine's log is ordered, so whatever a crash keeps is
        // a prefix of what was applied: a lease lost with it only returns its URL to the
        // queue (served again, at-least-once), a durable completion implies its lease is
        // durable, and the reclaimer's deletes below, applied after the head moves that
        // made the segments dead, cannot outlive them.
        self.reclaimer.delete(dead);
        Ok(items)
    }

    /// Hosts waiting for a robots.txt slot go back to the heap, as many as there are free
    /// slots (their old ready times put them first).
    fn release_robots_waiting(cfg: &crate::config::FrontierConfig, inner: &mut Inner) {
        let Some(cap) = cfg.max_robots_in_flight else {
            return;
        };
        let mut free = cap.saturating_sub(inner.robots_in_flight);
        while free > 0 {
            let Some((ready, id)) = inner.robots_waiting.pop_front() else {
                break;
            };
            // (a stale entry: the host was rescheduled, paused or left memory meanwhile)
            if inner
                .hosts
                .get(&id)
                .is_some_and(|h| h.scheduled == Some(ready))
            {
                inner.heap.push(Reverse((ready, id)));
                free -= 1;
            }
        }
    }

    /// Hosts whose IP address may take a request again go back to the heap, one per
    /// address (their old ready times put them first).
    fn release_ip_waiting(inner: &mut Inner, now_ms: u64) {
        let hosts = &inner.hosts;
        let due = inner.ip_groups.due(now_ms, |ready, id| {
            hosts.get(&id).is_some_and(|h| h.scheduled == Some(ready))
        });
        for (ready, id) in due {
            inner.heap.push(Reverse((ready, id)));
        }
    }

    /// The encoded entry with sequence `seq` of host `id`: its retry entry, its pending
    /// entry, or its place in a segment.
    pub(crate) fn entry_bytes(&self, id: u64, h: &HostMem, seq: u64) -> Result<Option<Vec<u8>>> {
        if h.retries.contains(&seq) {
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
        let Some(v) = self.store.get(&s.key(id))? else {
            return Ok(None);
        };
        let seg = Segment::parse(&v)?;
        Ok(Some(seg.raw((seq - s.first) as usize)?.to_vec()))
    }

    pub(crate) fn quota_ok(&self, inner: &mut Inner, now_ms: u64) -> bool {
        match &mut inner.quota {
            None => true,
            Some(bucket) => {
                let ok = bucket.try_take(now_ms);
                if !ok {
                    inner.stats.rate_limited += 1;
                }
                ok
            }
        }
    }

    /// Take the entry at `seq` out of the host's queue for good (with its retry record, if
    /// any) and count it out of `queued`: what every way of ending an entry unserved shares.
    fn discard_entry(batch: &mut Batch, (id, h): (u64, &mut HostMem), (seq, from): (u64, Source)) {
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
            DropReason::GaveUp => h.rec.counters.given_up += 1,
            _ => h.rec.counters.dropped += 1,
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
        while let Some(&seq) = h.front.first() {
            match self.entry_bytes(id, h, seq)? {
                Some(b) => return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Front))),
                None => {
                    tracing::error!(host = %h.key, seq, "returned URL has no entry; skipped");
                    h.front.remove(0);
                }
            }
        }
        while let Some(i) = h.due_retry(now_ms) {
            let seq = h.delayed[i].seq;
            match self.entry_bytes(id, h, seq)? {
                Some(b) => return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Delayed))),
                None => {
                    tracing::error!(host = %h.key, seq, "retried URL has no entry; skipped");
                    h.delayed.swap_remove(i);
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
        let due = match inner.hosts.get(&id) {
            Some(h) => h.parked_due(now_ms),
            None => return Ok(()),
        };
        for origin in due {
            let key = inner.hosts.get(&id).map(|h| h.key.clone());
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
            let Some(h) = inner.hosts.get_mut(&id) else {
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
