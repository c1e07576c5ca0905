use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use frontier::*;

/// A frontier on the in-memory store: for the rules that need no restart (the tests that
/// reopen keep sled, for what must survive).
fn open_mem(c: FrontierConfig) -> Frontier {
    Frontier::open_store(c, Arc::new(MemStore::new()), RobotsEngine::default()).unwrap()
}

/// The drops among the frontier's events (the other events are dropped here).
fn take_drops(f: &Frontier) -> Vec<DropRecord> {
    f.drain_events()
        .into_iter()
        .filter_map(|e| match e {
            FrontierEvent::Dropped(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn cfg(dir: &std::path::Path) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir);
    c.seed = Some(7);
    c
}

fn allow_all() -> RobotsFetchOutcome {
    RobotsFetchOutcome::ClientError { status: 404 }
}

fn robots(body: &str) -> RobotsFetchOutcome {
    RobotsFetchOutcome::Success {
        status: 200,
        body: body.as_bytes().to_vec(),
        max_age: None,
    }
}

fn page(item: Option<WorkItem>) -> PageLease {
    match item {
        Some(WorkItem::Page(p)) => p,
        other => panic!("expected a page, got {other:?}"),
    }
}

fn robots_item(item: Option<WorkItem>) -> RobotsLease {
    match item {
        Some(WorkItem::Robots(r)) => r,
        other => panic!("expected a robots fetch, got {other:?}"),
    }
}

const T0: u64 = 1_700_000_000_000;

#[test]
fn enqueue_dedup_reject_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = Frontier::open(cfg(dir.path())).unwrap();
        let r = f
            .enqueue_batch(
                &[
                    "http://Example.com/a",
                    "http://example.com:80/a#x",
                    "ftp://example.com/",
                    "http://example.com/b",
                ],
                T0,
            )
            .unwrap();
        assert_eq!(r[0], EnqueueResult::Queued);
        assert_eq!(r[1], EnqueueResult::Duplicate);
        assert!(matches!(
            r[2],
            EnqueueResult::Rejected(Rejection::UnsupportedScheme(_))
        ));
        assert_eq!(r[3], EnqueueResult::Queued);
    }
    let f = Frontier::open(cfg(dir.path())).unwrap();
    assert!(f.is_seen("HTTP://EXAMPLE.COM/a").unwrap());
    let r = f.enqueue_batch(&["http://example.com/a"], T0).unwrap();
    assert_eq!(r[0], EnqueueResult::Duplicate);
    assert_eq!(
        f.queued_urls("example.com").unwrap(),
        vec!["http://example.com/a", "http://example.com/b"]
    );
    let rec = f.host_record("example.com").unwrap().unwrap();
    assert_eq!(rec.counters.queued, 2);
    assert_eq!(f.hosts_in_memory(), 1);
}

#[test]
fn robots_first_then_rules_drop_and_allow() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.enqueue_batch(&["http://a.com/private/1", "http://a.com/public/2"], T0)
        .unwrap();
    let r = robots_item(f.next(T0).unwrap());
    assert_eq!(r.url, "http://a.com/robots.txt");
    // robots fetch in flight: the host holds
    assert_eq!(f.next(T0 + 100_000).unwrap(), None);
    f.complete_robots(
        &r,
        &robots("User-agent: *\nDisallow: /private\n"),
        50,
        T0 + 10,
    )
    .unwrap();
    // gap after the robots fetch: 1 s min delay
    assert_eq!(f.next(T0 + 20).unwrap(), None);
    let p = page(f.next(T0 + 1_010).unwrap());
    assert_eq!(p.url, "http://a.com/public/2");
    let d = f.drop_record("http://a.com/private/1").unwrap().unwrap();
    assert_eq!(d.reason, DropReason::RobotsDisallowed);
    assert!(d.detail.contains("/private"), "{}", d.detail);
    f.complete(p.id, PageOutcome::Done { response_ms: 10 }, T0 + 1_100)
        .unwrap();
    let rec = f.host_record("a.com").unwrap().unwrap();
    assert_eq!(rec.counters.dropped, 1);
    assert_eq!(rec.counters.completed, 1);
    assert_eq!(rec.counters.robots_fetches, 1);
    assert_eq!(rec.in_flight, 0);
    assert_eq!(f.hosts_in_memory(), 0, "idle host leaves memory");
    assert!(f.robots_record("http://a.com").unwrap().is_some());
}

