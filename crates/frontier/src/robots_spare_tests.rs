//! `max_robots_in_flight_spare`: robots.txt fetches beyond `max_robots_in_flight` only for
//! what a dispatch call would otherwise leave idle, pages of hosts with known rules first.

use std::sync::Arc;

use crate::api::Frontier;
use crate::config::FrontierConfig;
use crate::store::*;
use crate::*;

const T0: u64 = 1_700_000_000_000;
const ALLOW: RobotsFetchOutcome = RobotsFetchOutcome::ClientError { status: 404 };

/// Ten new hosts and one host with known rules and three pages; robots.txt capped at 2,
/// spare cap `spare`.
fn frontier(spare: Option<u64>) -> Frontier {
    let mut c = FrontierConfig::new("/nonexistent-robots-spare").without_gaps();
    c.seed = Some(1);
    c.max_robots_in_flight = Some(2);
    c.max_robots_in_flight_spare = spare;
    let f = Frontier::open_store(c, Arc::new(MemStore::new()), RobotsEngine::default()).unwrap();
    let new: Vec<String> = (0..10).map(|i| format!("http://n{i}.test/p")).collect();
    f.enqueue_batch(&new, T0).unwrap();
    f.set_robots(&[("http://known.test", ALLOW)], T0).unwrap();
    let known: Vec<String> = (0..3).map(|i| format!("http://known.test/{i}")).collect();
    f.enqueue_batch(&known, T0 + 1).unwrap();
    f
}

/// (robots.txt leases, page leases) of one call.
fn split(items: Vec<WorkItem>) -> (Vec<RobotsLease>, Vec<PageLease>) {
    let (mut robots, mut pages) = (Vec::new(), Vec::new());
    for w in items {
        match w {
            WorkItem::Robots(r) => robots.push(r),
            WorkItem::Page(p) => pages.push(p),
        }
    }
    (robots, pages)
}

#[test]
fn idle_workers_fetch_robots_txt_beyond_the_cap_up_to_the_spare_cap() {
    let f = frontier(Some(6));
    // asked for ten: the known host's page (one at a time per host), two robots.txt at
    // the cap, then four more up to the spare cap instead of seven idle workers
    let (robots, pages) = split(f.next_batch(T0 + 2, 10).unwrap());
    assert_eq!(pages.len(), 1);
    assert_eq!(robots.len(), 6, "robots.txt up to the spare cap");
    // the hosts wait in line in order: the first six new hosts got theirs
    let mut origins: Vec<String> = robots.iter().map(|r| r.origin.clone()).collect();
    origins.sort();
    let first_six: Vec<String> = (0..6).map(|i| format!("http://n{i}.test")).collect();
    assert_eq!(origins, first_six);
    // the spare cap reached: nothing more until a slot frees
    let (more, _) = split(f.next_batch(T0 + 3, 10).unwrap());
    assert!(more.is_empty(), "at the spare cap: {more:?}");
    f.complete_robots(&robots[0], &ALLOW, 1, T0 + 4).unwrap();
    let (next, _) = split(f.next_batch(T0 + 5, 10).unwrap());
    assert_eq!(next.len(), 1, "one slot freed, one robots.txt");
}

#[test]
fn pages_that_fill_the_call_keep_robots_txt_at_its_cap() {
    let f = frontier(Some(6));
    // asked for three: the known host's page and two robots.txt fill it, no spare
    let (robots, pages) = split(f.next_batch(T0 + 2, 3).unwrap());
    assert_eq!((robots.len(), pages.len()), (2, 1));
    // with the two slots taken and asked for one: the page comes first, never a robots.txt
    // beyond the cap in its place
    for p in pages {
        f.complete(p.id, PageOutcome::Done { response_ms: 1 }, T0 + 3)
            .unwrap();
    }
    let (robots, pages) = split(f.next_batch(T0 + 4, 1).unwrap());
    assert_eq!(
        (robots.len(), pages.len()),
        (0, 1),
        "the page, not a robots.txt"
    );
}

#[test]
fn without_a_spare_cap_the_cap_holds_however_many_are_asked_for() {
    let f = frontier(None);
    let (robots, pages) = split(f.next_batch(T0 + 2, 10).unwrap());
    assert_eq!((robots.len(), pages.len()), (2, 1));
}
