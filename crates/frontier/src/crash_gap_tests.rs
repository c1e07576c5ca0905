//! Politeness across crashes, against a model of what the site sees: random dispatches,
//! answers and kills (a kill keeps what was flushed and any prefix of the writes after
//! it, as sled's log does), each restart held at once. Every request to a host waits its
//! gap after the host's previous answer (the crawl-delay once robots.txt gave one and its
//! answer was acknowledged); a request in flight at a kill counts as answered at the kill.
//! And a wall clock set back between two runs: the times the first run stored lie ahead of
//! the second's clock by the step, which a restart must not wait out.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::store::{Batch, MemStore, Store};
use crate::tests::CrashSim;
use crate::*;

const T0: u64 = 1_700_000_000_000;

/// A copy of `store`'s keys.
fn copy_of(store: &MemStore) -> MemStore {
    let mut all = Batch::new();
    for kv in store.scan_prefix(b"") {
        let (k, v) = kv.expect("a stored key");
        all.put(k, v);
    }
    let copy = MemStore::new();
    copy.apply(all).expect("copied");
    copy
}

impl CrashSim {
    /// The store a kill leaves, as sled's log does: what was flushed and the first `keep`
    /// writes after it (all of them with `keep` past the end).
    fn crash_keeping(&self, keep: usize) -> CrashSim {
        let image = copy_of(&self.durable);
        for b in self.unflushed.lock().iter().take(keep) {
            image.apply(b.clone()).expect("replayed");
        }
        CrashSim {
            durable: Arc::new(copy_of(&image)),
            live: image,
            unflushed: Default::default(),
        }
    }
}

const HOSTS: [&str; 3] = ["slow.test", "a.test", "b.test"];
const GAP_MS: u64 = 400;
const CRAWL_DELAY_MS: u64 = 2_000;

fn config(checkpoint_every_batch: bool) -> FrontierConfig {
    let mut c = FrontierConfig::new("/nonexistent-crash-gap").without_gaps();
    c.min_delay_ms = GAP_MS;
    c.max_delay_ms = GAP_MS;
    c.seed = Some(1);
    if checkpoint_every_batch {
        c.journal_checkpoint_bytes = 0;
        c.journal_checkpoint_slice = 1;
    }
    c
}

fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

enum Out {
    Robots(RobotsLease),
    Page(PageLease),
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let checkpoints = rng.gen_bool(0.5);
    let cfg = config(checkpoints);
    let mut store = Arc::new(CrashSim::default());
    let mut f = Frontier::open_store(cfg.clone(), store.clone(), RobotsEngine::default()).unwrap();
    let urls: Vec<String> = HOSTS
        .iter()
        .flat_map(|h| (0..6).map(move |i| format!("http://{h}/p{i}")))
        .collect();
    f.enqueue_batch(&urls, T0).unwrap();
    store.flush().unwrap();
    let mut now = T0;
    // per host: the site's last answer, whether its crawl-delay was acknowledged
    let mut answered: HashMap<String, u64> = HashMap::new();
    let mut delay_known = false;
    let mut out: Vec<(String, Out)> = Vec::new();
    let mut log: Vec<String> = Vec::new();
    for _ in 0..400 {
        now += rng.gen_range(0..300);
        match rng.gen_range(0..10) {
            0..=3 => {
                for w in f.next_batch(now, 4).unwrap() {
                    let (host, o) = match w {
                        WorkItem::Robots(r) => (host_of(&r.url), Out::Robots(r)),
                        WorkItem::Page(p) => (host_of(&p.url), Out::Page(p)),
                    };
                    let need = if host == "slow.test" && delay_known {
                        CRAWL_DELAY_MS
                    } else {
                        GAP_MS
                    };
                    log.push(format!("{now}: lease {host} (need {need})"));
                    if let Some(&a) = answered.get(&host) {
                        assert!(
                            now >= a + need,
                            "seed {seed}: {host} asked {} ms after its last answer (gap {need})\n{}",
                            now - a,
                            log.join("\n")
                        );
                    }
                    out.push((host, o));
                }
            }
            4..=7 if !out.is_empty() => {
                let (host, o) = out.swap_remove(rng.gen_range(0..out.len()));
                now += 1;
                answered.insert(host.clone(), now);
                log.push(format!("{now}: answer {host}"));
                match o {
                    Out::Robots(r) => {
                        let body = if host == "slow.test" {
                            "User-agent: *\nCrawl-delay: 2\n"
                        } else {
                            "User-agent: *\nAllow: /\n"
                        };
                        let outcome = RobotsFetchOutcome::Success {
                            status: 200,
                            body: body.as_bytes().to_vec(),
                            max_age: None,
                        };
                        if f.complete_robots(&r, &outcome, 5, now).is_ok() && host == "slow.test" {
                            delay_known = true;
                        }
                    }
                    Out::Page(p) => {
                        f.complete(p.id, PageOutcome::Done { response_ms: 5 }, now)
                            .unwrap();
                    }
                }
            }
            8 => {
                // killed: what was in flight may have been answered right before
                for (host, _) in out.drain(..) {
                    answered.insert(host, now);
                }
                let pending = store.unflushed.lock().len();
                let keep = rng.gen_range(0..=pending);
                log.push(format!(
                    "{now}: kill (keeping {keep} of {pending} unflushed)"
                ));
                let image = Arc::new(store.crash_keeping(keep));
                std::mem::forget(f);
                store = image;
                f = Frontier::open_store(cfg.clone(), store.clone(), RobotsEngine::default())
                    .unwrap();
                f.hold_hosts_after_restart(now);
            }
            _ => {}
        }
    }
}