/// A host whose long queue robots.txt disallows (a sitemap's 45,000 entries) is emptied a
/// bounded slice per dispatch call: each call writes its drops in one store batch and
/// reports them as events, so one call must not hold them all. The allowed URL behind them
/// is still reached, call after call, with no stall.
#[test]
fn a_disallowed_queue_is_dropped_a_bounded_slice_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    let disallowed: Vec<String> = (0..3_500)
        .map(|i| format!("http://d.com/private/{i}"))
        .collect();
    f.enqueue_batch(&disallowed, T0).unwrap();
    f.enqueue_batch(&["http://d.com/ok"], T0).unwrap();
    let r = robots_item(f.next(T0).unwrap());
    f.complete_robots(&r, &robots("User-agent: *\nDisallow: /private\n"), 5, T0)
        .unwrap();
    let now = T0 + 60_000;
    let mut calls = 0;
    let mut dropped = 0;
    let found = loop {
        calls += 1;
        assert!(calls < 100, "the allowed URL was never reached");
        let items = f.next_batch(now, 8).unwrap();
        let drops = take_drops(&f);
        assert!(drops.len() <= 1_000, "one call dropped {}", drops.len());
        f.drops_logged(&drops).unwrap();
        dropped += drops.len();
        if let Some(item) = items.into_iter().next() {
            break page(Some(item));
        }
    };
    assert_eq!(found.url, "http://d.com/ok");
    assert_eq!(dropped, 3_500);
    assert!(calls >= 4, "{calls} calls");
    assert_eq!(f.stats().dropped, 3_500);
}

#[test]
fn server_error_robots_holds_without_dropping() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path())).unwrap();
    f.enqueue_batch(&["http://h.com/1", "http://h.com/2"], T0)
        .unwrap();
    let r = robots_item(f.next(T0).unwrap());
    let err = RobotsFetchOutcome::ServerError {
        status: 503,
        retry_after: None,
    };
    f.complete_robots(&r, &err, 5, T0).unwrap();
    // held: no page, no drop, still queued
    for dt in [2_000, 30_000, 59_000] {
        assert_eq!(f.next(T0 + dt).unwrap(), None);
    }
    assert_eq!(f.queued_urls("h.com").unwrap().len(), 2);
    // retry due after ~1 min (+ up to 20 % jitter), after the hold recheck
    let mut t = T0 + 60_000;
    let r2 = loop {
        if let Some(item) = f.next(t).unwrap() {
            break robots_item(Some(item));
        }
        t += 10_000;
        assert!(t < T0 + 200_000);
    };
    f.complete_robots(&r2, &allow_all(), 5, t).unwrap();
    let p = page(f.next(t + 1_000).unwrap());
    assert_eq!(p.url, "http://h.com/1");
    // survives a restart: the stored robots state is the allow-all one
    drop(f);
    let f = Frontier::open(cfg(dir.path())).unwrap();
    let p = page(f.next(t + 2_000).unwrap());
    assert_eq!(
        p.url, "http://h.com/1",
        "in-flight lease returned to the head"
    );
}

#[test]
fn politeness_gap_and_response_time() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.set_robots(&[("http://g.com", allow_all())], T0).unwrap();
    f.enqueue_batch(&["http://g.com/1", "http://g.com/2", "http://g.com/3"], T0)
        .unwrap();
    let p1 = page(f.next(T0).unwrap());
    assert_eq!(p1.politeness_wait_ms, 0, "an idle host goes at once");
    // concurrency 1: nothing while p1 is in flight
    assert_eq!(f.next(T0 + 60_000).unwrap(), None);
    // slow response: gap = 5 x 2 s = 10 s
    f.complete(p1.id, PageOutcome::Done { response_ms: 2_000 }, T0 + 2_000)
        .unwrap();
    assert_eq!(f.next(T0 + 11_999).unwrap(), None);
    let p2 = page(f.next(T0 + 12_000).unwrap());
    assert_eq!(p2.url, "http://g.com/2");
    // it waited the whole gap after p1's slot was freed
    assert_eq!(p2.politeness_wait_ms, 10_000);
    // very slow response: capped at max delay 30 s
    f.complete(
        p2.id,
        PageOutcome::Done {
            response_ms: 60_000,
        },
        T0 + 20_000,
    )
    .unwrap();
    assert_eq!(f.next(T0 + 49_999).unwrap(), None);
    // asked late: time after the host became ready is not politeness
    let p3 = page(f.next(T0 + 70_000).unwrap());
    assert_eq!(p3.url, "http://g.com/3");
    assert_eq!(p3.politeness_wait_ms, 30_000);
    assert_eq!(f.next_ready_at(), None);
}

