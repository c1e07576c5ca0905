//! IP groups through the frontier's API: hosts that resolve to one address share its
//! slots and gap, other addresses go on, a host not resolved yet is its own group, and
//! the grouping survives a reopen.

use std::net::{IpAddr, Ipv4Addr};

use crate::api::Frontier;
use crate::config::FrontierConfig;
use crate::*;

const T0: u64 = 1_700_000_000_000;

fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

fn open(dir: &std::path::Path) -> Frontier {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(1);
    c.max_in_flight_per_ip = 2;
    c.ip_delay_ms = 100;
    Frontier::open(c).unwrap()
}

/// Hosts `names`, robots.txt known (404: allow all), `n` URLs each.
fn seed(f: &Frontier, names: &[String], n: usize) {
    let origins: Vec<String> = names.iter().map(|h| format!("http://{h}")).collect();
    let outs: Vec<(&str, RobotsFetchOutcome)> = origins
        .iter()
        .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&outs, T0).unwrap();
    let urls: Vec<String> = names
        .iter()
        .flat_map(|h| (0..n).map(move |i| format!("http://{h}/{i}")))
        .collect();
    f.enqueue_batch(&urls, T0).unwrap();
}

fn leases(items: Vec<WorkItem>) -> Vec<PageLease> {
    items
        .into_iter()
        .filter_map(|w| match w {
            WorkItem::Page(p) => Some(p),
            WorkItem::Robots(_) => None,
        })
        .collect()
}

fn finish(f: &Frontier, l: &PageLease, now: u64) {
    f.complete(l.id, PageOutcome::Done { response_ms: 1 }, now)
        .unwrap();
}

#[test]
fn hosts_on_one_address_share_its_slots_and_gap() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let names: Vec<String> = (0..10).map(|i| format!("h{i}.test")).collect();
    seed(&f, &names, 5);
    // nobody's address is known: every host is its own group
    let first = leases(f.next_batch(T0, 100).unwrap());
    assert_eq!(first.len(), 10);
    for l in &first {
        assert_eq!(f.note_address(l.id.host_id, ip(1), T0).unwrap(), Some(None));
        finish(&f, l, T0);
    }
    let groups = f.ip_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].ip, ip(1));
    assert_eq!(groups[0].hosts, names);
    assert_eq!(groups[0].next_allowed_ms, T0 + 100);
    // now one address: one request per 100 ms, whatever the hosts' own gaps (none)
    assert!(f.next_batch(T0 + 99, 100).unwrap().is_empty());
    assert_eq!(f.next_ready_at(), Some(T0 + 100));
    let a = leases(f.next_batch(T0 + 100, 100).unwrap());
    assert_eq!(a.len(), 1, "one per gap");
    assert!(f.next_batch(T0 + 150, 100).unwrap().is_empty());
    let b = leases(f.next_batch(T0 + 200, 100).unwrap());
    assert_eq!(b.len(), 1);
    assert_ne!(a[0].id.host_id, b[0].id.host_id, "the hosts take turns");
    // two in flight: the address is full even after its gap
    assert!(f.next_batch(T0 + 400, 100).unwrap().is_empty());
    assert_eq!(f.ip_groups()[0].in_flight, 2);
    assert!(f.stats().ip_waits > 0);
    finish(&f, &a[0], T0 + 400);
    let c = leases(f.next_batch(T0 + 400, 100).unwrap());
    assert_eq!(c.len(), 1, "a freed slot lets the next host go");
    // every host gets its turn, one request per gap
    let mut served = std::collections::HashSet::new();
    let mut t = T0 + 400;
    let mut last = t;
    let mut in_flight = vec![b[0].clone(), c[0].clone()];
    while served.len() < names.len() && t < T0 + 100_000 {
        t += 10;
        for l in in_flight.drain(..) {
            finish(&f, &l, t);
        }
        let got = leases(f.next_batch(t, 100).unwrap());
        assert!(got.len() <= 1);
        if let Some(l) = got.first() {
            assert!(t - last >= 100, "gap kept: {} ms", t - last);
            last = t;
            served.insert(l.id.host_id);
        }
        in_flight.extend(got);
    }
    assert_eq!(served.len(), names.len(), "no host starves in the line");
}

