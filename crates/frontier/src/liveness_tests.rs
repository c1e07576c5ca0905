//! No host starves: a crawl driven as the daemon drives it (new hosts resolved before their
//! robots.txt, robots.txt capped with a spare cap, answers coming back out of order, URLs
//! submitted while it crawls, folds and checkpoints on the way) fetches every host's
//! robots.txt and every URL once. No address is held or overrun: hosts over several
//! addresses, some moving, keep every address's slots, gap and in-flight count true.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::api::Frontier;
use crate::config::FrontierConfig;
use crate::tests::pages;
use crate::*;

const T0: u64 = 1_700_000_000_000;
const ALLOW: RobotsFetchOutcome = RobotsFetchOutcome::ClientError { status: 404 };
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// What the simulated workers and resolver hold, each due at a step.
#[derive(Default)]
struct InFlight {
    robots: Vec<(u64, RobotsLease)>,
    pages: Vec<(u64, PageLease)>,
    resolves: Vec<(u64, u64)>,
}

impl InFlight {
    fn is_empty(&self) -> bool {
        self.robots.is_empty() && self.pages.is_empty() && self.resolves.is_empty()
    }

    fn workers_busy(&self) -> usize {
        self.robots.len() + self.pages.len()
    }
}

/// Takes out of `v` what is due at `now`.
fn due<T>(v: &mut Vec<(u64, T)>, now: u64) -> Vec<T> {
    let (ready, rest): (Vec<_>, Vec<_>) =
        std::mem::take(v).into_iter().partition(|(t, _)| *t <= now);
    *v = rest;
    ready.into_iter().map(|(_, x)| x).collect()
}

struct Crawl {
    robots_fetched: BTreeMap<String, u32>,
    pages_fetched: BTreeMap<String, u32>,
}

/// `hosts` hosts, `per_host` URLs each (URL k on host k mod hosts, as daemon-bench
/// submits them), submitted in parts of `part` while `workers` workers crawl.
/// On sled in a temporary directory, or (`in_memory`) on the in-memory store.
fn crawl(
    seed: u64,
    (hosts, per_host, part, workers): (usize, usize, usize, usize),
    in_memory: bool,
) -> Crawl {
    let dir = tempfile::tempdir().unwrap();
    let mut c = FrontierConfig::new(dir.path()).without_gaps();
    c.seed = Some(seed);
    c.max_robots_in_flight = Some((workers / 2) as u64);
    c.max_robots_in_flight_spare = Some((workers - workers / 8) as u64);
    c.resolve_before_robots = true;
    c.max_in_flight_per_ip = 1_000_000;
    c.ip_delay_ms = 0;
    if hosts <= 100_000 {
        // small enough for several folds and checkpoints over the run (a larger run keeps
        // the daemon's defaults, and folds and checkpoints at their sizes)
        c.intake_buffer_bytes = 64 * 1024;
        c.fold_slice_bytes = 8 * 1024;
        c.journal_checkpoint_bytes = 16 * 1024;
        c.journal_checkpoint_slice = 64;
    }
    let f = if in_memory {
        let store = std::sync::Arc::new(crate::store::MemStore::new());
        Frontier::open_store(c, store, RobotsEngine::default()).unwrap()
    } else {
        Frontier::open(c).unwrap()
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let urls: Vec<String> = (0..hosts * per_host)
        .map(|k| format!("http://h{}.test/p/{k}", k % hosts))
        .collect();
    let mut submitted = 0;
    let mut out = InFlight::default();
    let mut crawl = Crawl {
        robots_fetched: BTreeMap::new(),
        pages_fetched: BTreeMap::new(),
    };
    let mut quiet_steps = 0;
    for step in 0.. {
        let now = T0 + step;
        if submitted < urls.len() && rng.gen_ratio(1, 4) {
            let end = (submitted + part).min(urls.len());
            f.enqueue_batch(&urls[submitted..end], now).unwrap();
            submitted = end;
        }
        let answers: Vec<(u64, Option<IpAddr>)> = due(&mut out.resolves, now)
            .into_iter()
            .map(|id| (id, Some(LOOPBACK)))
            .collect();
        if !answers.is_empty() {
            f.resolved(&answers).unwrap();
        }
        let robots: Vec<(RobotsLease, RobotsFetchOutcome, u64)> = due(&mut out.robots, now)
            .into_iter()
            .map(|r| (r, ALLOW, 1))
            .collect();
        if !robots.is_empty() {
            for r in f.complete_robots_batch(&robots, now).unwrap() {
                r.unwrap();
            }
        }
        let pages: Vec<(LeaseId, PageOutcome)> = due(&mut out.pages, now)
            .into_iter()
            .map(|p| (p.id, PageOutcome::Done { response_ms: 1 }))
            .collect();
        if !pages.is_empty() {
            f.complete_batch(&pages, now).unwrap();
        }
        let free = workers - out.workers_busy();
        let items = if free > 0 {
            f.next_batch(now, free).unwrap()
        } else {
            Vec::new()
        };
        for id in f.take_resolves().into_iter().map(|r| r.host_id) {
            out.resolves.push((now + rng.gen_range(0..6), id));
        }
        let got_any = !items.is_empty();
        for w in items {
            let at = now + rng.gen_range(1..30);
            match w {
                WorkItem::Robots(r) => {
                    *crawl.robots_fetched.entry(r.origin.clone()).or_default() += 1;
                    out.robots.push((at, r));
                }
                WorkItem::Page(p) => {
                    *crawl.pages_fetched.entry(p.url.clone()).or_default() += 1;
                    out.pages.push((at, p));
                }
            }
        }
        quiet_steps = if got_any || !out.is_empty() || submitted < urls.len() {
            0
        } else {
            quiet_steps + 1
        };
        if quiet_steps > 2_000 {
            break;
        }
    }
    crawl
}

fn assert_everything_fetched_once(c: &Crawl, hosts: usize, per_host: usize) {
    let never: BTreeSet<String> = (0..hosts)
        .map(|h| format!("http://h{h}.test"))
        .filter(|o| !c.robots_fetched.contains_key(o))
        .collect();
    assert!(
        never.is_empty(),
        "{} of {hosts} hosts never asked for robots.txt, e.g. {:?}",
        never.len(),
        never.iter().take(5).collect::<Vec<_>>()
    );
    let twice: Vec<_> = c.robots_fetched.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "robots.txt asked twice: {twice:?}");
    assert_eq!(c.pages_fetched.len(), hosts * per_host, "every URL fetched");
    assert!(c.pages_fetched.values().all(|n| *n == 1), "each once");
}

