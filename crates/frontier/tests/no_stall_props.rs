//! Issue 33, "no stall, ever": random sequences of leases, expiries, reports (done, a
//! URL's failure, a host's failure, late), re-puts and restarts against a small model.
//! Whatever came before, once the fetcher behaves (reports everything it gets), every URL
//! put ends: completed or given up, none left queued and none out. A host with an
//! eligible URL and a free slot that is never served again fails this (with the expired
//! leases' address slots left taken, it failed within a few cases).

use std::collections::{BTreeMap, BTreeSet};

use frontier::*;
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;
const HOSTS: [&str; 3] = ["http://a.test", "http://b.test", "http://c.test"];

#[derive(Debug, Clone)]
enum Op {
    /// Put URL `n` of host `h` (a re-put of a known URL is a duplicate).
    Put(usize, u8),
    /// GetURLs: up to `max` leases of `lease_ms`.
    Lease(usize, u64),
    /// Report the `i`-th lease out: 0 done, 1 the URL's failure, 2 the host's failure.
    Report(usize, u8),
    /// Report a lease already expired (a slow fetch), if any.
    Late(usize),
    /// Time passes.
    Advance(u64),
    /// kill -9 and reopen (what was not flushed is lost; leases come back).
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..6u8).prop_map(|(h, n)| Op::Put(h, n)),
        3 => (1..4usize, prop_oneof![Just(200u64), Just(1_000), Just(5_000)]).prop_map(|(m, l)| Op::Lease(m, l)),
        3 => (0..4usize, 0..3u8).prop_map(|(i, k)| Op::Report(i, k)),
        1 => (0..4usize).prop_map(Op::Late),
        2 => (1..3_000u64).prop_map(Op::Advance),
        1 => Just(Op::Restart),
    ]
}

fn config(dir: &std::path::Path) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(11);
    c.backoff_base_ms = 100;
    c.backoff_max_ms = 1_000;
    c.max_attempts = 4;
    c
}

fn open(dir: &std::path::Path, now: u64) -> Frontier {
    let f = Frontier::open(config(dir)).unwrap();
    let allow: Vec<(&str, RobotsFetchOutcome)> = HOSTS
        .iter()
        .map(|h| (*h, RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&allow, now).unwrap();
    f
}

fn any(_: &str) -> bool {
    true
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut now = T0;
    let mut f = open(dir.path(), now);
    // the model: URLs put (acknowledged, so durable) and not yet ended
    let mut put: BTreeSet<String> = BTreeSet::new();
    let mut ended: BTreeSet<String> = BTreeSet::new();
    let mut out: Vec<PageLease> = Vec::new();
    let mut expired: Vec<PageLease> = Vec::new();
    for op in ops {
        match op {
            Op::Put(h, n) => {
                let url = format!("{}/{n}", HOSTS[h]);
                f.enqueue_batch(&[url.as_str()], now).unwrap();
                put.insert(url);
            }
            Op::Lease(max, lease_ms) => {
                for l in f.expire_leases(now).unwrap() {
                    if let Some(i) = out.iter().position(|p| p.id == l) {
                        expired.push(out.swap_remove(i));
                    }
                }
                for item in f.lease_for(now, max, lease_ms, &mut any).unwrap() {
                    if let WorkItem::Page(p) = item {
                        // the three hosts share one address (its slots: 4 by default)
                        f.note_address(p.id.host_id, "127.0.0.9".parse().unwrap(), now)
                            .unwrap();
                        // never two leases of one host at once (one slot per host)
                        let host = p.url.split('/').nth(2).unwrap_or("").to_string();
                        prop_assert!(
                            !out.iter()
                                .any(|o| o.url.split('/').nth(2) == Some(host.as_str())),
                            "two leases of {host} out"
                        );
                        expired.retain(|e| e.id != p.id);
                        out.push(p);
                    }
                }
            }
            Op::Report(i, kind) => {
                if out.is_empty() {
                    continue;
                }
                let p = out.remove(i % out.len());
                let outcome = match kind {
                    0 => PageOutcome::Done { response_ms: 1 },
                    1 => PageOutcome::Failed {
                        reason: "500".into(),
                    },
                    _ => PageOutcome::Unreachable {
                        reason: "reset".into(),
                    },
                };
                if f.complete(p.id, outcome.clone(), now).is_ok() && kind == 0 {
                    ended.insert(p.url.clone());
                }
            }
            Op::Late(i) => {
                if expired.is_empty() {
                    continue;
                }
                let p = expired.remove(i % expired.len());
                if f.complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                    .is_ok()
                {
                    ended.insert(p.url.clone());
                }
            }
            Op::Advance(ms) => now += ms,
            Op::Restart => {
                drop(f);
                f = open(dir.path(), now);
                out.clear();
                expired.clear();
            }
        }
    }
    // from here the fetcher behaves: everything it gets is reported done at once
    out.clear();
    expired.clear();
    for _ in 0..400 {
        now += 1_000;
        f.expire_leases(now).unwrap();
        for item in f.lease_for(now, 10, 5_000, &mut any).unwrap() {
            if let WorkItem::Page(p) = item {
                f.complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                    .unwrap();
                ended.insert(p.url.clone());
            }
        }
    }
    let totals = f.host_totals(now);
    prop_assert_eq!(totals.in_flight, 0, "leases still out");
    prop_assert_eq!(totals.queued, 0, "URLs still queued: a stalled host");
    let mut gave_up = BTreeMap::new();
    for url in &put {
        if !ended.contains(url) {
            let d = f.drop_record(url).unwrap();
            gave_up.insert(url.clone(), d.map(|d| d.reason));
        }
    }
    for (url, reason) in &gave_up {
        prop_assert_eq!(
            *reason,
            Some(DropReason::GaveUp),
            "{} neither completed nor given up",
            url
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn every_url_put_ends_whatever_the_fetcher_did(ops in prop::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}