#[test]
fn other_addresses_and_unresolved_hosts_are_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let names: Vec<String> = ["a.test", "b.test", "c.test", "d.test"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    seed(&f, &names, 3);
    let first = leases(f.next_batch(T0, 100).unwrap());
    assert_eq!(first.len(), 4);
    // a and b share 127.0.0.1; c is on 127.0.0.2; d never reports an address
    for l in &first {
        let key = f.host_key_of(l.id.host_id).unwrap();
        let addr = match key.as_str() {
            "a.test" | "b.test" => Some(ip(1)),
            "c.test" => Some(ip(2)),
            _ => None,
        };
        if let Some(addr) = addr {
            f.note_address(l.id.host_id, addr, T0).unwrap();
        }
        finish(&f, l, T0);
    }
    let got = leases(f.next_batch(T0 + 100, 100).unwrap());
    let mut keys: Vec<String> = got
        .iter()
        .map(|l| f.host_key_of(l.id.host_id).unwrap())
        .collect();
    keys.sort();
    // one of a/b (they share an address), c and d
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.contains(&"c.test".to_string()));
    assert!(keys.contains(&"d.test".to_string()));
    assert_eq!(f.host_address("c.test").unwrap(), Some(ip(2)));
    assert_eq!(f.host_address("d.test").unwrap(), None);
}

#[test]
fn a_host_keeps_its_group_across_a_reopen_and_can_move() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..4).map(|i| format!("r{i}.test")).collect();
    {
        let f = open(dir.path());
        seed(&f, &names, 4);
        for l in leases(f.next_batch(T0, 100).unwrap()) {
            f.note_address(l.id.host_id, ip(7), T0).unwrap();
            finish(&f, &l, T0);
        }
    }
    let f = open(dir.path());
    assert_eq!(f.ip_groups().len(), 1, "{:?}", f.ip_groups());
    assert_eq!(f.ip_groups()[0].hosts, names);
    let got = leases(f.next_batch(T0 + 10_000, 100).unwrap());
    assert_eq!(got.len(), 1, "the reopened hosts still share 127.0.0.7");
    // the host moves: it leaves the group, and is no longer held by it
    let moved = got[0].id.host_id;
    assert_eq!(
        f.note_address(moved, ip(8), T0 + 10_000).unwrap(),
        Some(Some(ip(7)))
    );
    finish(&f, &got[0], T0 + 10_000);
    let views = f.ip_groups();
    assert_eq!(views.len(), 2);
    assert_eq!(views[0].hosts.len(), 3);
    assert_eq!(views[1].ip, ip(8));
}

#[test]
fn a_robots_fetch_of_a_grouped_host_counts_against_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    let names: Vec<String> = vec!["a.test".into(), "b.test".into()];
    seed(&f, &names, 1);
    for l in leases(f.next_batch(T0, 100).unwrap()) {
        f.note_address(l.id.host_id, ip(1), T0).unwrap();
        finish(&f, &l, T0);
    }
    // a's other origin has no robots.txt yet; b has a page queued
    f.enqueue_batch(&["https://a.test/x", "http://b.test/y"], T0)
        .unwrap();
    let t = T0 + 1_000;
    let items = f.next_batch(t, 100).unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(matches!(items[0], WorkItem::Robots(_)), "{items:?}");
    let g = &f.ip_groups()[0];
    assert_eq!(
        g.in_flight, 1,
        "the robots.txt fetch holds a slot of the address"
    );
    assert_eq!(g.next_allowed_ms, t + 100, "and starts its gap");
    assert_eq!(g.waiting, 1, "b waits for the address");
}

/// A robots.txt outcome that cannot be stored gives its host lease back, and with it the
/// slot it held at the host's address.
#[test]
fn a_robots_outcome_that_cannot_be_stored_frees_the_address_slot() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = std::sync::Arc::new(crate::tests::HeldFlush::default());
    let mut c = FrontierConfig::new("/nonexistent-ipgroup-store-error").without_gaps();
    c.seed = Some(1);
    c.max_in_flight_per_ip = 1;
    let f = Frontier::open_store(c, store.clone(), RobotsEngine::default()).unwrap();
    seed(&f, &["a.test".to_string()], 1);
    for l in leases(f.next_batch(T0, 10).unwrap()) {
        f.note_address(l.id.host_id, ip(1), T0).unwrap();
        finish(&f, &l, T0);
    }
    f.enqueue_batch(&["https://a.test/x"], T0).unwrap();
    let robots: Vec<RobotsLease> = f
        .next_batch(T0 + 1, 10)
        .unwrap()
        .into_iter()
        .filter_map(|w| match w {
            WorkItem::Robots(r) => Some(r),
            WorkItem::Page(_) => None,
        })
        .collect();
    assert_eq!(robots.len(), 1);
    assert_eq!(f.ip_groups()[0].in_flight, 1);
    store.failing.store(true, SeqCst);
    let allow = RobotsFetchOutcome::ClientError { status: 404 };
    assert!(f.complete_robots(&robots[0], &allow, 1, T0 + 2).is_err());
    store.failing.store(false, SeqCst);
    assert_eq!(
        f.ip_groups()[0].in_flight,
        0,
        "the address's slot came back"
    );
}

