//! The frontier as a service for external fetchers: lease deadlines, clients' durable
//! delays and blocks, host filters and metadata (`src/external.rs`).

use frontier::*;

const T0: u64 = 1_700_000_000_000;

fn cfg(dir: &std::path::Path) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(7);
    c
}

fn allow_all() -> RobotsFetchOutcome {
    RobotsFetchOutcome::ClientError { status: 404 }
}

/// Open with the robots.txt of `origins` known (allow all).
fn open_allowing(dir: &std::path::Path, origins: &[&str]) -> Frontier {
    let f = Frontier::open(cfg(dir)).unwrap();
    let outcomes: Vec<(&str, RobotsFetchOutcome)> =
        origins.iter().map(|o| (*o, allow_all())).collect();
    f.set_robots(&outcomes, T0).unwrap();
    f
}

fn pages(items: Vec<WorkItem>) -> Vec<PageLease> {
    items
        .into_iter()
        .map(|i| match i {
            WorkItem::Page(p) => p,
            other => panic!("expected a page, got {other:?}"),
        })
        .collect()
}

fn any_key(_: &str) -> bool {
    true
}

#[test]
fn an_expired_lease_is_served_again_and_a_completed_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_allowing(dir.path(), &["http://a.test", "http://b.test"]);
    f.enqueue_batch(&["http://a.test/1", "http://b.test/1"], T0)
        .unwrap();
    let got = pages(f.lease_for(T0, 10, 30_000, &mut any_key).unwrap());
    assert_eq!(got.len(), 2, "{got:?}");
    let (done, lost) = (&got[0], &got[1]);
    assert_eq!(f.lease_deadline(done.id), Some(T0 + 30_000));
    f.complete(done.id, PageOutcome::Done { response_ms: 5 }, T0 + 10)
        .unwrap();
    assert_eq!(f.lease_deadline(done.id), None, "completed: no deadline");
    // before the deadline nothing is served again
    assert!(f.expire_leases(T0 + 29_999).unwrap().is_empty());
    assert!(f
        .lease_for(T0 + 29_999, 10, 30_000, &mut any_key)
        .unwrap()
        .is_empty());
    // at the deadline the unreported lease returns, one attempt counted
    assert_eq!(f.expire_leases(T0 + 30_000).unwrap(), vec![lost.id]);
    let again = pages(f.lease_for(T0 + 30_000, 10, 30_000, &mut any_key).unwrap());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].url, lost.url);
    assert_eq!(again[0].attempt, lost.attempt + 1);
    // the completed lease cannot be completed twice, the renewed one can
    assert!(f
        .complete(done.id, PageOutcome::Done { response_ms: 5 }, T0 + 30_001)
        .is_err());
    f.complete(
        again[0].id,
        PageOutcome::Done { response_ms: 5 },
        T0 + 30_001,
    )
    .unwrap();
    assert!(f.expire_leases(T0 + 99_000).unwrap().is_empty());
}

#[test]
fn the_accept_filter_limits_hosts_and_keeps_the_others_turn() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_allowing(dir.path(), &["http://a.test", "http://b.test"]);
    f.enqueue_batch(&["http://a.test/1", "http://b.test/1"], T0)
        .unwrap();
    let only_b = pages(
        f.lease_for(T0, 10, 30_000, &mut |k: &str| k == "b.test")
            .unwrap(),
    );
    assert_eq!(only_b.len(), 1);
    assert_eq!(only_b[0].url, "http://b.test/1");
    let rest = pages(f.lease_for(T0, 10, 30_000, &mut any_key).unwrap());
    assert_eq!(rest.len(), 1, "a.test kept its turn");
    assert_eq!(rest[0].url, "http://a.test/1");
}

