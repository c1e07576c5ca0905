//! A host's queued URLs taken out of this frontier, for another frontier to queue them (a
//! cluster node giving a shard up): every queued entry, from the head on, returned ones,
//! retries still waiting out their back-off and those set aside while their origin is held,
//! consumed as a visit that discards it would, durably. Leased URLs (in flight) stay: their
//! outcome comes back here. The host keeps its record (politeness, counters) and its place in
//! the seen-set. And a lease given back unsent, when the host's shard closed before its
//! request went.

use std::sync::Arc;

use crate::api::Inner;
use crate::error::Result;
use crate::store::codec::QueueEntry;
use crate::store::Batch;
use crate::{Frontier, LeaseId};

impl Frontier {
    /// Hosts handed over by another frontier with the wait each was still owed there (its
    /// gap, crawl-delay or back-off): each waits at least that long from `now_ms`. Hosts
    /// not in memory (nothing queued here) are skipped. Returns how many were held.
    pub fn hold_hosts_for(&self, waits: &[(&str, u64)], now_ms: u64) -> usize {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut held = 0;
        for &(key, wait_ms) in waits {
            let Some(id) = inner.sched.id_of(key) else {
                continue;
            };
            if let Some(h) = inner.sched.host_mut(id) {
                let until = now_ms.saturating_add(wait_ms);
                h.rec.next_allowed_ms = h.rec.next_allowed_ms.max(until);
                held += 1;
            }
            inner.sched.schedule(id);
        }
        held
    }

    /// Take every queued URL of politeness key `key` out of the frontier (durable on
    /// return); returns their entries, in queue order as far as the queue has one.
    pub fn take_queued(&self, key: &str) -> Result<Vec<QueueEntry>> {
        let mut batch = Batch::new();
        let mut dead = Vec::new();
        let mut taken = Vec::new();
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let Some(id) = inner.sched.id_of(key) else {
                return Ok(taken);
            };
            // what is set aside while its origin is held goes back to the front first
            if let Some(h) = inner.sched.host_mut(id) {
                let origins: Vec<Arc<str>> =
                    h.aside().parked.iter().map(|(o, _)| o.clone()).collect();
                for origin in origins {
                    h.recheck_parked(&origin, None, 0);
                }
            }
            // u64::MAX: every retry counts as due, whatever its back-off
            while let Some(h) = inner.sched.host_mut(id) {
                let Some((seq, entry, from)) = self.head_entry(id, h, u64::MAX)? else {
                    break;
                };
                Self::discard_entry(&mut batch, (id, h), (seq, from));
                taken.push(entry);
            }
            inner
                .settling()
                .settle_hosts(vec![id], &mut batch, &mut dead);
            inner.sched.schedule(id);
        }
        self.store.apply(batch)?;
        self.store.flush()?;
        self.reclaimer.delete(dead);
        Ok(taken)
    }

    /// A page lease whose request was never sent (a cluster node found, right before
    /// sending it, that the host's shard is no longer open to it): its URL goes back to the
    /// front of its host's queue with no attempt counted, and the host and its address get
    /// their slots back (the gap the lease started stays). Not flushed: after a crash the
    /// lease returns at open anyway. False when the lease is no longer out.
    pub fn give_back(&self, lease: LeaseId, now_ms: u64) -> Result<bool> {
        let id = lease.host_id;
        let mut batch = Batch::new();
        let mut dead = Vec::new();
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            if !Self::unlease_page(inner, lease, now_ms) {
                return Ok(false);
            }
            inner
                .settling()
                .settle_hosts(vec![id], &mut batch, &mut dead);
            inner.sched.schedule(id);
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
            self.commit.written();
        }
        self.reclaimer.delete(dead);
        Ok(true)
    }
}