#[test]
fn every_host_gets_its_robots_txt_and_every_url_goes_once() {
    for seed in 0..3 {
        let (hosts, per_host) = (3_000, 4);
        let c = crawl(seed, (hosts, per_host, 1_000, 64), false);
        assert_everything_fetched_once(&c, hosts, per_host);
    }
}

/// The same at a scale set by `FRONTIER_LIVENESS_HOSTS` (default 3M hosts, two URLs each,
/// 256 workers) on the in-memory store: `cargo test --release -p frontier --lib
/// liveness_at_scale -- --ignored --nocapture`.
#[test]
#[ignore = "minutes in release; run by hand"]
fn liveness_at_scale() {
    let hosts = std::env::var("FRONTIER_LIVENESS_HOSTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3_000_000);
    let t = std::time::Instant::now();
    let c = crawl(7, (hosts, 2, 10_000, 256), true);
    eprintln!("{hosts} hosts crawled in {:?}", t.elapsed());
    assert_everything_fetched_once(&c, hosts, 2);
}

/// Addresses asked for before robots.txt hold robots.txt slots until answered. An answer
/// whose address cannot be written (the store failing) still answers its host: it goes on
/// to its robots.txt and its slot is free, instead of holding it for the daemon's life
/// (enough of them and no new host would ever get its robots.txt).
#[test]
fn answers_that_cannot_be_written_still_free_their_slots() {
    let store = std::sync::Arc::new(crate::tests::HeldFlush::default());
    let mut c = FrontierConfig::new("/nonexistent-resolve-store-error").without_gaps();
    c.seed = Some(1);
    c.resolve_before_robots = true;
    c.max_in_flight_per_ip = 1_000_000;
    c.ip_delay_ms = 0;
    // more new hosts than the answers left unwritten may hold: these answers are written
    let hosts = crate::store::journal::UNSETTLED_MAX + 100;
    c.max_robots_in_flight = Some(hosts as u64);
    let f = Frontier::open_store(c, store.clone(), RobotsEngine::default()).unwrap();
    let urls: Vec<String> = (0..hosts).map(|h| format!("http://h{h}.test/p")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    assert!(f.next_batch(T0, hosts).unwrap().is_empty());
    let asked = f.take_resolves();
    assert_eq!(
        asked.len(),
        hosts,
        "every new host's address asked, a slot each"
    );
    let answers: Vec<(u64, Option<IpAddr>)> =
        asked.iter().map(|r| (r.host_id, Some(LOOPBACK))).collect();
    store
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(
        f.resolved(&answers).is_err(),
        "the addresses were not written"
    );
    store
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let robots = f
        .next_batch(T0 + 1, hosts)
        .unwrap()
        .into_iter()
        .filter(|w| matches!(w, WorkItem::Robots(_)))
        .count();
    assert_eq!(robots, hosts, "every host went on to its robots.txt");
}

/// A dispatch call whose writes fail hands nothing out and keeps nothing: its hosts'
/// slots and robots.txt slots are free again, and once the store takes writes the same
/// URLs and robots.txt go out.
#[test]
fn a_dispatch_that_cannot_be_written_holds_no_host() {
    let store = std::sync::Arc::new(crate::tests::HeldFlush::default());
    let mut c = FrontierConfig::new("/nonexistent-dispatch-store-error").without_gaps();
    c.seed = Some(1);
    c.max_robots_in_flight = Some(2);
    let f = Frontier::open_store(c, store.clone(), RobotsEngine::default()).unwrap();
    let rules = RobotsFetchOutcome::Success {
        status: 200,
        body: b"User-agent: *\nDisallow: /private\n".to_vec(),
        max_age: None,
    };
    f.set_robots(&[("http://known.test", rules)], T0).unwrap();
    // the disallowed URL's drop is the call's write
    let urls = [
        "http://known.test/private",
        "http://known.test/a",
        "http://new1.test/a",
        "http://new2.test/a",
    ];
    f.enqueue_batch(&urls, T0).unwrap();
    store
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(
        f.next_batch(T0 + 1, 10).is_err(),
        "the call's writes failed"
    );
    store
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let mut got: Vec<String> = f
        .next_batch(T0 + 2, 10)
        .unwrap()
        .into_iter()
        .map(|w| match w {
            WorkItem::Robots(r) => r.url,
            WorkItem::Page(p) => p.url,
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "http://known.test/a",
            "http://new1.test/robots.txt",
            "http://new2.test/robots.txt"
        ],
        "after the failed call every host goes again"
    );
}

/// A page's outcome that cannot be written does not hold its host: once the store takes
/// writes its next URL goes (the page itself is fetched again, not lost).
#[test]
fn a_page_outcome_that_cannot_be_written_holds_no_host() {
    let store = std::sync::Arc::new(crate::tests::HeldFlush::default());
    let mut c = FrontierConfig::new("/nonexistent-complete-store-error").without_gaps();
    c.seed = Some(1);
    let f = Frontier::open_store(c, store.clone(), RobotsEngine::default()).unwrap();
    f.set_robots(&[("http://a.test", ALLOW)], T0).unwrap();
    f.enqueue_batch(&["http://a.test/1", "http://a.test/2"], T0)
        .unwrap();
    let first = pages(f.next_batch(T0 + 1, 10).unwrap());
    assert_eq!(first.len(), 1, "one at a time on a host");
    store
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let done = PageOutcome::Done { response_ms: 1 };
    assert!(f.complete(first[0].id, done.clone(), T0 + 2).is_err());
    store
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let mut fetched = Vec::new();
    for now in T0 + 3..T0 + 20 {
        for p in pages(f.next_batch(now, 10).unwrap()) {
            f.complete(p.id, done.clone(), now).unwrap();
            fetched.push(p.url);
        }
    }
    assert!(
        fetched.contains(&"http://a.test/2".to_string()),
        "the host went on: {fetched:?}"
    );
}

/// Hosts over four addresses, a tenth of them moving to the next address with their first
/// page (DNS answers that change while requests are in flight), at most three requests at
/// an address with 2 ms between their starts, two at a host, and the dispatcher's clock
/// read up to 2 ms early (a thread's that read it before the lock): every request went to
/// an address with a free slot and its gap over (by the clock the caller gave), the IP
/// groups' books balance after every step, and at the end every URL went once and no
/// address holds a slot.
#[test]
fn addresses_keep_their_budget_and_their_books() {
    use std::collections::HashMap;
    const ADDRESSES: usize = 4;
    const MAX_PER_IP: u32 = 3;
    const IP_DELAY: u64 = 2;
    let address = |k: usize, moved: bool| {
        let n = (k + usize::from(moved)) % ADDRESSES;
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1 + n as u8))
    };
    let host_index = |name_or_url: &str| -> usize {
        let rest = name_or_url
            .trim_start_matches("http://")
            .trim_start_matches('h');
        rest[..rest.find('.').unwrap()].parse().unwrap()
    };
    for seed in 0..3 {
        let (hosts, per_host) = (400, 5);
        let dir = tempfile::tempdir().unwrap();
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.seed = Some(seed);
        c.resolve_before_robots = true;
        c.max_in_flight_per_ip = u64::from(MAX_PER_IP);
        c.ip_delay_ms = IP_DELAY;
        c.max_in_flight_per_host = 2;
        c.max_robots_in_flight = Some(8);
        let f = Frontier::open(c).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let urls: Vec<String> = (0..hosts * per_host)
            .map(|k| format!("http://h{}.test/p/{k}", k % hosts))
            .collect();
        f.enqueue_batch(&urls, T0).unwrap();
        // what the simulated resolver and fetches told the frontier, per host id
        let mut told: HashMap<u64, IpAddr> = HashMap::new();
        let mut moved: BTreeSet<usize> = BTreeSet::new();
        // requests out per host id, and the last start per address (the caller's clock)
        let mut out_per_host: HashMap<u64, u32> = HashMap::new();
        let mut last_start: HashMap<IpAddr, u64> = HashMap::new();
        let mut out_robots: Vec<(u64, RobotsLease)> = Vec::new();
        let mut out_pages: Vec<(u64, (PageLease, u64))> = Vec::new();
        let mut out_resolves: Vec<(u64, (u64, usize))> = Vec::new();
        let mut pages_fetched: BTreeMap<String, u32> = BTreeMap::new();
        let mut quiet_steps = 0;
        for step in 0.. {
            let now = T0 + step;
            let answers: Vec<(u64, Option<IpAddr>)> = due(&mut out_resolves, now)
                .into_iter()
                .map(|(id, k)| {
                    told.insert(id, address(k, false));
                    (id, Some(address(k, false)))
                })
                .collect();
            if !answers.is_empty() {
                f.resolved(&answers).unwrap();
            }
            let robots: Vec<(RobotsLease, RobotsFetchOutcome, u64)> = due(&mut out_robots, now)
                .into_iter()
                .map(|r: RobotsLease| {
                    *out_per_host.get_mut(&r.host_id).unwrap() -= 1;
                    (r, ALLOW, 1)
                })
                .collect();
            if !robots.is_empty() {
                for r in f.complete_robots_batch(&robots, now).unwrap() {
                    r.unwrap();
                }
            }
            let done = due(&mut out_pages, now);
            // a tenth of the hosts answer from the next address with their first page
            let mut reports = Vec::new();
            for (p, started) in &done {
                let k = host_index(&p.url);
                if k % 10 == 3 && moved.insert(k) {
                    told.insert(p.id.host_id, address(k, true));
                    reports.push((p.id.host_id, address(k, true), *started));
                }
            }
            if !reports.is_empty() {
                f.note_addresses(&reports).unwrap();
            }
            let pages: Vec<(LeaseId, PageOutcome)> = done
                .into_iter()
                .map(|(p, _)| {
                    *out_per_host.get_mut(&p.id.host_id).unwrap() -= 1;
                    (p.id, PageOutcome::Done { response_ms: 1 })
                })
                .collect();
            if !pages.is_empty() {
                f.complete_batch(&pages, now).unwrap();
            }
            let clock = now - rng.gen_range(0..3);
            let items = f.next_batch(clock, 64).unwrap();
            for r in f.take_resolves() {
                let k = host_index(&r.host);
                out_resolves.push((now + rng.gen_range(0..4), (r.host_id, k)));
            }
            let got_any = !items.is_empty();
            for w in items {
                let id = match &w {
                    WorkItem::Robots(r) => r.host_id,
                    WorkItem::Page(p) => p.id.host_id,
                };
                let ip = *told.get(&id).expect("resolved before its first request");
                let at_ip: u32 = out_per_host
                    .iter()
                    .filter(|(h, _)| told.get(h) == Some(&ip))
                    .map(|(_, n)| n)
                    .sum();
                assert!(at_ip < MAX_PER_IP, "{ip} had {at_ip} out at {clock}");
                if let Some(&t) = last_start.get(&ip) {
                    assert!(
                        clock >= t + IP_DELAY,
                        "{ip}: a start at {t}, the next at {clock}"
                    );
                }
                last_start.insert(ip, clock);
                *out_per_host.entry(id).or_default() += 1;
                let back = now + rng.gen_range(1..12);
                match w {
                    WorkItem::Robots(r) => out_robots.push((back, r)),
                    WorkItem::Page(p) => {
                        *pages_fetched.entry(p.url.clone()).or_default() += 1;
                        out_pages.push((back, (p, clock)));
                    }
                }
            }
            let errors = f.inner.lock().sched.ip_accounting_errors();
            assert!(errors.is_empty(), "step {step}: {errors:?}");
            quiet_steps = if got_any
                || !(out_robots.is_empty() && out_pages.is_empty() && out_resolves.is_empty())
            {
                0
            } else {
                quiet_steps + 1
            };
            if quiet_steps > 2_000 {
                break;
            }
        }
        assert_eq!(pages_fetched.len(), hosts * per_host, "every URL fetched");
        assert!(pages_fetched.values().all(|n| *n == 1), "each once");
        assert_eq!(moved.len(), hosts / 10, "the movers moved");
        let groups = f.ip_groups();
        assert!(
            groups.iter().all(|g| g.in_flight == 0),
            "no address holds a slot: {groups:?}"
        );
    }
}