#[test]
fn client_delay_and_block_hold_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = open_allowing(dir.path(), &["http://a.test", "http://b.test"]);
        f.set_queue_delay("a.test", 10_000).unwrap();
        f.block_queue_until("b.test", T0 + 60_000).unwrap();
    }
    let f = Frontier::open(cfg(dir.path())).unwrap();
    assert_eq!(f.queue_control("a.test").delay_ms, 10_000);
    assert_eq!(f.queue_control("b.test").blocked_until_ms, T0 + 60_000);
    f.enqueue_batch(
        &["http://a.test/1", "http://a.test/2", "http://b.test/1"],
        T0,
    )
    .unwrap();
    let first = pages(f.lease_for(T0, 10, 300_000, &mut any_key).unwrap());
    assert_eq!(first.len(), 1, "a.test once, b.test blocked: {first:?}");
    assert_eq!(first[0].url, "http://a.test/1");
    f.complete(first[0].id, PageOutcome::Done { response_ms: 1 }, T0)
        .unwrap();
    // the client's gap holds a.test's second URL for 10 s
    assert!(f
        .lease_for(T0 + 9_999, 10, 300_000, &mut any_key)
        .unwrap()
        .is_empty());
    let second = pages(f.lease_for(T0 + 10_000, 10, 300_000, &mut any_key).unwrap());
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].url, "http://a.test/2");
    // lifting the block (0) serves b.test at once
    f.block_queue_until("b.test", 0).unwrap();
    let b = pages(f.lease_for(T0 + 10_001, 10, 300_000, &mut any_key).unwrap());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].url, "http://b.test/1");
    assert_eq!(f.queue_control("b.test"), QueueControl::default());
}

#[test]
fn the_default_delay_applies_to_queues_without_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_allowing(dir.path(), &["http://a.test"]);
    f.set_queue_delay("", 5_000).unwrap();
    assert_eq!(f.client_delay("a.test"), 5_000);
    f.set_queue_delay("a.test", 8_000).unwrap();
    assert_eq!(f.client_delay("a.test"), 8_000);
    assert_eq!(f.client_delay("other.test"), 5_000);
}

#[test]
fn metadata_is_kept_per_canonical_url_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = Frontier::open(cfg(dir.path())).unwrap();
        f.put_metadata(&[("http://A.test:80/x", b"meta-bytes".as_slice())], true)
            .unwrap();
    }
    let f = Frontier::open(cfg(dir.path())).unwrap();
    assert_eq!(
        f.metadata("http://a.test/x").unwrap().as_deref(),
        Some(b"meta-bytes".as_slice())
    );
    assert_eq!(f.metadata("http://a.test/y").unwrap(), None);
}

/// Issue 33: a fetcher that never reports one URL (its lease expires again and again)
/// while it completes the others. With the default politeness gaps, the host must keep
/// being served: every expiry hands the URL out again, and the other URLs flow.
#[test]
fn a_url_whose_lease_keeps_expiring_never_stalls_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = FrontierConfig::new(dir.path());
    c.seed = Some(7);
    let f = Frontier::open(c).unwrap();
    f.set_robots(&[("http://a.test", allow_all())], T0).unwrap();
    let urls: Vec<String> = (0..7).map(|i| format!("http://a.test/{i}")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let mut now = T0;
    let mut served_lost = 0;
    let mut completed = 0;
    let mut last_serve = T0;
    while now < T0 + 120_000 {
        f.expire_leases(now).unwrap();
        for p in pages(f.lease_for(now, 10, 5_000, &mut any_key).unwrap()) {
            last_serve = now;
            if p.url == "http://a.test/0" {
                served_lost += 1;
            } else {
                f.complete(p.id, PageOutcome::Done { response_ms: 5 }, now + 50)
                    .unwrap();
                completed += 1;
            }
        }
        now += 100;
    }
    assert_eq!(
        completed, 6,
        "the other URLs of the host were not all served"
    );
    // each expiry is an attempt: served max_attempts times, then given up, logged
    assert_eq!(
        served_lost, 5,
        "the lost URL was served {served_lost} times"
    );
    let gave_up = f.drop_record("http://a.test/0").unwrap().unwrap();
    assert_eq!(gave_up.reason, DropReason::GaveUp);
    assert!(
        gave_up.detail.contains("lease expired"),
        "{}",
        gave_up.detail
    );
    assert_eq!(f.stats().given_up, 1);
    let _ = last_serve;
}

