//! Robots.txt outcomes reported in batches ([`Frontier::complete_robots_batch`]).

use std::sync::Arc;

use crate::api::Frontier;
use crate::config::FrontierConfig;
use crate::error::FrontierError;
use crate::store::*;
use crate::*;

const T0: u64 = 1_700_000_000_000;

fn frontier() -> Frontier {
    let mut c = FrontierConfig::new("/nonexistent-robots-batch").without_gaps();
    c.seed = Some(1);
    Frontier::open_store(c, Arc::new(MemStore::new()), RobotsEngine::default()).unwrap()
}

fn robots_leases(items: Vec<WorkItem>) -> Vec<RobotsLease> {
    items
        .into_iter()
        .map(|w| match w {
            WorkItem::Robots(r) => r,
            WorkItem::Page(p) => panic!("a page before its robots.txt: {}", p.url),
        })
        .collect()
}

/// Fifty new hosts' robots.txt answers reported together are made durable by one flush
/// (not one each), and every one of those hosts may send its first page in the very next
/// dispatch round.
#[test]
fn robots_outcomes_of_many_hosts_share_one_flush_and_free_every_host() {
    let f = frontier();
    let urls: Vec<String> = (0..50).map(|i| format!("http://h{i}.test/p")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let leases = robots_leases(f.next_batch(T0 + 1, 100).unwrap());
    assert_eq!(leases.len(), 50, "one robots.txt per new host");

    let allow = RobotsFetchOutcome::ClientError { status: 404 };
    let done: Vec<_> = leases
        .iter()
        .map(|l| (l.clone(), allow.clone(), 5))
        .collect();
    let flushes = f.flushes();
    let results = f.complete_robots_batch(&done, T0 + 2).unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(f.flushes() - flushes, 1, "one flush for the whole batch");

    let pages: Vec<String> = f
        .next_batch(T0 + 3, 100)
        .unwrap()
        .into_iter()
        .map(|w| match w {
            WorkItem::Page(p) => p.url,
            WorkItem::Robots(r) => panic!("robots.txt again for {}", r.origin),
        })
        .collect();
    assert_eq!(pages.len(), 50, "every host's page goes in the next round");
}

/// A lease that is not (or no longer) pending fails alone: the others of the batch are
/// applied, and a second report of the same outcomes changes nothing.
#[test]
fn robots_batch_with_a_stale_lease_applies_the_others() {
    let f = frontier();
    let urls: Vec<String> = (0..3).map(|i| format!("http://s{i}.test/p")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let leases = robots_leases(f.next_batch(T0 + 1, 10).unwrap());
    assert_eq!(leases.len(), 3);
    let allow = RobotsFetchOutcome::ClientError { status: 404 };
    // the first host's answer was reported already
    f.complete_robots(&leases[0], &allow, 5, T0 + 2).unwrap();

    let done: Vec<_> = leases
        .iter()
        .map(|l| (l.clone(), allow.clone(), 5))
        .collect();
    let results = f.complete_robots_batch(&done, T0 + 3).unwrap();
    assert!(
        matches!(&results[0], Err(FrontierError::UnknownRobotsLease(o)) if *o == leases[0].origin),
        "{results:?}"
    );
    assert!(results[1].is_ok() && results[2].is_ok(), "{results:?}");
    assert_eq!(
        f.next_batch(T0 + 4, 10).unwrap().len(),
        3,
        "every host's page goes"
    );

    let again = f.complete_robots_batch(&done, T0 + 5).unwrap();
    assert!(again.iter().all(Result::is_err), "{again:?}");
}

/// A crawl-delay robots.txt gives is durable with the robots state itself (one flush): a
/// process killed after the first page was handed out, its lease and everything after
/// never flushed, restarts holding the host for the crawl-delay, not only the plain gap
/// (issue 36: the page was asked again 28 ms after its answer).
#[test]
fn a_crawl_delay_survives_a_crash_with_its_robots_txt() {
    let sim = Arc::new(crate::tests::CrashSim::default());
    let mut c = FrontierConfig::new("/nonexistent-crawl-delay").without_gaps();
    c.seed = Some(1);
    let f = Frontier::open_store(c.clone(), sim.clone(), RobotsEngine::default()).unwrap();
    f.enqueue_batch(
        &[
            "http://cd.test/a".to_string(),
            "http://cd.test/b".to_string(),
        ],
        T0,
    )
    .unwrap();
    let lease = robots_leases(f.next_batch(T0, 10).unwrap()).remove(0);
    let rules = RobotsFetchOutcome::Success {
        status: 200,
        body: b"User-agent: *\nCrawl-delay: 3\n".to_vec(),
        max_age: None,
    };
    f.complete_robots(&lease, &rules, 5, T0 + 10).unwrap();
    // the first page goes 3 s after the answer; its lease is never flushed
    assert!(f.next_batch(T0 + 3_009, 10).unwrap().is_empty());
    let first = f.next_batch(T0 + 3_010, 10).unwrap();
    assert!(matches!(&first[..], [WorkItem::Page(p)] if p.url.ends_with("/a")));
    // killed: only what was flushed is left
    std::mem::forget(f);
    let g = Frontier::open_store(c, sim.durable.clone(), RobotsEngine::default()).unwrap();
    let restart = T0 + 3_020;
    g.hold_hosts_after_restart(restart);
    assert!(
        g.next_batch(restart + 2_999, 10).unwrap().is_empty(),
        "asked within the crawl-delay after the restart"
    );
    let again = g.next_batch(restart + 3_000, 10).unwrap();
    assert!(matches!(&again[..], [WorkItem::Page(p)] if p.url.ends_with("/a")));
}

/// A crawl-delay the host's record does not hold yet (a robots state given without a
/// lease: another node's answer adopted, a preset) holds the host's next page for that
/// long after its last request, not only for the gap counted before it was known.
#[test]
fn a_longer_crawl_delay_learned_between_two_pages_holds_the_second() {
    let mut c = FrontierConfig::new("/nonexistent-crawl-delay-later").without_gaps();
    c.min_delay_ms = 400;
    c.max_delay_ms = 400;
    c.seed = Some(1);
    let f = Frontier::open_store(c, Arc::new(MemStore::new()), RobotsEngine::default()).unwrap();
    crate::tests::allow_all(&f, &["cd.test"], T0);
    f.enqueue_batch(
        &[
            "http://cd.test/a".to_string(),
            "http://cd.test/b".to_string(),
        ],
        T0,
    )
    .unwrap();
    let first = f.next_batch(T0, 10).unwrap();
    let [WorkItem::Page(a)] = &first[..] else {
        panic!("{first:?}")
    };
    f.complete(a.id, PageOutcome::Done { response_ms: 5 }, T0 + 10)
        .unwrap();
    let rules = RobotsFetchOutcome::Success {
        status: 200,
        body: b"User-agent: *\nCrawl-delay: 3\n".to_vec(),
        max_age: None,
    };
    f.set_robots(&[("http://cd.test", rules)], T0 + 20).unwrap();
    assert!(
        f.next_batch(T0 + 500, 10).unwrap().is_empty(),
        "asked after the plain gap, inside the crawl-delay"
    );
    assert!(f.next_batch(T0 + 3_009, 10).unwrap().is_empty());
    let second = f.next_batch(T0 + 3_010, 10).unwrap();
    assert!(
        matches!(&second[..], [WorkItem::Page(p)] if p.url.ends_with("/b")),
        "{second:?}"
    );
}

/// The hosts in memory ranked for the status page: most pages completed first, then the
/// slowest last answer; `n` cuts the list, equal scores come in key order.
#[test]
fn hosts_are_ranked_by_pages_completed_and_by_answer_time() {
    let f = frontier();
    crate::tests::allow_all(&f, &["a.test", "b.test", "c.test"], T0);
    let mut urls = Vec::new();
    for (host, n) in [("a.test", 4), ("b.test", 2), ("c.test", 3)] {
        urls.extend((0..n).map(|i| format!("http://{host}/{i}")));
    }
    f.enqueue_batch(&urls, T0).unwrap();
    // complete a: 3 pages, b: 1, c: 2, with c's answers the slowest; one URL of each left
    let target = |host: &str| match host {
        "a.test" => 3,
        "b.test" => 1,
        _ => 2,
    };
    let mut done: std::collections::HashMap<String, u32> = Default::default();
    for t in 1..20 {
        for w in f.next_batch(T0 + t, 10).unwrap() {
            let WorkItem::Page(p) = w else { continue };
            let host = url::Url::parse(&p.url)
                .unwrap()
                .host_str()
                .unwrap()
                .to_string();
            let n = done.entry(host.clone()).or_default();
            if *n < target(&host) {
                *n += 1;
                let ms = if host == "c.test" { 900 } else { 20 };
                f.complete(p.id, PageOutcome::Done { response_ms: ms }, T0 + t)
                    .unwrap();
            }
        }
    }
    let keys =
        |v: Vec<(String, crate::HostRecord)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(
        keys(f.hosts_ranked(crate::HostRank::Completed, 10)),
        ["a.test", "c.test", "b.test"]
    );
    assert_eq!(
        keys(f.hosts_ranked(crate::HostRank::Completed, 2)),
        ["a.test", "c.test"]
    );
    assert_eq!(
        keys(f.hosts_ranked(crate::HostRank::Slowest, 1)),
        ["c.test"]
    );
}

/// robots.txt answers another node got (a shard taken over) are obeyed from the first
/// request, as of when they were answered; an origin with a record of its own keeps it.
#[test]
fn adopted_robots_answers_are_obeyed_at_once_and_never_replace_a_record_of_our_own() {
    let f = frontier();
    let own = RobotsFetchOutcome::Success {
        status: 200,
        body: b"User-agent: *\nDisallow: /own".to_vec(),
        max_age: None,
    };
    f.set_robots(&[("http://h2.test", own)], T0).unwrap();
    let rules = RobotsFetchOutcome::Success {
        status: 200,
        body: b"User-agent: *\nDisallow: /p".to_vec(),
        max_age: None,
    };
    let allow = RobotsFetchOutcome::ClientError { status: 404 };
    let theirs = RobotsFetchOutcome::ClientError { status: 404 };
    let answers = [
        ("http://h0.test", rules, T0 - 60_000),
        ("http://h1.test", allow, T0 - 60_000),
        ("http://h2.test", theirs, T0 - 60_000),
    ];
    assert_eq!(f.adopt_robots(&answers, T0).unwrap(), 2, "h2 keeps its own");
    let urls = [
        "http://h0.test/p",
        "http://h0.test/q",
        "http://h1.test/p",
        "http://h2.test/own",
        "http://h2.test/p",
    ];
    f.enqueue_batch(&urls, T0).unwrap();
    let mut got = Vec::new();
    for t in 1..10 {
        for w in f.next_batch(T0 + t * 10_000, 100).unwrap() {
            match w {
                WorkItem::Page(p) => got.push(p.url),
                WorkItem::Robots(r) => panic!("robots.txt asked again for {}", r.origin),
            }
        }
    }
    got.sort();
    assert_eq!(
        got,
        ["http://h0.test/q", "http://h1.test/p", "http://h2.test/p"],
        "h0's rules and h2's own obeyed, h1 allowed"
    );
}