/// With `resolve_before_robots`, 20 new names on one address: none gets its robots.txt
/// before its address is reported, then their robots.txt fetches keep the address's gap
/// and slots like pages; a name that does not resolve still gets its fetch (to fail as
/// one). Without it (the old way) all 20 robots.txt fetches go at once.
#[test]
fn first_robots_fetches_wait_for_the_address_once_it_is_resolved() {
    let names: Vec<String> = (0..20).map(|i| format!("r{i}.test")).collect();
    let urls: Vec<String> = names.iter().map(|h| format!("http://{h}/")).collect();
    let robots = |items: Vec<WorkItem>| -> Vec<RobotsLease> {
        items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Robots(r) => Some(r),
                WorkItem::Page(_) => None,
            })
            .collect()
    };
    // the old way: 20 robots.txt at once, nothing to resolve
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    f.enqueue_batch(&urls, T0).unwrap();
    assert_eq!(robots(f.next_batch(T0, 100).unwrap()).len(), 20);
    assert!(f.take_resolves().is_empty());

    let dir = tempfile::tempdir().unwrap();
    let mut c = FrontierConfig::new(dir.path()).without_gaps();
    c.seed = Some(1);
    c.max_in_flight_per_ip = 2;
    c.ip_delay_ms = 100;
    c.resolve_before_robots = true;
    let f = Frontier::open(c).unwrap();
    f.enqueue_batch(&urls, T0).unwrap();
    assert!(f.next_batch(T0, 100).unwrap().is_empty(), "addresses first");
    let asked = f.take_resolves();
    assert_eq!(asked.len(), 20);
    assert!(asked
        .iter()
        .all(|r| r.host.starts_with('r') && r.host.ends_with(".test")));
    assert!(f.next_batch(T0, 100).unwrap().is_empty(), "still waiting");
    assert!(f.take_resolves().is_empty(), "each host asked once");
    assert_eq!(f.stats().resolves_asked, 20);
    // 19 resolve to one address, the last does not resolve
    let mut answers: Vec<(u64, Option<IpAddr>)> =
        asked.iter().map(|r| (r.host_id, Some(ip(9)))).collect();
    answers.last_mut().unwrap().1 = None;
    let changed = f.resolved(&answers).unwrap();
    assert_eq!(changed.len(), 19);
    // the unresolved one goes at once (its own group); of the 19, one per gap
    let first = f.next_batch(T0, 100).unwrap();
    let first = robots(first);
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().any(|r| r.origin == "http://r19.test"));
    let mut in_flight: Vec<RobotsLease> = first
        .into_iter()
        .filter(|r| r.origin != "http://r19.test")
        .collect();
    let mut started = in_flight.len();
    let mut last_start = T0;
    let mut t = T0;
    while started < 19 && t < T0 + 60_000 {
        t += 10;
        // a robots.txt answers 150 ms after it began
        if t.is_multiple_of(150) && !in_flight.is_empty() {
            let r = in_flight.remove(0);
            f.complete_robots(&r, &RobotsFetchOutcome::ClientError { status: 404 }, 1, t)
                .unwrap();
        }
        let got = f.next_batch(t, 100).unwrap();
        assert!(
            got.len() <= 1,
            "one request per gap at the address: {got:?}"
        );
        for w in got {
            assert!(t - last_start >= 100, "gap kept: {} ms", t - last_start);
            last_start = t;
            match w {
                WorkItem::Robots(r) => {
                    in_flight.push(r);
                    started += 1;
                }
                // a page of a host whose robots.txt answered: done at once
                WorkItem::Page(p) => finish(&f, &p, t),
            }
        }
        assert!(in_flight.len() <= 2, "at most 2 in flight");
    }
    assert_eq!(started, 19, "every resolved host got its robots.txt");
}

