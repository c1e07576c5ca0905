//! Politeness across crashes, against a model of what the site sees: random dispatches,
//! answers and kills (a kill keeps what was flushed and any prefix of the writes after
//! it, as sled's log does), each restart held at once. Every request to a host waits its
//! gap after the host's previous answer (the crawl-delay once robots.txt gave one and its
//! answer was acknowledged); a request in flight at a kill counts as answered at the kill.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::store::{Batch, MemStore, Store, StoreError};
const T0: u64 = 1_700_000_000_000;
use crate::*;

/// A store whose crash image is what was flushed plus a prefix of the later writes.
#[derive(Default)]
struct PrefixCrash {
    live: MemStore,
    unflushed: Mutex<Vec<Batch>>,
    durable: MemStore,
}

impl Store for PrefixCrash {
    crate::store::delegate_store_reads!(live);
    fn apply(&self, batch: Batch) -> std::result::Result<(), StoreError> {
        self.unflushed.lock().push(batch.clone());
        self.live.apply(batch)
    }
    fn flush(&self) -> std::result::Result<(), StoreError> {
        for b in self.unflushed.lock().drain(..) {
            self.durable.apply(b)?;
        }
        Ok(())
    }
}

impl PrefixCrash {
    /// The store a kill leaves: the durable copy and the first `keep` later writes (all
    /// of them with `keep` past the end), as a new store.
    fn crash(&self, keep: usize) -> PrefixCrash {
        let image = MemStore::new();
        let mut all = Batch::new();
        for kv in self.durable.scan_prefix(b"") {
            let (k, v) = kv.expect("a stored key");
            all.put(k, v);
        }
        image.apply(all).expect("copied");
        for b in self.unflushed.lock().iter().take(keep) {
            image.apply(b.clone()).expect("replayed");
        }
        let durable = MemStore::new();
        let mut all = Batch::new();
        for kv in image.scan_prefix(b"") {
            let (k, v) = kv.expect("a stored key");
            all.put(k, v);
        }
        durable.apply(all).expect("copied");
        PrefixCrash {
            live: image,
            unflushed: Mutex::new(Vec::new()),
            durable,
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
    let mut store = Arc::new(PrefixCrash::default());
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
                let image = Arc::new(store.crash(keep));
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