fn found(url: &str, depth: u32, via: &str, hops: &str) -> EnqueueItem {
    EnqueueItem {
        url: url.into(),
        depth,
        via: Some(via.into()),
        hops: hops.into(),
        ..EnqueueItem::default()
    }
}

/// Depth, via, hop path and kind (page or sitemap) are stored with the queued URL: a
/// reopen and a retry keep them.
#[test]
fn discovery_survives_reopen_and_retry() {
    let sitemap = frontier::EntryKind::Sitemap(frontier::SitemapSource::IndexChild);
    let dir = tempfile::tempdir().unwrap();
    {
        let f = Frontier::open(cfg(dir.path())).unwrap();
        f.set_robots(&[("http://d.com", allow_all())], T0).unwrap();
        let r = f
            .enqueue_items(
                &[
                    EnqueueItem::seed("http://d.com/seed"),
                    EnqueueItem {
                        kind: sitemap,
                        ..found("http://d.com/deep", 3, "http://d.com/mid", "LLR")
                    },
                ],
                T0,
            )
            .unwrap();
        assert_eq!(r, vec![EnqueueResult::Queued, EnqueueResult::Queued]);
    }
    let f = Frontier::open(cfg(dir.path())).unwrap();
    let seed = page(f.next(T0).unwrap());
    assert_eq!(
        (
            seed.url.as_str(),
            seed.depth,
            seed.via.as_deref(),
            seed.hops.as_str()
        ),
        ("http://d.com/seed", 0, None, "")
    );
    assert_eq!(seed.kind, frontier::EntryKind::Page);
    f.complete(seed.id, PageOutcome::Done { response_ms: 0 }, T0)
        .unwrap();
    let deep = page(f.next(T0 + 60_000).unwrap());
    assert_eq!(
        (
            deep.url.as_str(),
            deep.depth,
            deep.via.as_deref(),
            deep.hops.as_str()
        ),
        ("http://d.com/deep", 3, Some("http://d.com/mid"), "LLR")
    );
    assert_eq!(deep.kind, sitemap);
    // a retried URL keeps where it came from
    f.complete(
        deep.id,
        PageOutcome::Failed {
            reason: "reset".into(),
        },
        T0 + 60_000,
    )
    .unwrap();
    drop(f);
    let f = Frontier::open(cfg(dir.path())).unwrap();
    let again = page(f.next(T0 + 10_000_000).unwrap());
    assert_eq!(
        (
            again.url.as_str(),
            again.depth,
            again.attempt,
            again.via.as_deref(),
            again.hops.as_str()
        ),
        ("http://d.com/deep", 3, 2, Some("http://d.com/mid"), "LLR")
    );
    assert_eq!(again.kind, sitemap);
}

/// A URL dropped by robots.txt is reported with where it came from.
#[test]
fn drop_records_keep_the_discovery_path() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.set_robots(
        &[("http://x.com", robots("User-agent: *\nDisallow: /no\n"))],
        T0,
    )
    .unwrap();
    f.enqueue_items(&[found("http://x.com/no", 2, "http://x.com/p", "LR")], T0)
        .unwrap();
    assert_eq!(f.next(T0).unwrap(), None);
    let drops = take_drops(&f);
    assert_eq!(drops.len(), 1, "{drops:?}");
    let d = &drops[0];
    assert_eq!(
        (d.url.as_str(), d.depth, d.via.as_deref(), d.hops.as_str()),
        ("http://x.com/no", 2, Some("http://x.com/p"), "LR")
    );
    assert_eq!(f.drop_record("http://x.com/no").unwrap().as_ref(), Some(d));
}

