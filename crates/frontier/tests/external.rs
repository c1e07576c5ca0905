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
    // at the deadline the unreported lease returns, with its attempts unchanged
    assert_eq!(f.expire_leases(T0 + 30_000).unwrap(), vec![lost.id]);
    let again = pages(f.lease_for(T0 + 30_000, 10, 30_000, &mut any_key).unwrap());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].url, lost.url);
    assert_eq!(again[0].attempt, lost.attempt);
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
