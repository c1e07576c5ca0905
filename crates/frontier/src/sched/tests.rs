//! The scheduler's rules, without a store: hundreds of cases in milliseconds.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::aside::{Delayed, PARK_PER_VISIT};
use super::dispatch::{decide, Step};
use super::failure::{backoff_step_ms, FailureScope, NetworkFailure, PageOutcome};
use super::hosts::{ready_at, schedule, HostMem, ReadyHeap, SegRef};
use super::politeness::gap_ms;
use super::robots_gate::RobotsVerdict;
use crate::config::{CrawlDelayOverCap, FrontierConfig};
use crate::store::codec::{DropReason, HostRecord};

const T0: u64 = 1_700_000_000_000;

fn cfg() -> FrontierConfig {
    FrontierConfig::new("/nonexistent")
}

/// A host with `n` URLs queued from sequence 0 (pending, not yet folded).
fn host(n: u64) -> HostMem {
    let mut h = HostMem::empty(Arc::from("a.test"), HostRecord::default());
    for i in 0..n {
        h.pending.push(format!("entry {i}").as_bytes());
    }
    h.rec.counters.queued = n;
    h
}

// ------------------------------------------------------------------ dispatch decision

#[test]
fn decide_table() {
    let base = cfg();
    let cap = base.max_crawl_delay_ms;
    let skip = FrontierConfig {
        crawl_delay_over_cap: CrawlDelayOverCap::Skip,
        ..cfg()
    };
    let ms = Duration::from_millis;
    #[rustfmt::skip]
    let cases: Vec<(RobotsVerdict, &FrontierConfig, u64, usize, Step)> = vec![
        (RobotsVerdict::FetchRobots, &base, 0, 0, Step::FetchRobots),
        (RobotsVerdict::Allow(None), &base, 0, 0, Step::Lease { crawl_delay_ms: 0, clamped: false }),
        // a host's old crawl-delay is replaced by what the rules say now
        (RobotsVerdict::Allow(None), &base, 5_000, 0, Step::Lease { crawl_delay_ms: 0, clamped: false }),
        (RobotsVerdict::Allow(Some(ms(2_000))), &base, 0, 0, Step::Lease { crawl_delay_ms: 2_000, clamped: false }),
        (RobotsVerdict::Allow(Some(ms(cap))), &base, 0, 0, Step::Lease { crawl_delay_ms: cap, clamped: false }),
        // above the cap: clamped, counted once (not again while the host has the cap)
        (RobotsVerdict::Allow(Some(ms(cap + 1))), &base, 0, 0, Step::Lease { crawl_delay_ms: cap, clamped: true }),
        (RobotsVerdict::Allow(Some(ms(cap + 1))), &base, cap, 0, Step::Lease { crawl_delay_ms: cap, clamped: false }),
        // ... or the URL dropped when the host is to be skipped
        (RobotsVerdict::Allow(Some(ms(cap + 1))), &skip, 0, 0, Step::Drop {
            reason: DropReason::CrawlDelayTooLong,
            detail: format!("crawl-delay {} ms above cap {cap} ms", cap + 1),
        }),
        (RobotsVerdict::Allow(Some(ms(cap))), &skip, 0, 0, Step::Lease { crawl_delay_ms: cap, clamped: false }),
        (RobotsVerdict::Disallow("disallow: /x (line 2)".into()), &base, 0, 0, Step::Drop {
            reason: DropReason::RobotsDisallowed,
            detail: "disallow: /x (line 2)".into(),
        }),
        // a held origin: its URL is set aside until the state's instant ...
        (RobotsVerdict::Hold(Some(T0 + 500)), &base, 0, 0, Step::SetAside { until_ms: T0 + 500 }),
        // ... or the recheck interval when the state names none, never the past
        (RobotsVerdict::Hold(None), &base, 0, 0, Step::SetAside { until_ms: T0 + base.robots_hold_recheck_ms }),
        (RobotsVerdict::Hold(Some(T0 - 5)), &base, 0, 0, Step::SetAside { until_ms: T0 + 1 }),
        // enough set aside in one visit: the host sleeps instead
        (RobotsVerdict::Hold(Some(T0 + 500)), &base, 0, PARK_PER_VISIT - 1, Step::SetAside { until_ms: T0 + 500 }),
        (RobotsVerdict::Hold(Some(T0 + 500)), &base, 0, PARK_PER_VISIT, Step::Sleep { until_ms: T0 + 500 }),
    ];
    for (i, (verdict, c, host_cd, parked, want)) in cases.into_iter().enumerate() {
        assert_eq!(decide(verdict, c, host_cd, parked, T0), want, "case {i}");
    }
}