#[test]
fn crawl_delay_clamped_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.set_robots(
        &[("http://c.com", robots("User-agent: *\nCrawl-delay: 5000\n"))],
        T0,
    )
    .unwrap();
    f.enqueue_batch(&["http://c.com/1", "http://c.com/2"], T0)
        .unwrap();
    let p = page(f.next(T0).unwrap());
    f.complete(p.id, PageOutcome::Done { response_ms: 1 }, T0)
        .unwrap();
    let rec = f.host_record("c.com").unwrap().unwrap();
    assert_eq!(rec.crawl_delay_ms, 60_000, "clamped to the cap");
    assert_eq!(rec.counters.crawl_delay_clamped, 1);
    assert_eq!(f.next(T0 + 59_999).unwrap(), None);
    assert!(f.next(T0 + 60_000).unwrap().is_some());

    let dir2 = tempfile::tempdir().unwrap();
    let mut c = cfg(dir2.path());
    c.crawl_delay_over_cap = CrawlDelayOverCap::Skip;
    let f = open_mem(c);
    f.set_robots(
        &[("http://c.com", robots("User-agent: *\nCrawl-delay: 5000\n"))],
        T0,
    )
    .unwrap();
    f.enqueue_batch(&["http://c.com/1"], T0).unwrap();
    assert_eq!(f.next(T0).unwrap(), None);
    let d = f.drop_record("http://c.com/1").unwrap().unwrap();
    assert_eq!(d.reason, DropReason::CrawlDelayTooLong);
    assert_eq!(f.stats().crawl_delay_skipped, 1);
}

#[test]
fn crawl_delay_below_cap_is_a_minimum_gap() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.set_robots(
        &[("http://c.com", robots("User-agent: *\nCrawl-delay: 45\n"))],
        T0,
    )
    .unwrap();
    f.enqueue_batch(&["http://c.com/1", "http://c.com/2"], T0)
        .unwrap();
    let p = page(f.next(T0).unwrap());
    f.complete(p.id, PageOutcome::Done { response_ms: 1 }, T0)
        .unwrap();
    // above max delay (30 s) because crawl-delay asks for more
    assert_eq!(f.next(T0 + 44_999).unwrap(), None);
    assert!(f.next(T0 + 45_000).unwrap().is_some());
}

#[test]
fn throttling_retry_after_backoff_and_give_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_attempts = 3;
    let f = open_mem(c);
    f.set_robots(&[("http://t.com", allow_all())], T0).unwrap();
    // one URL: with others queued, a host-blamed URL goes behind them (fairness.rs)
    f.enqueue_batch(&["http://t.com/1"], T0).unwrap();
    // 429 with Retry-After 2 h: honoured
    let p = page(f.next(T0).unwrap());
    assert_eq!(p.attempt, 1);
    f.complete(
        p.id,
        PageOutcome::Throttled {
            status: 429,
            retry_after: Some(Duration::from_secs(7200)),
            response_ms: 1,
        },
        T0,
    )
    .unwrap();
    assert_eq!(f.next(T0 + 7_199_999).unwrap(), None);
    let p = page(f.next(T0 + 7_200_000).unwrap());
    assert_eq!(
        p.url, "http://t.com/1",
        "the host's only URL, retried after the back-off"
    );
    assert_eq!(p.attempt, 2);
    // 503 without Retry-After: exponential back-off, level 2 = 120 s (+ <25 % jitter)
    let t1 = T0 + 7_200_000;
    f.complete(
        p.id,
        PageOutcome::Throttled {
            status: 503,
            retry_after: None,
            response_ms: 1,
        },
        t1,
    )
    .unwrap();
    let rec = f.host_record("t.com").unwrap().unwrap();
    assert_eq!(rec.backoff_level, 2);
    assert!(rec.backoff_until_ms >= t1 + 120_000 && rec.backoff_until_ms < t1 + 150_000);
    let t2 = rec.backoff_until_ms;
    assert_eq!(f.next(t2 - 1).unwrap(), None);
    let p = page(f.next(t2).unwrap());
    assert_eq!(p.attempt, 3);
    // third failure: given up (max_attempts = 3)
    f.complete(
        p.id,
        PageOutcome::Unreachable {
            reason: "reset".into(),
        },
        t2,
    )
    .unwrap();
    let d = f.drop_record("http://t.com/1").unwrap().unwrap();
    assert_eq!(d.reason, DropReason::GaveUp);
    assert!(d.detail.contains("reset"));
    // Retry-After is capped at 24 h
    f.enqueue_batch(&["http://t.com/2"], t2).unwrap();
    let t3 = f.host_record("t.com").unwrap().unwrap().backoff_until_ms;
    let p = page(f.next(t3).unwrap());
    assert_eq!(p.url, "http://t.com/2");
    f.complete(
        p.id,
        PageOutcome::Throttled {
            status: 429,
            retry_after: Some(Duration::from_secs(10 * 86_400)),
            response_ms: 1,
        },
        t3,
    )
    .unwrap();
    let rec = f.host_record("t.com").unwrap().unwrap();
    assert_eq!(rec.backoff_until_ms, t3 + 86_400_000);
    // a day later the robots copy is stale: it is fetched again before the page
    let r = robots_item(f.next(t3 + 86_400_000).unwrap());
    f.complete_robots(&r, &allow_all(), 1, t3 + 86_400_000)
        .unwrap();
    // success resets the back-off level
    let p = page(f.next(t3 + 86_401_000).unwrap());
    f.complete(p.id, PageOutcome::Done { response_ms: 1 }, t3 + 86_401_000)
        .unwrap();
    assert_eq!(f.host_record("t.com").unwrap().unwrap().backoff_level, 0);
}

