//! Hosts with only a few entries at a fold share packs (`p` keys, pack.rs): a key per
//! several dozen hosts instead of one each; every URL reads back once and in its host's
//! order, across a reopen and a crash, and a pack goes once its last host is served.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::store::{packed, Store};
use crate::*;

const T0: u64 = 1_700_000_000_000;

fn config(dir: &std::path::Path) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(3);
    // fold after every batch, however thin
    c.intake_buffer_bytes = 1;
    c.max_in_flight_per_host = 64;
    c
}

/// `thin` hosts of one URL each and `dense` hosts of sixty (`t<i>.test`, `d<i>.test`): a
/// dense host's entries fill more than a quarter of a value.
fn urls(thin: usize, dense: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..thin).map(|i| format!("http://t{i}.test/p/0")).collect();
    for k in 0..60 {
        v.extend((0..dense).map(|i| format!("http://d{i}.test/p/{k}")));
    }
    v
}

fn allow(f: &Frontier, thin: usize, dense: usize) {
    let origins: Vec<String> = (0..thin)
        .map(|i| format!("http://t{i}.test"))
        .chain((0..dense).map(|i| format!("http://d{i}.test")))
        .collect();
    crate::tests::allow_all(
        f,
        &origins
            .iter()
            .map(|o| o.trim_start_matches("http://"))
            .collect::<Vec<_>>(),
        T0,
    );
}

/// Up to `rounds` lease calls at `T0 + round`, every page completed as done: the URLs.
fn crawl(f: &Frontier, rounds: u64, max: usize) -> Vec<String> {
    let mut got = Vec::new();
    for t in 0..rounds {
        let leases = crate::tests::pages(f.next_batch(T0 + 10 + t, max).unwrap());
        if leases.is_empty() {
            break;
        }
        let done: Vec<(LeaseId, PageOutcome)> = leases
            .iter()
            .map(|p| (p.id, PageOutcome::Done { response_ms: 1 }))
            .collect();
        got.extend(leases.into_iter().map(|p| p.url));
        f.complete_batch(&done, T0 + 10 + t).unwrap();
    }
    got
}

fn count(store: &dyn Store, prefix: &[u8]) -> usize {
    store.scan_prefix(prefix).count()
}

/// Waits (5 s at most) for the deletes handed to the reclaimer's thread.
fn until_gone(store: &dyn Store, prefix: &[u8]) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while count(store, prefix) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    count(store, prefix)
}

/// Each host's URLs in the order they came, and none twice.
fn assert_each_once_in_order(got: &[String], want: &[String]) {
    let mut seen = BTreeSet::new();
    for u in got {
        assert!(seen.insert(u.clone()), "{u} handed out twice");
    }
    let want_set: BTreeSet<String> = want.iter().cloned().collect();
    assert_eq!(seen, want_set, "every URL once");
    let mut by_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for u in got {
        let (host, _) = u.rsplit_once("/p/").unwrap();
        by_host.entry(host).or_default().push(u);
    }
    for (host, us) in by_host {
        let order: Vec<&str> = want
            .iter()
            .filter(|u| u.starts_with(&format!("{host}/")))
            .map(String::as_str)
            .collect();
        assert_eq!(us, order, "{host}'s order");
    }
}

#[test]
fn hosts_of_a_few_urls_share_packs_and_each_url_goes_once_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (thin, dense) = (3_000, 100);
    let all = urls(thin, dense);
    {
        let f = Frontier::open(config(dir.path())).unwrap();
        let r = f.enqueue_batch(&all, T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
        assert!(!f.folding(), "folded");
        // the dense hosts get segments of their own, the thin ones share packs
        assert_eq!(count(f.store.as_ref(), b"q"), dense);
        let packs = count(f.store.as_ref(), b"p");
        assert!(
            (1..=thin / 40).contains(&packs),
            "{packs} packs for {thin} hosts"
        );
        for kv in f.store.scan_prefix(b"p") {
            let (_, v) = kv.unwrap();
            assert!(
                v.len() <= packed::VALUE_TARGET_BYTES,
                "a pack of {}",
                v.len()
            );
        }
        assert_eq!(f.inner.lock().packs.len(), packs);
    }
    let f = Frontier::open(config(dir.path())).unwrap();
    assert_eq!(f.inner.lock().packs.len(), count(f.store.as_ref(), b"p"));
    // what an operator's look at a host reads from its pack
    assert_eq!(f.queued_urls("t7.test").unwrap(), ["http://t7.test/p/0"]);
    allow(&f, thin, dense);
    let got = crawl(&f, 100, 1_000);
    assert_each_once_in_order(&got, &all);
    assert_eq!(
        until_gone(f.store.as_ref(), b"p"),
        0,
        "every pack served and gone"
    );
    assert_eq!(until_gone(f.store.as_ref(), b"q"), 0);
    assert_eq!(f.inner.lock().packs.len(), 0);
}

/// Killed half way through the packed hosts: what was completed (and flushed) does not
/// come back, the rest does, once; the packs that still hold a host's URL stay until it
/// goes.
#[test]
fn a_crash_keeps_every_packed_url_not_done_and_no_pack_outlives_its_hosts() {
    let sim = Arc::new(crate::tests::CrashSim::default());
    let mut c = config(std::path::Path::new("/nonexistent-pack-crash"));
    c.seed = Some(4);
    let (thin, dense) = (2_000, 0);
    let all = urls(thin, dense);
    let f = Frontier::open_store(c.clone(), sim.clone(), RobotsEngine::default()).unwrap();
    f.enqueue_batch(&all, T0).unwrap();
    allow(&f, thin, dense);
    let packs = count(sim.durable.as_ref(), b"p");
    assert!(packs > 1, "{packs} packs");
    let before = crawl(&f, 3, 300);
    assert_eq!(before.len(), 900);
    // killed: only what was flushed is left
    std::mem::forget(f);
    let g = Frontier::open_store(c, sim.durable.clone(), RobotsEngine::default()).unwrap();
    let kept = g.inner.lock().packs.len();
    assert!(0 < kept && kept <= packs, "{kept} of {packs} packs kept");
    let after = crawl(&g, 100, 1_000);
    let both: Vec<String> = before.iter().chain(&after).cloned().collect();
    assert_each_once_in_order(&both, &all);
    assert_eq!(until_gone(sim.durable.as_ref(), b"p"), 0);
}
