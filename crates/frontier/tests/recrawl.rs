//! Recrawl through the public API: fetched URLs come back when due (past the seen-set),
//! validators ride on the lease, 404/410 in a row make a URL gone, per-URL fields, and
//! the schedule survives a reopen.

use frontier::*;

const T0: u64 = 1_700_000_000_000;
const MIN: u64 = 60_000;

fn cfg(dir: &std::path::Path, interval: Option<u64>) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir);
    c.seed = Some(7);
    c.min_delay_ms = 0;
    c.max_delay_ms = 0;
    c.recrawl.default_interval_ms = interval;
    c.recrawl.min_interval_ms = MIN;
    c.recrawl.max_interval_ms = 64 * MIN;
    c
}

fn allow_all(f: &Frontier, origin: &str) {
    f.set_robots(
        &[(origin, RobotsFetchOutcome::ClientError { status: 404 })],
        T0,
    )
    .unwrap();
}

fn pages(f: &Frontier, now: u64) -> Vec<PageLease> {
    f.next_batch(now, 100)
        .unwrap()
        .into_iter()
        .map(|w| match w {
            WorkItem::Page(p) => p,
            other => panic!("expected a page, got {other:?}"),
        })
        .collect()
}

fn visit(status: u16, outcome: VisitOutcome, etag: Option<&str>, at: u64) -> Option<Visit> {
    Some(Visit {
        refetch_at_ms: None,
        status,
        outcome,
        validators: Validators {
            etag: etag.map(str::to_string),
            last_modified: None,
            payload_digest: Some("sha1:X".into()),
        },
        fetched_at_ms: at,
    })
}

/// The scheduled record of a URL (from the due index).
fn record(f: &Frontier, url: &str) -> RevisitRecord {
    let all = f.scheduled(usize::MAX).unwrap();
    let (due, _, rec) = all.into_iter().find(|(_, u, _)| u == url).unwrap();
    assert_eq!(due, rec.due_ms);
    rec
}

fn done(p: &PageLease) -> (LeaseId, PageOutcome) {
    (p.id, PageOutcome::Done { response_ms: 5 })
}

#[test]
fn one_pass_by_default_nothing_is_scheduled() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path(), None)).unwrap();
    allow_all(&f, "http://a.test");
    f.enqueue_batch(&["http://a.test/x"], T0).unwrap();
    let p = pages(&f, T0);
    f.complete_visits(
        &[done(&p[0])],
        &[visit(200, VisitOutcome::First, None, T0)],
        T0,
    )
    .unwrap();
    assert_eq!(f.due_count().unwrap(), 0);
    assert!(pages(&f, T0 + 1000 * MIN).is_empty());
}

#[test]
fn a_fetched_url_comes_back_when_due_with_its_validators_and_adapts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path(), Some(8 * MIN));
    c.recrawl.adaptive = true;
    let f = Frontier::open(c).unwrap();
    allow_all(&f, "http://a.test");
    f.enqueue_batch(&["http://a.test/x"], T0).unwrap();
    let p = pages(&f, T0);
    assert_eq!(p[0].revisit, None, "a first visit has no record");
    f.complete_visits(
        &[done(&p[0])],
        &[visit(200, VisitOutcome::First, Some("\"v1\""), T0)],
        T0,
    )
    .unwrap();
    assert_eq!(f.due_count().unwrap(), 1);
    // a new offer of the same URL is still a duplicate ...
    assert_eq!(
        f.enqueue_batch(&["http://a.test/x"], T0).unwrap(),
        [EnqueueResult::Duplicate]
    );
    // ... not due yet ...
    assert!(pages(&f, T0 + 8 * MIN - 1).is_empty());
    // ... and due at its time, with what the last answer said
    let p = pages(&f, T0 + 8 * MIN);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].url, "http://a.test/x");
    let rec = p[0].revisit.clone().unwrap();
    assert_eq!(rec.validators.etag.as_deref(), Some("\"v1\""));
    assert_eq!(rec.captured_ms, T0);
    assert_eq!(f.due_count().unwrap(), 0);
    // unchanged (304): the interval doubles, the capture date stays
    let t1 = T0 + 8 * MIN;
    f.complete_visits(
        &[done(&p[0])],
        &[visit(304, VisitOutcome::NotModified, None, t1)],
        t1,
    )
    .unwrap();
    let rec = record(&f, "http://a.test/x");
    assert_eq!((rec.interval_ms, rec.due_ms), (16 * MIN, t1 + 16 * MIN));
    assert_eq!(rec.captured_ms, T0);
    assert_eq!(rec.validators.etag.as_deref(), Some("\"v1\""));
    // changed: halved
    let t2 = t1 + 16 * MIN;
    let p = pages(&f, t2);
    f.complete_visits(
        &[done(&p[0])],
        &[visit(200, VisitOutcome::Changed, Some("\"v2\""), t2)],
        t2,
    )
    .unwrap();
    let rec = record(&f, "http://a.test/x");
    assert_eq!((rec.interval_ms, rec.captured_ms), (8 * MIN, t2));
    assert_eq!(f.stats().revisits_queued, 2);
}