#[test]
fn leases_return_to_head_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.max_in_flight_per_host = 2;
    c = c.without_gaps();
    {
        let f = Frontier::open(c.clone()).unwrap();
        f.set_robots(&[("http://l.com", allow_all())], T0).unwrap();
        f.enqueue_batch(&["http://l.com/1", "http://l.com/2", "http://l.com/3"], T0)
            .unwrap();
        let a = page(f.next(T0).unwrap());
        let b = page(f.next(T0).unwrap());
        assert_eq!(
            (a.url.as_str(), b.url.as_str()),
            ("http://l.com/1", "http://l.com/2")
        );
        assert_eq!(f.next(T0).unwrap(), None, "concurrency limit 2");
        // dropped without completing: a crash
    }
    let f = Frontier::open(c).unwrap();
    assert_eq!(f.stats().recovered_leases, 2);
    assert_eq!(
        f.poll_event(),
        Some(FrontierEvent::LeasesReturned { count: 2 }),
        "the caller hears of the returned leases"
    );
    assert_eq!(f.host_record("l.com").unwrap().unwrap().in_flight, 0);
    let urls: Vec<String> = f
        .next_batch(T0, 10)
        .unwrap()
        .into_iter()
        .map(|w| match w {
            WorkItem::Page(p) => p.url,
            WorkItem::Robots(r) => r.url,
        })
        .collect();
    assert_eq!(urls, vec!["http://l.com/1", "http://l.com/2"]);
    let stale = LeaseId {
        host_id: 999,
        seq: 0,
    };
    assert!(matches!(
        f.complete(stale, PageOutcome::Done { response_ms: 1 }, T0),
        Err(FrontierError::UnknownLease(_))
    ));
}

#[test]
fn global_quota() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path()).without_gaps();
    c.global_rate_per_sec = NonZeroU32::new(2);
    let f = open_mem(c);
    let origins: Vec<String> = (0..5).map(|i| format!("http://q{i}.com")).collect();
    let outs: Vec<(&str, RobotsFetchOutcome)> =
        origins.iter().map(|o| (o.as_str(), allow_all())).collect();
    f.set_robots(&outs, T0).unwrap();
    let urls: Vec<String> = origins.iter().map(|o| format!("{o}/x")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    assert_eq!(f.next_batch(T0, 10).unwrap().len(), 2, "burst of 2");
    assert_eq!(f.next_batch(T0 + 100, 10).unwrap().len(), 0);
    assert_eq!(f.next_batch(T0 + 500, 10).unwrap().len(), 1);
    assert_eq!(f.next_batch(T0 + 1_500, 10).unwrap().len(), 2);
    assert!(f.stats().rate_limited >= 2);
}