impl Frontier {
    /// A page lease taken back in memory: its URL to the front of its host's queue with
    /// no attempt counted, the host's and its address's slots free. False when the lease
    /// is not out. The caller writes the host's record and schedules it.
    pub(crate) fn unlease_page(inner: &mut Inner, lease: LeaseId, now_ms: u64) -> bool {
        let (id, seq) = (lease.host_id, lease.seq);
        let Some(pos) = inner
            .sched
            .host(id)
            .and_then(|h| h.leased().iter().position(|&s| s == seq))
        else {
            return false;
        };
        let Some(h) = inner.sched.handle_page_done(id, pos, now_ms) else {
            return false;
        };
        let front = &mut h.aside_mut().front;
        if let Err(at) = front.binary_search(&seq) {
            front.insert(at, seq);
        }
        h.rec.counters.queued += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{allow_all, pages};
    use crate::*;

    const T0: u64 = 1_700_000_000_000;

    fn open(dir: &std::path::Path) -> Frontier {
        let mut c = FrontierConfig::new(dir).without_gaps();
        c.seed = Some(3);
        Frontier::open(c).unwrap()
    }

    fn urls(host: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://{host}/p{i}")).collect()
    }

    /// The pages handed out at `now`, each completed at once when `complete`.
    fn leased_pages(f: &Frontier, now: u64, complete: bool) -> Vec<String> {
        let mut out = Vec::new();
        for w in f.next_batch(now, 100).unwrap() {
            if let WorkItem::Page(p) = w {
                if complete {
                    f.complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                        .unwrap();
                }
                out.push(p.url);
            }
        }
        out
    }

    #[test]
    fn taken_urls_leave_for_good_and_the_same_urls_queued_again_are_served() {
        let dir = tempfile::tempdir().unwrap();
        let f = open(dir.path());
        allow_all(&f, &["a.test", "b.test"], T0);
        let items: Vec<EnqueueItem> = urls("a.test", 5)
            .into_iter()
            .map(|u| EnqueueItem {
                depth: 2,
                hops: "LL".into(),
                ..EnqueueItem::seed(u)
            })
            .collect();
        f.enqueue_items(&items, T0).unwrap();
        f.enqueue_batch(&urls("b.test", 2), T0).unwrap();
        // one page of each host in flight
        let first = leased_pages(&f, T0, false);
        assert_eq!(first.len(), 2, "{first:?}");
        let taken = f.take_queued("a.test").unwrap();
        let taken_urls: Vec<&str> = taken.iter().map(|e| e.url.as_str()).collect();
        assert_eq!(
            taken_urls,
            [
                "http://a.test/p1",
                "http://a.test/p2",
                "http://a.test/p3",
                "http://a.test/p4"
            ]
        );
        assert!(
            taken.iter().all(|e| e.depth == 2 && e.hops == "LL"),
            "where they came from goes along"
        );
        assert!(f.queued_urls("a.test").unwrap().is_empty());
        // durable: after a reopen a.test has nothing queued, b.test keeps its URL
        drop(f);
        let f = open(dir.path());
        allow_all(&f, &["a.test", "b.test"], T0);
        let later = T0 + 60_000;
        let served = leased_pages(&f, later, true);
        assert!(
            served.iter().all(|u| !u.contains("a.test/p1")),
            "{served:?}"
        );
        assert!(f
            .queued_urls("a.test")
            .unwrap()
            .iter()
            .all(|u| u.ends_with("/p0")));
        // queued again (as a node that gets the shard back does), they are served
        let again: Vec<EnqueueItem> = taken
            .into_iter()
            .map(|e| EnqueueItem::seed(e.url))
            .collect();
        f.enqueue_again(&again, later).unwrap();
        let mut all = Vec::new();
        for i in 1..20 {
            all.extend(leased_pages(&f, later + i * 10_000, true));
        }
        for u in ["http://a.test/p1", "http://a.test/p4"] {
            assert!(all.iter().any(|s| s == u), "{u} not served: {all:?}");
        }
    }

    /// A frontier whose hosts wait 1 s between two requests.
    fn open_with_gap(dir: &std::path::Path) -> Frontier {
        let mut c = FrontierConfig::new(dir);
        c.min_delay_ms = 1_000;
        c.delay_factor = 0.0;
        c.seed = Some(3);
        Frontier::open(c).unwrap()
    }

    /// A lease given back unsent is served again first, as the same attempt, once the
    /// host's gap is over; given back twice, or after its outcome, it is no longer out.
    #[test]
    fn a_lease_given_back_unsent_is_served_again_first_as_the_same_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let f = open_with_gap(dir.path());
        allow_all(&f, &["a.test"], T0);
        f.enqueue_batch(&urls("a.test", 2), T0).unwrap();
        let leased = pages(f.next_batch(T0, 10).unwrap());
        assert_eq!(leased.len(), 1);
        let first = &leased[0];
        assert!(f.give_back(first.id, T0 + 5).unwrap());
        assert!(!f.give_back(first.id, T0 + 6).unwrap(), "no longer out");
        // the gap the lease started stays: nothing before it ends
        assert!(f.next_batch(T0 + 500, 10).unwrap().is_empty());
        let again = pages(f.next_batch(T0 + 1_000, 10).unwrap());
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].url, first.url, "the front first");
        assert_eq!(again[0].attempt, first.attempt, "no attempt counted");
        f.complete(
            again[0].id,
            PageOutcome::Done { response_ms: 1 },
            T0 + 1_001,
        )
        .unwrap();
        assert!(!f.give_back(again[0].id, T0 + 1_002).unwrap());
        assert_eq!(leased_pages(&f, T0 + 2_001, true), ["http://a.test/p1"]);
        assert!(
            leased_pages(&f, T0 + 9_000, true).is_empty(),
            "nothing left"
        );
    }

    /// A robots.txt lease given back unsent frees its slots, and the host's robots.txt is
    /// asked for again once its gap from the give-back is over.
    #[test]
    fn a_robots_lease_given_back_unsent_is_asked_again_after_the_gap() {
        let dir = tempfile::tempdir().unwrap();
        let f = open_with_gap(dir.path());
        f.enqueue_batch(&urls("a.test", 1), T0).unwrap();
        let robots = |now| -> Vec<RobotsLease> {
            f.next_batch(now, 10)
                .unwrap()
                .into_iter()
                .filter_map(|w| match w {
                    WorkItem::Robots(r) => Some(r),
                    WorkItem::Page(_) => None,
                })
                .collect()
        };
        let first = robots(T0);
        assert_eq!(first.len(), 1, "{first:?}");
        assert!(f.give_back_robots(&first[0], T0 + 5));
        assert!(!f.give_back_robots(&first[0], T0 + 6), "no longer out");
        assert!(robots(T0 + 500).is_empty(), "within the gap");
        let again = robots(T0 + 1_005);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].origin, first[0].origin);
    }

    #[test]
    fn a_host_handed_over_with_a_wait_is_not_asked_before_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let f = open(dir.path());
        allow_all(&f, &["a.test", "b.test"], T0);
        f.enqueue_batch(&[urls("a.test", 1), urls("b.test", 1)].concat(), T0)
            .unwrap();
        // a.test was asked 1.5 s ago at its last holder, whose gap is 2 s: 500 ms left;
        // b.test owed nothing, and x.test is not here at all
        let waits = [("a.test", 500), ("x.test", 900)];
        assert_eq!(f.hold_hosts_for(&waits, T0), 1);
        assert_eq!(leased_pages(&f, T0 + 1, true), ["http://b.test/p0"]);
        assert!(leased_pages(&f, T0 + 499, true).is_empty());
        assert_eq!(leased_pages(&f, T0 + 500, true), ["http://a.test/p0"]);
    }
}