#[test]
fn gone_after_three_404_in_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path(), Some(MIN))).unwrap();
    allow_all(&f, "http://a.test");
    f.enqueue_batch(&["http://a.test/gone"], T0).unwrap();
    let mut now = T0;
    for round in 1..=3 {
        let p = pages(&f, now);
        assert_eq!(p.len(), 1, "round {round}");
        f.complete_visits(
            &[done(&p[0])],
            &[visit(404, VisitOutcome::Changed, None, now)],
            now,
        )
        .unwrap();
        now += MIN;
    }
    assert_eq!(f.due_count().unwrap(), 0);
    assert!(pages(&f, now + 100 * MIN).is_empty());
    assert_eq!(f.stats().revisits_gone, 1);
}

#[test]
fn per_url_interval_and_refetch_at_and_the_schedule_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = Frontier::open(cfg(dir.path(), None)).unwrap();
        allow_all(&f, "http://a.test");
        let own = EnqueueItem {
            revisit_interval_ms: Some(5 * MIN),
            ..EnqueueItem::seed("http://a.test/own")
        };
        let later = EnqueueItem {
            refetch_at_ms: Some(T0 + 7 * MIN),
            ..EnqueueItem::seed("http://a.test/later")
        };
        let res = f.enqueue_items(&[own, later], T0).unwrap();
        assert_eq!(res, [EnqueueResult::Queued, EnqueueResult::Queued]);
        // only the first goes now: the other waits in the due index
        let p = pages(&f, T0);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].url, "http://a.test/own");
        f.complete_visits(
            &[done(&p[0])],
            &[visit(200, VisitOutcome::First, None, T0)],
            T0,
        )
        .unwrap();
        assert_eq!(f.due_count().unwrap(), 2);
    }
    // reopen: both are still scheduled
    let f = Frontier::open(cfg(dir.path(), None)).unwrap();
    assert_eq!(f.due_count().unwrap(), 2);
    let p = pages(&f, T0 + 5 * MIN);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].url, "http://a.test/own");
    let t1 = T0 + 5 * MIN;
    f.complete_visits(
        &[done(&p[0])],
        &[visit(200, VisitOutcome::Changed, None, t1)],
        t1,
    )
    .unwrap();
    let p = pages(&f, T0 + 7 * MIN);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].url, "http://a.test/later");
}

#[test]
fn a_bounded_number_of_due_urls_move_per_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path(), Some(MIN));
    c.recrawl.due_per_dispatch = 2;
    c.max_in_flight_per_host = 100;
    let f = Frontier::open(c).unwrap();
    allow_all(&f, "http://a.test");
    let urls: Vec<String> = (0..5).map(|i| format!("http://a.test/{i}")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let p = pages(&f, T0);
    assert_eq!(p.len(), 5);
    // five completion batches: five index keys
    for l in &p {
        f.complete_batch(&[done(l)], T0).unwrap();
    }
    assert_eq!(f.due_count().unwrap(), 5);
    let now = T0 + MIN;
    assert_eq!(pages(&f, now).len(), 2);
    assert_eq!(f.due_count().unwrap(), 3);
    assert_eq!(pages(&f, now).len(), 2);
    assert_eq!(pages(&f, now).len(), 1);
    assert_eq!(f.due_count().unwrap(), 0);
}

/// Scheduled URLs live on disk only, packed (one index key per completion batch and
/// second): once their hosts are idle, nothing of them is in memory, and a due scan loads
/// only the hosts of the URLs it moves.
#[test]
fn scheduled_urls_hold_no_host_in_memory_until_due() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path(), Some(MIN));
    c.recrawl.due_per_dispatch = 10;
    let f = Frontier::open(c).unwrap();
    let hosts = 200;
    let origins: Vec<String> = (0..hosts).map(|h| format!("http://h{h}.test")).collect();
    let robots: Vec<(&str, RobotsFetchOutcome)> = origins
        .iter()
        .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&robots, T0).unwrap();
    let urls: Vec<String> = (0..hosts * 5)
        .map(|i| format!("http://h{}.test/{}", i % hosts, i / hosts))
        .collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let mut now = T0;
    let mut fetched = 0;
    while fetched < urls.len() {
        let p = pages(&f, now);
        let done: Vec<_> = p.iter().map(done).collect();
        f.complete_batch(&done, now).unwrap();
        fetched += p.len();
        now += 1;
    }
    assert_eq!(f.due_count().unwrap(), urls.len() as u64);
    assert_eq!(
        f.hosts_in_memory(),
        0,
        "idle hosts left memory; the schedule is on disk"
    );
    // due: one dispatch moves whole index keys until 10 URLs (a key holds one completion
    // batch of at most 100 here), so at most 100 hosts come back
    let p = pages(&f, T0 + 2 * MIN);
    assert!(!p.is_empty() && p.len() <= 100, "{}", p.len());
    assert!(f.hosts_in_memory() <= 100, "{}", f.hosts_in_memory());
    assert_eq!(f.due_count().unwrap(), (urls.len() - p.len()) as u64);
}