#[test]
fn domain_mode_shares_one_queue() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.key_mode = PolitenessKeyMode::Domain;
    let f = open_mem(c);
    f.set_robots(
        &[
            ("http://a.ex.co.uk", allow_all()),
            ("http://b.ex.co.uk", allow_all()),
        ],
        T0,
    )
    .unwrap();
    f.enqueue_batch(&["http://a.ex.co.uk/1", "http://b.ex.co.uk/2"], T0)
        .unwrap();
    assert_eq!(f.queued_urls("ex.co.uk").unwrap().len(), 2);
    assert!(f.next(T0).unwrap().is_some());
    assert_eq!(f.next(T0).unwrap(), None, "one politeness key");
}

#[test]
fn concurrent_callers_never_share_a_host_gap() {
    let dir = tempfile::tempdir().unwrap();
    let f = Arc::new(open_mem(cfg(dir.path())));
    let hosts: Vec<String> = (0..20).map(|i| format!("http://c{i}.com")).collect();
    let outs: Vec<(&str, RobotsFetchOutcome)> =
        hosts.iter().map(|o| (o.as_str(), allow_all())).collect();
    f.set_robots(&outs, T0).unwrap();
    let urls: Vec<String> = hosts
        .iter()
        .flat_map(|h| (0..10).map(move |i| format!("{h}/{i}")))
        .collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let got = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let f = f.clone();
            let got = got.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    if let Some(WorkItem::Page(p)) = f.next(T0).unwrap() {
                        got.lock().push(p);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let got = got.lock();
    assert_eq!(got.len(), 20, "exactly one per host at one instant");
    let mut hosts_seen: Vec<u64> = got.iter().map(|p| p.id.host_id).collect();
    hosts_seen.sort_unstable();
    hosts_seen.dedup();
    assert_eq!(hosts_seen.len(), 20);
}

#[test]
fn group_commit_shares_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let f = Arc::new(Frontier::open(cfg(dir.path())).unwrap());
    let before = f.flushes();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || {
                for b in 0..20 {
                    let urls: Vec<String> = (0..10)
                        .map(|i| format!("http://g{t}.com/{b}/{i}"))
                        .collect();
                    let r = f.enqueue_batch(&urls, T0).unwrap();
                    assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let flushes = f.flushes() - before;
    assert!(flushes <= 160, "{flushes} flushes for 160 batches");
    assert_eq!(f.stats().enqueued, 1600);
}

#[test]
fn pause_holds_a_host_and_resume_releases_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path()).without_gaps()).unwrap();
    f.set_robots(&[("http://p.com", allow_all())], T0).unwrap();
    f.enqueue_batch(&["http://p.com/1", "http://p.com/2"], T0)
        .unwrap();
    assert!(f.pause("p.com").unwrap());
    assert!(!f.pause("p.com").unwrap(), "second pause is a no-op");
    assert!(f.is_paused("p.com"));
    assert_eq!(f.next(T0).unwrap(), None, "a paused host hands out nothing");
    // The pause survives a restart.
    drop(f);
    let f = Frontier::open(cfg(dir.path()).without_gaps()).unwrap();
    assert!(f.is_paused("p.com"), "pause persisted");
    assert_eq!(f.next(T0).unwrap(), None, "still paused after reopening");
    assert!(f.resume("p.com").unwrap());
    assert!(!f.is_paused("p.com"));
    drop(f);
    let f = Frontier::open(cfg(dir.path()).without_gaps()).unwrap();
    assert!(!f.is_paused("p.com"), "resume persisted");
    let p = page(f.next(T0).unwrap());
    assert_eq!(p.url, "http://p.com/1");
    let hosts = f.hosts(None, 10).unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].0, "p.com");
    assert_eq!(hosts[0].1.in_flight, 1);
}

