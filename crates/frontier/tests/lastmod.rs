//! A sitemap's `lastmod` moves a known URL's due time: a `lastmod` later than the last
//! fetch makes it due at the next dispatch, one not later leaves it alone, and the move
//! survives a reopen (one flush).

use frontier::*;

const T0: u64 = 1_700_000_000_000;
const MIN: u64 = 60_000;
const DAY: u64 = 1440 * MIN;

fn cfg(dir: &std::path::Path, locate: bool) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir);
    c.seed = Some(7);
    c.min_delay_ms = 0;
    c.max_delay_ms = 0;
    c.max_in_flight_per_host = 10;
    c.recrawl.default_interval_ms = Some(30 * DAY);
    c.recrawl.min_interval_ms = MIN;
    c.recrawl.max_interval_ms = 64 * DAY;
    c.recrawl.locate_for_lastmod = locate;
    c
}

fn allow_all(f: &Frontier, now: u64) {
    f.set_robots(
        &[(
            "http://a.test",
            RobotsFetchOutcome::ClientError { status: 404 },
        )],
        now,
    )
    .unwrap();
}

/// The pages handed out at `now` (robots.txt answered at `now`: it expires in a day).
fn urls(f: &Frontier, now: u64) -> Vec<String> {
    allow_all(f, now);
    let mut v: Vec<String> = f
        .next_batch(now, 100)
        .unwrap()
        .into_iter()
        .map(|w| match w {
            WorkItem::Page(p) => p.url,
            other => panic!("expected a page, got {other:?}"),
        })
        .collect();
    v.sort();
    v
}

/// Three pages fetched at T0 (one completion batch: one due key), scheduled 30 days on.
fn crawled(f: &Frontier) {
    allow_all(f, T0);
    f.enqueue_batch(
        &["http://a.test/a", "http://a.test/b", "http://a.test/c"],
        T0,
    )
    .unwrap();
    let leases: Vec<PageLease> = f
        .next_batch(T0, 100)
        .unwrap()
        .into_iter()
        .filter_map(|w| match w {
            WorkItem::Page(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(leases.len(), 3);
    let done: Vec<(LeaseId, PageOutcome)> = leases
        .iter()
        .map(|p| (p.id, PageOutcome::Done { response_ms: 5 }))
        .collect();
    let visits: Vec<Option<Visit>> = leases
        .iter()
        .map(|_| {
            Some(Visit {
                refetch_at_ms: None,
                status: 200,
                outcome: VisitOutcome::First,
                validators: Validators::default(),
                fetched_at_ms: T0,
            })
        })
        .collect();
    f.complete_visits(&done, &visits, T0).unwrap();
    assert_eq!(f.due_count().unwrap(), 3);
}

#[test]
fn a_later_lastmod_makes_a_known_url_due_now_an_older_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path(), true)).unwrap();
    crawled(&f);
    let now = T0 + DAY;
    assert!(urls(&f, now).is_empty(), "nothing due before 30 days");
    let r = f
        .apply_lastmod(
            &[
                ("http://a.test/a".into(), T0 + 60_000), // changed after the fetch
                ("http://a.test/b".into(), T0 - 60_000), // before the fetch
                ("http://a.test/c".into(), T0),          // at the fetch: not later
                ("http://a.test/new".into(), T0 + 1),    // not known
                ("http://a.test/c".into(), now + 1),     // in the future
            ],
            now,
        )
        .unwrap();
    assert_eq!(
        r,
        [
            LastmodResult::Due,
            LastmodResult::NotNewer,
            LastmodResult::NotNewer,
            LastmodResult::NotScheduled,
            LastmodResult::InFuture,
        ]
    );
    assert_eq!(f.stats().lastmod_moves, 1);
    assert_eq!(f.due_count().unwrap(), 3, "moved, not copied");
    // due at the next dispatch (within the index's one-second rounding)
    assert_eq!(urls(&f, now + 1000), ["http://a.test/a"]);
    assert!(urls(&f, now + 2000).is_empty(), "b and c keep their time");
    assert_eq!(
        urls(&f, T0 + 30 * DAY),
        ["http://a.test/b", "http://a.test/c"]
    );
}

#[test]
fn a_lastmod_read_again_after_the_refetch_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path(), true)).unwrap();
    crawled(&f);
    let now = T0 + DAY;
    let lastmod = [("http://a.test/a".to_string(), T0 + 60_000)];
    assert_eq!(
        f.apply_lastmod(&lastmod, now).unwrap(),
        [LastmodResult::Due]
    );
    allow_all(&f, now + 1000);
    let p: Vec<PageLease> = f
        .next_batch(now + 1000, 10)
        .unwrap()
        .into_iter()
        .filter_map(|w| match w {
            WorkItem::Page(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(p.len(), 1);
    f.complete_visits(
        &[(p[0].id, PageOutcome::Done { response_ms: 5 })],
        &[Some(Visit {
            refetch_at_ms: None,
            status: 200,
            outcome: VisitOutcome::Changed,
            validators: Validators::default(),
            fetched_at_ms: now + 1000,
        })],
        now + 1000,
    )
    .unwrap();
    // the same sitemap read the next day: the refetch was after its lastmod
    assert_eq!(
        f.apply_lastmod(&lastmod, now + DAY).unwrap(),
        [LastmodResult::NotNewer]
    );
    assert!(urls(&f, now + DAY + 1000).is_empty());
}

#[test]
fn a_queued_url_is_not_moved_and_locators_are_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path(), false)).unwrap();
    crawled(&f);
    assert_eq!(
        f.apply_lastmod(&[("http://a.test/a".into(), T0 + 1)], T0 + DAY)
            .unwrap(),
        [LastmodResult::NotScheduled]
    );
    let dir = tempfile::tempdir().unwrap();
    let f = Frontier::open(cfg(dir.path(), true)).unwrap();
    f.enqueue_batch(&["http://a.test/q"], T0).unwrap();
    assert_eq!(
        f.apply_lastmod(&[("http://a.test/q".into(), T0 - 1)], T0)
            .unwrap(),
        [LastmodResult::NotScheduled]
    );
}

#[test]
fn the_move_is_durable_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let now = T0 + DAY;
    {
        let f = Frontier::open(cfg(dir.path(), true)).unwrap();
        crawled(&f);
        assert_eq!(
            f.apply_lastmod(&[("http://a.test/b".into(), T0 + 5)], now)
                .unwrap(),
            [LastmodResult::Due]
        );
        // dropped without a close: what apply_lastmod returned after is flushed
    }
    let f = Frontier::open(cfg(dir.path(), true)).unwrap();
    assert_eq!(f.due_count().unwrap(), 3);
    assert_eq!(urls(&f, now + 1000), ["http://a.test/b"]);
}