/// An expired URL goes behind the host's other queued URLs: they are served before it
/// comes again.
#[test]
fn an_expired_url_goes_behind_the_hosts_other_urls() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_allowing(dir.path(), &["http://a.test"]);
    f.enqueue_batch(
        &["http://a.test/1", "http://a.test/2", "http://a.test/3"],
        T0,
    )
    .unwrap();
    let one_host = |f: &Frontier, now| pages(f.lease_for(now, 1, 1_000, &mut any_key).unwrap());
    let first = one_host(&f, T0);
    assert_eq!(first[0].url, "http://a.test/1");
    assert_eq!(f.expire_leases(T0 + 1_000).unwrap(), vec![first[0].id]);
    let mut order = Vec::new();
    let mut now = T0 + 1_000;
    while order.len() < 3 {
        for p in one_host(&f, now) {
            f.complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                .unwrap();
            order.push(p.url);
        }
        now += 100;
        assert!(now < T0 + 60_000, "served {order:?}");
    }
    assert_eq!(
        order,
        ["http://a.test/2", "http://a.test/3", "http://a.test/1"]
    );
}

/// Issue 33, the stall: a host on a known address whose one URL a fetcher never reports.
/// Every expiry must give the address's in-flight slot back: with the default 4 slots per
/// address, the 4th expiry left the host unserved for good (in flight 0, nothing waiting).
#[test]
fn expiries_give_the_address_slot_back() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_allowing(dir.path(), &["http://a.test"]);
    f.enqueue_batch(&["http://a.test/lost"], T0).unwrap();
    let mut now = T0;
    let mut served = 0;
    while now < T0 + 60_000 {
        f.expire_leases(now).unwrap();
        for p in pages(f.lease_for(now, 10, 2_000, &mut any_key).unwrap()) {
            if served == 0 {
                f.note_address(p.id.host_id, "127.0.0.9".parse().unwrap(), now)
                    .unwrap();
            }
            served += 1;
        }
        now += 100;
    }
    assert_eq!(
        served, 5,
        "served {served} times: max_attempts, then given up"
    );
    // the host still serves: a new URL goes at once
    f.enqueue_batch(&["http://a.test/next"], now).unwrap();
    let next = pages(f.lease_for(now + 10_000, 10, 2_000, &mut any_key).unwrap());
    assert_eq!(next.len(), 1, "the host stalled");
}

/// A fetch slower than its lease: the report that comes after the expiry completes the URL
/// (no second fetch). If the URL was handed out again meanwhile, the report completes it
/// and the newer lease is over: its own report later is refused as unknown (the gRPC
/// service acknowledges and ignores it).
#[test]
fn a_late_report_completes_the_url_and_cancels_a_newer_lease() {
    let dir = tempfile::tempdir().unwrap();
    let f = open_allowing(dir.path(), &["http://a.test", "http://b.test"]);
    f.enqueue_batch(
        &[
            "http://a.test/slow",
            "http://b.test/slow",
            "http://b.test/next",
        ],
        T0,
    )
    .unwrap();
    let first = pages(f.lease_for(T0, 10, 1_000, &mut any_key).unwrap());
    assert_eq!(first.len(), 2);
    let (a, b) = (&first[0], &first[1]);
    assert_eq!(f.expire_leases(T0 + 1_000).unwrap().len(), 2);
    // a.test: not handed out again before its report
    f.complete(a.id, PageOutcome::Done { response_ms: 1_500 }, T0 + 1_500)
        .unwrap();
    assert_eq!(f.stats().late_reports, 1);
    // b.test: handed out again (behind /next, which goes first), then the old report
    let mut now = T0 + 1_000;
    let mut again = None;
    while again.is_none() {
        for p in pages(f.lease_for(now, 10, 60_000, &mut any_key).unwrap()) {
            match p.url.as_str() {
                "http://b.test/next" => f
                    .complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                    .unwrap(),
                "http://b.test/slow" => again = Some(p),
                other => panic!("{other} served again after its late report"),
            }
        }
        now += 100;
        assert!(now < T0 + 120_000, "b.test/slow never served again");
    }
    let again = again.unwrap();
    assert_eq!(again.id, b.id, "a lease is its URL's place: the same id");
    f.complete(b.id, PageOutcome::Done { response_ms: 1 }, now)
        .unwrap();
    assert!(f
        .complete(again.id, PageOutcome::Done { response_ms: 1 }, now + 1)
        .is_err());
    // nothing of the two hosts is out or queued any more
    for _ in 0..10 {
        now += 10_000;
        f.expire_leases(now).unwrap();
        assert!(pages(f.lease_for(now, 10, 60_000, &mut any_key).unwrap()).is_empty());
    }
    assert_eq!(f.stats().completed, 3);
}