/// The address is part of the host's record: a host that finished its queue (and left
/// memory) and gets work again is still in its group, whether its record came back from
/// the journal, from a checkpoint or from a reopened store; no `I` key is written.
#[test]
fn a_host_that_left_memory_comes_back_in_its_group() {
    for checkpoint_every_call in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.seed = Some(1);
        c.max_in_flight_per_ip = 1;
        c.ip_delay_ms = 100;
        if checkpoint_every_call {
            c.journal_checkpoint_bytes = 0;
        }
        let names: Vec<String> = vec!["a.test".into(), "b.test".into()];
        {
            let f = Frontier::open(c.clone()).unwrap();
            seed(&f, &names, 1);
            for l in leases(f.next_batch(T0, 100).unwrap()) {
                f.note_address(l.id.host_id, ip(3), T0).unwrap();
                finish(&f, &l, T0);
            }
            assert_eq!(f.ip_groups().len(), 0, "both hosts left memory");
            assert_eq!(f.host_address("a.test").unwrap(), Some(ip(3)));
            // back with work before any reopen: from the journal (or the checkpoint)
            f.enqueue_batch(&["http://a.test/again", "http://b.test/again"], T0)
                .unwrap();
            let got = leases(f.next_batch(T0 + 1_000, 100).unwrap());
            assert_eq!(got.len(), 1, "a and b still share 127.0.0.3");
            finish(&f, &got[0], T0 + 1_000);
            let rest = leases(f.next_batch(T0 + 2_000, 100).unwrap());
            assert_eq!(rest.len(), 1);
            finish(&f, &rest[0], T0 + 2_000);
            let stray = f.store.scan_prefix(b"I").count();
            assert_eq!(stray, 0, "addresses are not keys of their own");
        }
        let f = Frontier::open(c).unwrap();
        assert_eq!(f.host_address("b.test").unwrap(), Some(ip(3)));
        f.enqueue_batch(&["http://a.test/3", "http://b.test/3"], T0 + 10_000)
            .unwrap();
        assert_eq!(f.ip_groups().len(), 1, "{:?}", f.ip_groups());
        assert_eq!(f.ip_groups()[0].hosts, names);
        let got = leases(f.next_batch(T0 + 10_000, 100).unwrap());
        assert_eq!(got.len(), 1, "reopened, a and b still share 127.0.0.3");
    }
}

/// A store written before addresses moved into host records keeps its `I` keys: they are
/// still read, at open and when a host comes back into memory.
#[test]
fn an_address_in_an_older_stores_key_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = vec!["a.test".into(), "b.test".into(), "c.test".into()];
    {
        let f = open(dir.path());
        seed(&f, &names, 2);
        // a and b as an older version wrote them: the address under `I` + key
        let mut batch = crate::store::Batch::new();
        for h in ["a.test", "b.test"] {
            batch.put(crate::store::keys::address(h), b"127.0.0.5".to_vec());
        }
        f.store.apply(batch).unwrap();
        f.store.flush().unwrap();
    }
    let f = open(dir.path());
    assert_eq!(f.host_address("a.test").unwrap(), Some(ip(5)));
    let got = leases(f.next_batch(T0, 100).unwrap());
    // a and b share an address (one of them), c is a group of its own
    assert_eq!(got.len(), 2, "{got:?}");
}

/// Asking for an address takes a robots.txt slot until the answer comes: with 3 slots, 10
/// new hosts are looked up 3 at a time (never all at once), and the answered ones go on
/// to their robots.txt within the same slots.
#[test]
fn address_lookups_take_robots_slots() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = FrontierConfig::new(dir.path()).without_gaps();
    c.seed = Some(1);
    c.resolve_before_robots = true;
    c.max_robots_in_flight = Some(3);
    let f = Frontier::open(c).unwrap();
    let urls: Vec<String> = (0..10).map(|i| format!("http://n{i}.test/")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    assert!(f.next_batch(T0, 100).unwrap().is_empty());
    let asked = f.take_resolves();
    assert_eq!(asked.len(), 3, "one lookup per free slot");
    assert!(f.next_batch(T0, 100).unwrap().is_empty());
    assert!(f.take_resolves().is_empty(), "no slot is free");
    // two answers (one without an address): their slots go to their robots.txt fetches
    let answers: Vec<(u64, Option<IpAddr>)> =
        vec![(asked[0].host_id, Some(ip(1))), (asked[1].host_id, None)];
    f.resolved(&answers).unwrap();
    let items = f.next_batch(T0 + 1, 100).unwrap();
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items.iter().all(|w| matches!(w, WorkItem::Robots(_))));
    assert!(
        f.take_resolves().is_empty(),
        "the third lookup still holds its slot"
    );
    // the robots.txt fetches end: their slots go to the next lookups
    for w in items {
        if let WorkItem::Robots(r) = w {
            f.complete_robots(
                &r,
                &RobotsFetchOutcome::ClientError { status: 404 },
                1,
                T0 + 2,
            )
            .unwrap();
        }
    }
    let mut pages = 0;
    for w in f.next_batch(T0 + 3, 100).unwrap() {
        if let WorkItem::Page(p) = w {
            pages += 1;
            finish(&f, &p, T0 + 3);
        }
    }
    assert_eq!(pages, 2);
    assert_eq!(f.take_resolves().len(), 2, "two slots free again");
    assert_eq!(f.stats().resolves_asked, 5);
}