fn verdict() -> impl Strategy<Value = RobotsVerdict> {
    prop_oneof![
        Just(RobotsVerdict::FetchRobots),
        proptest::option::of(0u64..200_000)
            .prop_map(|t| RobotsVerdict::Hold(t.map(|t| T0 - 100_000 + t))),
        proptest::option::of(0u64..200_000)
            .prop_map(|d| RobotsVerdict::Allow(d.map(Duration::from_millis))),
        "[a-z/]{0,8}".prop_map(RobotsVerdict::Disallow),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the verdict: a lease never carries a crawl-delay above the cap, a held
    /// origin is never looked at again in the past, a disallowed URL is always dropped,
    /// and robots.txt comes first exactly when the verdict asks for it.
    #[test]
    fn decide_keeps_its_promises(
        v in verdict(),
        skip in any::<bool>(),
        cap in 0u64..120_000,
        host_cd in 0u64..120_000,
        parked in 0usize..(2 * PARK_PER_VISIT),
    ) {
        let c = FrontierConfig {
            max_crawl_delay_ms: cap,
            crawl_delay_over_cap: if skip { CrawlDelayOverCap::Skip } else { CrawlDelayOverCap::Clamp },
            ..cfg()
        };
        let step = decide(v.clone(), &c, host_cd, parked, T0);
        match (&v, &step) {
            (RobotsVerdict::FetchRobots, Step::FetchRobots) => {}
            (RobotsVerdict::Disallow(rule), Step::Drop { reason: DropReason::RobotsDisallowed, detail }) => {
                prop_assert_eq!(rule, detail);
            }
            (RobotsVerdict::Hold(_), Step::SetAside { until_ms }) => {
                prop_assert!(*until_ms > T0);
                prop_assert!(parked < PARK_PER_VISIT);
            }
            (RobotsVerdict::Hold(_), Step::Sleep { until_ms }) => {
                prop_assert!(*until_ms > T0);
                prop_assert!(parked >= PARK_PER_VISIT);
            }
            (RobotsVerdict::Allow(d), Step::Lease { crawl_delay_ms, clamped }) => {
                let cd = d.map_or(0, |d| d.as_millis() as u64);
                prop_assert_eq!(*crawl_delay_ms, cd.min(cap));
                prop_assert_eq!(*clamped, cd > cap && host_cd != cap);
                prop_assert!(!(skip && cd > cap));
            }
            (RobotsVerdict::Allow(d), Step::Drop { reason: DropReason::CrawlDelayTooLong, .. }) => {
                prop_assert!(skip);
                prop_assert!(d.map_or(0, |d| d.as_millis() as u64) > cap);
            }
            _ => prop_assert!(false, "verdict {:?} gave {:?}", v, step),
        }
    }

    /// The gap follows the response time within [min_delay, max_delay] and never goes
    /// below the host's crawl-delay.
    #[test]
    fn gap_stays_within_its_bounds(
        min in 0u64..5_000,
        span in 0u64..60_000,
        factor in 0.0f64..10.0,
        response in 0u32..100_000,
        crawl_delay in 0u32..100_000,
    ) {
        let c = FrontierConfig { min_delay_ms: min, max_delay_ms: min + span, delay_factor: factor, ..cfg() };
        let rec = HostRecord { last_response_ms: response, crawl_delay_ms: crawl_delay, ..HostRecord::default() };
        let gap = gap_ms(&c, &rec);
        prop_assert!(gap >= u64::from(crawl_delay));
        prop_assert!(gap >= min);
        prop_assert!(gap <= (min + span).max(u64::from(crawl_delay)));
        let slower = HostRecord { last_response_ms: response + 1_000, ..rec };
        prop_assert!(gap_ms(&c, &slower) >= gap);
    }

    /// Back-off doubles per level up to the cap, and jitter only ever lengthens it by
    /// less than the jitter fraction.
    #[test]
    fn backoff_grows_and_stays_capped(base in 1u64..10_000, max in 1u64..600_000, level in 1u64..40, jitter in 0.0f64..0.25) {
        let a = backoff_step_ms(base, max, level, 0.0);
        let b = backoff_step_ms(base, max, level + 1, 0.0);
        prop_assert!(b >= a);
        prop_assert!(a <= max);
        let j = backoff_step_ms(base, max, level, jitter);
        prop_assert!(j >= a);
        prop_assert!(j as f64 <= a as f64 * 1.25 + 1.0);
    }
}

#[test]
fn gap_after_robots_crawl_delay_is_the_crawl_delay() {
    // min 1 s, response 10 ms: the crawl-delay of 7 s is the gap
    let rec = HostRecord {
        last_response_ms: 10,
        crawl_delay_ms: 7_000,
        ..HostRecord::default()
    };
    assert_eq!(gap_ms(&cfg(), &rec), 7_000);
    let rec = HostRecord {
        last_response_ms: 10,
        ..HostRecord::default()
    };
    assert_eq!(gap_ms(&cfg(), &rec), 1_000);
    // a slow host: 5 x 2 s = 10 s, below max 30 s
    let rec = HostRecord {
        last_response_ms: 2_000,
        ..HostRecord::default()
    };
    assert_eq!(gap_ms(&cfg(), &rec), 10_000);
    let rec = HostRecord {
        last_response_ms: 60_000,
        ..HostRecord::default()
    };
    assert_eq!(gap_ms(&cfg(), &rec), 30_000);
}

// ------------------------------------------------------------------ failures

#[test]
fn failure_scope_table() {
    use FailureScope::{Host, Url};
    let s = |status: u16| PageOutcome::from_status(status, None, 5);
    let net = |k: NetworkFailure| PageOutcome::from_network(k, "x");
    #[rustfmt::skip]
    let cases: Vec<(PageOutcome, usize, Option<FailureScope>)> = vec![
        (PageOutcome::Done { response_ms: 3 }, 0, None),
        (s(200), 0, None),
        (s(404), 0, None),
        (s(429), 0, Some(Host)),
        (s(503), 0, Some(Host)),
        (s(500), 0, Some(Url)),
        (net(NetworkFailure::Connect), 0, Some(Host)),
        (net(NetworkFailure::Dns), 0, Some(Host)),
        (net(NetworkFailure::Tls), 0, Some(Host)),
        (net(NetworkFailure::Reset), 0, Some(Host)),
        (net(NetworkFailure::Malformed), 0, Some(Url)),
        (net(NetworkFailure::Other), 0, Some(Url)),
        (PageOutcome::from_status(502, Some(Duration::from_secs(1)), 5), 0, Some(Host)),
        // one page that stalls fails alone; stalls on several URLs are the host's
        (net(NetworkFailure::Timeout), 1, Some(Url)),
        (net(NetworkFailure::Timeout), 2, Some(Host)),
    ];
    for (i, (o, timeouts, want)) in cases.into_iter().enumerate() {
        assert_eq!(o.scope(timeouts), want, "case {i}: {o:?}");
    }
}

// ------------------------------------------------------------------ ready heap

#[test]
fn a_host_is_ready_only_with_work_and_a_free_slot() {
    let mut h = host(3);
    h.rec.next_allowed_ms = T0 + 10;
    h.rec.backoff_until_ms = T0 + 30;
    h.set_hold_until(T0 + 20);
    assert_eq!(
        ready_at(&h, 1, false),
        Some(T0 + 30),
        "the latest of gap, back-off, hold"
    );
    assert_eq!(ready_at(&h, 1, true), None, "paused");
    h.rec.in_flight = 1;
    assert_eq!(ready_at(&h, 1, false), None, "every slot taken");
    assert_eq!(ready_at(&h, 2, false), Some(T0 + 30), "a second slot");
    h.rec.in_flight = 0;
    h.set_robots_pending(Some("http://a.test"));
    assert_eq!(ready_at(&h, 1, false), None, "robots.txt in flight");
    h.set_robots_pending(None);
    h.rec.counters.queued = 0;
    assert_eq!(ready_at(&h, 1, false), None, "nothing queued");
}

#[test]
fn schedule_pushes_a_host_once_per_instant() {
    let mut heap = ReadyHeap::new();
    let mut h = host(1);
    h.rec.next_allowed_ms = T0;
    schedule(&mut h, 7, &mut heap, 1, false, 0);
    schedule(&mut h, 7, &mut heap, 1, false, 0);
    assert_eq!(heap.len(), 1);
    h.rec.next_allowed_ms = T0 + 5;
    schedule(&mut h, 7, &mut heap, 1, false, 0);
    assert_eq!(
        heap.len(),
        2,
        "a new instant is pushed; the stale one is skipped when popped"
    );
    assert_eq!(h.scheduled.get(), Some(T0 + 5));
    assert_eq!(heap.peek(), Some(&Reverse((T0, 7))));
    schedule(&mut h, 7, &mut heap, 1, true, 0);
    assert_eq!(h.scheduled.get(), None, "a paused host is not scheduled");
}

#[test]
fn a_client_block_puts_the_host_after_it() {
    let mut heap = ReadyHeap::new();
    let mut h = host(1);
    h.rec.next_allowed_ms = T0;
    schedule(&mut h, 7, &mut heap, 1, false, T0 + 60_000);
    assert_eq!(h.scheduled.get(), Some(T0 + 60_000));
    assert_eq!(heap.peek(), Some(&Reverse((T0 + 60_000, 7))));
}

// ------------------------------------------------------------------ set aside

#[test]
fn parked_urls_come_back_to_the_front_when_the_origin_is_free() {
    let mut h = host(10);
    assert!(h.park("http://a.test", 4, T0 + 100));
    assert!(
        !h.park("http://a.test", 2, T0 + 50),
        "second URL of the same origin"
    );
    assert!(h.park("http://a.test:8080", 3, T0 + 70));
    assert_eq!(h.set_aside_wake(), Some(T0 + 50), "the earliest look");
    assert!(h.parked_due(T0 + 10).is_empty());
    let mut due = h.parked_due(T0 + 80);
    due.sort();
    assert_eq!(due.len(), 2);
    // still held: looked at again later, never in the past
    assert_eq!(h.recheck_parked("http://a.test", Some(T0 + 20), T0 + 80), 0);
    assert_eq!(h.parked_due(T0 + 80).len(), 1);
    assert_eq!(h.set_aside_wake(), Some(T0 + 70));
    // free: back to the front, in sequence order
    h.aside_mut().front.push(9);
    assert_eq!(h.recheck_parked("http://a.test", None, T0 + 100), 2);
    assert_eq!(h.aside().front, vec![2, 4, 9]);
    assert_eq!(
        h.recheck_parked("http://a.test", None, T0 + 100),
        0,
        "already released"
    );
}

#[test]
fn keep_entry_asks_for_one_retry_entry_per_url() {
    let mut h = host(2);
    assert!(h.keep_entry(1));
    assert!(!h.keep_entry(1));
    assert!(h.forget_retry(1));
    assert!(!h.forget_retry(1));
}

#[test]
fn a_url_retried_alone_waits_for_its_back_off_and_the_urls_queued_before_it() {
    let mut h = host(6);
    // failed when the queue's tail was 4: it goes after sequences 0..4
    h.aside_mut().delayed.push(Delayed {
        seq: 0,
        due_ms: T0 + 100,
        behind: 4,
        expired: false,
    });
    h.rec.head_seq = 1;
    assert_eq!(h.due_retry(T0 + 50), None, "back-off not over");
    assert_eq!(
        h.due_retry(T0 + 100),
        None,
        "URLs queued before it still waiting"
    );
    h.rec.head_seq = 4;
    assert_eq!(h.due_retry(T0 + 100), Some(0));
    // an exhausted queue lets it go at once after its back-off
    let mut h = host(1);
    h.rec.head_seq = 1;
    h.aside_mut().delayed.push(Delayed {
        seq: 0,
        due_ms: T0,
        behind: 99,
        expired: false,
    });
    assert!(h.head_exhausted());
    assert_eq!(h.due_retry(T0), Some(0));
    // of two due retries the earlier due goes first
    let mut h = host(5);
    h.rec.head_seq = 5;
    h.aside_mut().delayed.push(Delayed {
        seq: 3,
        due_ms: T0 + 20,
        behind: 0,
        expired: false,
    });
    h.aside_mut().delayed.push(Delayed {
        seq: 1,
        due_ms: T0 + 10,
        behind: 0,
        expired: false,
    });
    assert_eq!(h.aside().delayed[h.due_retry(T0 + 30).unwrap()].seq, 1);
}

#[test]
fn dead_segments_are_those_below_every_live_sequence() {
    let mut h = host(0);
    let seg = |first| SegRef {
        first,
        len: 4,
        fold: first as u32,
    };
    h.segs.extend([seg(0), seg(4), seg(8)]);
    h.rec.head_seq = 9;
    h.push_lease(5);
    assert_eq!(
        h.drop_dead_segments(),
        vec![seg(0)],
        "a lease keeps its segment"
    );
    assert_eq!(h.take_lease(0), Some(5));
    assert_eq!(h.drop_dead_segments(), vec![seg(4)]);
    assert_eq!(h.segs.len(), 1);
}