#[test]
fn no_gap_is_broken_across_random_kills() {
    for seed in 0..300 {
        run(seed);
    }
}

/// The wall clock set back an hour between two runs: the gap and the back-off the first
/// run stored end an hour and more after the second run's clock says it is. The restart
/// holds the host for its gap, and the backing-off host for its longest back-off, not for
/// the hour.
#[test]
fn a_clock_set_back_between_runs_holds_hosts_for_their_gap_not_the_step() {
    let mut cfg = config(false);
    cfg.backoff_base_ms = 2_000;
    cfg.backoff_max_ms = 4_000;
    cfg.retry_after_cap_ms = 8_000;
    let store: Arc<MemStore> = Arc::new(MemStore::new());
    let f = Frontier::open_store(cfg.clone(), store.clone(), RobotsEngine::default()).unwrap();
    crate::tests::allow_all(&f, &["a.test", "b.test"], T0);
    let urls: Vec<String> = ["a.test", "b.test"]
        .iter()
        .flat_map(|h| (0..2).map(move |i| format!("http://{h}/p{i}")))
        .collect();
    f.enqueue_batch(&urls, T0).unwrap();
    for w in f.next_batch(T0, 10).unwrap() {
        let WorkItem::Page(p) = w else {
            panic!("robots.txt is known")
        };
        let outcome = match host_of(&p.url).as_str() {
            "a.test" => PageOutcome::Done { response_ms: 5 },
            _ => PageOutcome::Throttled {
                status: 503,
                retry_after: None,
                response_ms: 5,
            },
        };
        f.complete(p.id, outcome, T0 + 10).unwrap();
    }
    drop(f);
    let back = T0 + 20 - 3_600_000;
    let g = Frontier::open_store(cfg, store, RobotsEngine::default()).unwrap();
    g.hold_hosts_after_restart(back);
    let hosts_at = |t: u64| -> Vec<String> {
        let mut v: Vec<String> = g
            .next_batch(t, 10)
            .unwrap()
            .into_iter()
            .map(|w| match w {
                WorkItem::Page(p) => host_of(&p.url),
                WorkItem::Robots(r) => host_of(&r.url),
            })
            .collect();
        v.sort();
        v
    };
    assert!(hosts_at(back + GAP_MS - 1).is_empty(), "inside the gap");
    assert_eq!(
        hosts_at(back + GAP_MS),
        ["a.test"],
        "a host waits its gap, not the hour"
    );
    assert!(
        hosts_at(back + 7_999).is_empty(),
        "inside the longest back-off"
    );
    assert_eq!(
        hosts_at(back + 8_000),
        ["b.test"],
        "a back-off ends by its longest"
    );
}