#[test]
fn drops_are_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()).without_gaps());
    f.set_robots(
        &[("http://d.com", robots("User-agent: *\nDisallow: /no\n"))],
        T0,
    )
    .unwrap();
    f.enqueue_batch(&["http://d.com/no/1", "http://d.com/yes"], T0)
        .unwrap();
    let p = page(f.next(T0).unwrap());
    assert_eq!(p.url, "http://d.com/yes");
    let drops = take_drops(&f);
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].url, "http://d.com/no/1");
    assert_eq!(drops[0].reason, DropReason::RobotsDisallowed);
    assert!(take_drops(&f).is_empty());
}

#[test]
fn drops_not_acknowledged_are_reported_again_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = Frontier::open(cfg(dir.path()).without_gaps()).unwrap();
        f.set_robots(
            &[("http://d.com", robots("User-agent: *\nDisallow: /no\n"))],
            T0,
        )
        .unwrap();
        f.enqueue_batch(
            &["http://d.com/no/1", "http://d.com/no/2", "http://d.com/yes"],
            T0,
        )
        .unwrap();
        let _ = page(f.next(T0).unwrap());
        let drops = take_drops(&f);
        assert_eq!(drops.len(), 2);
        // the caller logged only the first before the "crash"
        f.drops_logged(&drops[..1]).unwrap();
    }
    let f = Frontier::open(cfg(dir.path()).without_gaps()).unwrap();
    let again = take_drops(&f);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].url, "http://d.com/no/2");
    assert_eq!(again[0].reason, DropReason::RobotsDisallowed);
    f.drops_logged(&again).unwrap();
    drop(f);
    let f = Frontier::open(cfg(dir.path()).without_gaps()).unwrap();
    assert!(take_drops(&f).is_empty());
}

/// Drops and robots transitions come out through one call, in the order they happened;
/// the frontier answers the origins' robots states typed (no caller decodes a record).
#[test]
fn events_and_origin_views() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.enqueue_batch(&["http://a.com/private/1", "http://a.com/public/2"], T0)
        .unwrap();
    assert_eq!(f.poll_event(), None, "queueing is no event");
    assert!(
        f.origins(T0).unwrap().is_empty(),
        "no record before robots.txt"
    );
    let r = robots_item(f.next(T0).unwrap());
    f.complete_robots(
        &r,
        &robots("User-agent: *\nDisallow: /private\nSitemap: http://a.com/map.xml\n"),
        50,
        T0 + 10,
    )
    .unwrap();
    assert_eq!(
        f.poll_event(),
        Some(FrontierEvent::RobotsTransition {
            origin: "http://a.com".into(),
            from: "unknown",
            to: "fresh",
        })
    );
    assert_eq!(f.poll_event(), None);
    let p = page(f.next(T0 + 1_010).unwrap());
    assert_eq!(p.url, "http://a.com/public/2");
    match f.poll_event() {
        Some(FrontierEvent::Dropped(d)) => {
            assert_eq!(d.url, "http://a.com/private/1");
            assert_eq!(d.reason, DropReason::RobotsDisallowed);
        }
        other => panic!("expected the drop, got {other:?}"),
    }
    assert!(f.drain_events().is_empty(), "each event is handed out once");

    let views = f.origins_of("a.com", T0 + 20).unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].origin, "http://a.com");
    assert_eq!(views[0].status.kind.as_str(), "fresh");
    assert_eq!(views[0].sitemaps, vec!["http://a.com/map.xml".to_string()]);
    assert!(f.origins_of("b.com", T0).unwrap().is_empty());
    assert!(
        f.origins_of("www.a.com", T0).unwrap().is_empty(),
        "a parent is not under its child"
    );
    f.set_robots(
        &[
            ("https://www.a.com", allow_all()),
            ("http://b.com:8080", robots("x")),
        ],
        T0,
    )
    .unwrap();
    let under: Vec<String> = f
        .origins_of("a.com", T0)
        .unwrap()
        .into_iter()
        .map(|o| o.origin)
        .collect();
    assert_eq!(
        under,
        vec!["http://a.com", "https://www.a.com"],
        "subdomains are under their domain"
    );
    // the census answers the same for many keys in one walk (the admin API's host list)
    let keys = [
        "a.com",
        "www.a.com",
        "b.com",
        "http://b.com:8080",
        "com",
        "d.com",
    ];
    let kinds = f.robots_kinds_under(&keys, T0).unwrap();
    assert_eq!(kinds.get("a.com").map(Vec::len), Some(2), "{kinds:?}");
    assert!(
        !kinds.contains_key("d.com"),
        "a key with no origin is left out"
    );
    for key in keys {
        let mut want: Vec<&str> = f
            .origins_of(key, T0)
            .unwrap()
            .iter()
            .map(|o| o.status.kind.as_str())
            .collect();
        let mut got: Vec<&str> = kinds
            .get(key)
            .map(|v| v.iter().map(|k| k.as_str()).collect())
            .unwrap_or_default();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want, "{key}");
    }
    // the hosts with an origin in a state, found from the census, are those a walk of every
    // host finds; and none is found that way once more origins are in it than allowed
    let fresh = robots_policy::state::RobotsStateKind::Fresh;
    let found: Vec<String> = f
        .hosts_with_origin_in(fresh, T0, 100)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let all: Vec<String> = f
        .hosts(None, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let all_refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let kinds = f.robots_kinds_under(&all_refs, T0).unwrap();
    let walked: Vec<String> = all
        .iter()
        .filter(|k| kinds.get(k.as_str()).is_some_and(|v| v.contains(&fresh)))
        .cloned()
        .collect();
    assert!(!walked.is_empty());
    assert_eq!(found, walked);
    assert!(f.hosts_with_origin_in(fresh, T0, 1).unwrap().is_none());
    let counts = f.robots_state_counts(T0 + 20).unwrap();
    assert_eq!(counts.get("fresh"), Some(&3));
    assert_eq!(counts.values().sum::<u64>(), 3);
    // counted in memory from now on: a new outcome moves the count ...
    f.set_robots(
        &[(
            "http://c.com",
            RobotsFetchOutcome::ServerError {
                status: 503,
                retry_after: None,
            },
        )],
        T0 + 30,
    )
    .unwrap();
    let counts = f.robots_state_counts(T0 + 40).unwrap();
    assert_eq!(counts.get("fresh"), Some(&3), "{counts:?}");
    assert_eq!(counts.get("5xx-disallow"), Some(&1), "{counts:?}");
    // ... and so does time alone (a copy expiring, a failure run reaching fallback),
    // agreeing with the states decoded one by one
    let later_ms = T0 + 400 * 86_400_000;
    let later = f.robots_state_counts(later_ms).unwrap();
    assert_eq!(later.get("fresh"), None, "{later:?}");
    let mut decoded = std::collections::BTreeMap::new();
    for o in f.origins(later_ms).unwrap() {
        *decoded.entry(o.status.kind.as_str()).or_insert(0u64) += 1;
    }
    assert_eq!(later, decoded);
    assert!(
        f.drain_events().is_empty(),
        "set_robots applies the caller's own outcomes: no events"
    );
}

/// A lease says when its host had nothing else queued (the fetcher then does not keep the
/// connection); a URL queued later makes the host's last one the new one.
#[test]
fn a_lease_says_whether_it_was_its_hosts_last_queued_url() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_mem(cfg(dir.path()));
    f.set_robots(&[("http://g.com", allow_all())], T0).unwrap();
    f.enqueue_batch(&["http://g.com/1", "http://g.com/2"], T0)
        .unwrap();
    let p1 = page(f.next(T0).unwrap());
    assert!(!p1.last_queued, "/2 is still queued");
    f.complete(p1.id, PageOutcome::Done { response_ms: 10 }, T0 + 10)
        .unwrap();
    let p2 = page(f.next(T0 + 60_000).unwrap());
    assert_eq!(p2.url, "http://g.com/2");
    assert!(p2.last_queued, "nothing else queued for g.com");
    // found while /2 is in flight: the next lease is the last one, not /2's
    f.enqueue_batch(&["http://g.com/3"], T0 + 60_001).unwrap();
    f.complete(p2.id, PageOutcome::Done { response_ms: 10 }, T0 + 60_010)
        .unwrap();
    let p3 = page(f.next(T0 + 120_000).unwrap());
    assert_eq!(p3.url, "http://g.com/3");
    assert!(p3.last_queued);
}
