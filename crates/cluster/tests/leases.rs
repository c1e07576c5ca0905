//! Shard leases against a real `nats-server -js` (common/mod.rs: skipped with a message
//! when the binary is absent, a failure under CI=1): nodes split the shards fairly, a node
//! that stops renewing loses its shards to the others after the TTL (who then hold them for
//! the takeover hold), a released shard carries its hold, and two nodes never hold one shard.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::{LeaseKeeper, LeaseStore, Ownership, ShardMap};
use common::{node_settings, NatsServer};
use frontier::{DispatchGate, PolitenessKeyMode};

const SHARDS: u32 = 8;
const TTL: Duration = Duration::from_secs(3);
const TAKEOVER: Duration = Duration::from_secs(20);

async fn keeper(server: &NatsServer, node: &str) -> (LeaseKeeper, Arc<Ownership>) {
    let settings = node_settings(server, node, SHARDS, "0-7");
    let (client, _) = cluster::connect(&settings).await.expect("connect");
    let js = cluster::jetstream(client);
    let store = LeaseStore::open(&js, TTL, 1).await.expect("lease buckets");
    let map = ShardMap::new(SHARDS, PolitenessKeyMode::Host).unwrap();
    let ownership = Arc::new(Ownership::leased(map));
    (
        LeaseKeeper::new(store, node, TTL, TAKEOVER, ownership.clone()),
        ownership,
    )
}

/// A host name of `shard`.
fn key_of(shard: u32) -> String {
    let map = ShardMap::new(SHARDS, PolitenessKeyMode::Host).unwrap();
    (0..10_000)
        .map(|i| format!("h{i}.site.test"))
        .find(|k| map.shard_of_key(k) == shard)
        .unwrap()
}

fn held(o: &Ownership) -> BTreeSet<u32> {
    o.held().into_iter().collect()
}

#[tokio::test]
async fn nodes_split_the_shards_and_a_silent_nodes_shards_are_taken_over_after_the_ttl() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (mut a, oa) = keeper(&server, "a").await;
    let (mut b, ob) = keeper(&server, "b").await;
    // a alone first: it takes every shard (b is not a member yet)
    let r = a.round().await.unwrap();
    assert_eq!(r.gained.len(), 8, "{r:?}");
    assert!(
        r.gained.iter().all(|(_, hold)| hold.is_zero()),
        "never claimed: no hold"
    );
    // b joins: a gives up half (to hand off, then release), b takes them once released
    let mut b_last = Instant::now();
    for _ in 0..4 {
        let rb = b.round().await.unwrap();
        b_last = Instant::now();
        let ra = a.round().await.unwrap();
        for s in ra.to_release {
            a.release(s, Duration::from_millis(1500)).await.unwrap();
        }
        assert!(rb.lost.is_empty() && ra.lost.is_empty());
    }
    let (ha, hb) = (held(&oa), held(&ob));
    assert_eq!((ha.len(), hb.len()), (4, 4), "a {ha:?} b {hb:?}");
    assert!(ha.is_disjoint(&hb), "a {ha:?} b {hb:?}");
    // b took released shards: each waits the hold the releaser gave (1.5 s), not more
    let s = *hb.first().unwrap();
    let wait = ob.closed_for(&key_of(s)).expect("in the release hold");
    assert!(wait <= 1500, "{wait}");
    assert!(
        oa.closed_for(&key_of(s)).is_some(),
        "a: not its shard any more"
    );

    // b goes silent (no rounds: dead, or SIGSTOPped). Its fence passes first...
    let shard_of_b = *hb.first().unwrap();
    tokio::time::sleep(TTL - TTL / 3 + Duration::from_millis(100)).await;
    assert!(
        ob.closed_for(&key_of(shard_of_b)).is_some(),
        "b's own gate shut {:?} after its last renewal",
        b_last.elapsed()
    );
    // ... and a may take b's shards only once their revision has been unchanged a whole TTL
    // on a's clock: rounds every TTL/3, as the daemon runs them
    let mut first_taken = None;
    while held(&oa).len() < 8 {
        let r = a.round().await.unwrap();
        assert!(
            r.gained.iter().all(|(_, hold)| *hold == TAKEOVER),
            "ran out: the takeover hold, {r:?}"
        );
        if !r.gained.is_empty() && first_taken.is_none() {
            first_taken = Some(b_last.elapsed());
        }
        assert!(b_last.elapsed() < TTL * 4, "a never took b's shards");
        tokio::time::sleep(TTL / 3).await;
    }
    let taken = first_taken.unwrap();
    assert!(taken >= TTL, "taken {taken:?} after b's last renewal");
    let wait = oa
        .closed_for(&key_of(shard_of_b))
        .expect("a holds b's shard after its hold");
    assert!(wait > 15_000, "{wait}");

    // b wakes: its next round finds its shards lost, and it claims nothing a holds
    let r = b.round().await.unwrap();
    assert_eq!(r.lost.len(), 4, "{r:?}");
    assert!(held(&ob).is_disjoint(&held(&oa)));
    assert!(ob.closed_for(&key_of(shard_of_b)).is_some());
}

#[tokio::test]
async fn two_nodes_claiming_at_once_never_both_hold_a_shard() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (mut a, oa) = keeper(&server, "a").await;
    let (mut b, ob) = keeper(&server, "b").await;
    // both start at once: each may see only itself at first and reach for every shard
    for _ in 0..6 {
        let (ra, rb) = tokio::join!(a.round(), b.round());
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        for s in ra.to_release {
            a.release(s, Duration::ZERO).await.unwrap();
        }
        for s in rb.to_release {
            b.release(s, Duration::ZERO).await.unwrap();
        }
        assert!(
            held(&oa).is_disjoint(&held(&ob)),
            "a {:?} b {:?}",
            held(&oa),
            held(&ob)
        );
    }
    assert_eq!(held(&oa).len() + held(&ob).len(), 8);
    assert_eq!((held(&oa).len(), held(&ob).len()), (4, 4));
}

#[tokio::test]
async fn a_clean_stop_hands_every_shard_to_the_others_at_once() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (mut a, oa) = keeper(&server, "a").await;
    let (mut b, ob) = keeper(&server, "b").await;
    a.round().await.unwrap();
    for _ in 0..4 {
        let rb = b.round().await.unwrap();
        let ra = a.round().await.unwrap();
        for s in ra.to_release.into_iter().chain(rb.to_release) {
            let _ = a.release(s, Duration::ZERO).await;
            let _ = b.release(s, Duration::ZERO).await;
        }
    }
    assert_eq!(held(&ob).len(), 4);
    // b stops cleanly: releases everything with the wait its hosts were owed, leaves
    for s in b.release_all() {
        b.release(s, Duration::from_millis(700)).await.unwrap();
    }
    b.leave().await.unwrap();
    assert!(held(&ob).is_empty());
    // a's next round takes them all at once (no TTL to wait), each held the 700 ms
    let started = Instant::now();
    let r = a.round().await.unwrap();
    assert_eq!(r.gained.len(), 4, "{r:?}");
    assert!(r
        .gained
        .iter()
        .all(|(_, h)| *h == Duration::from_millis(700)));
    assert!(started.elapsed() < TTL);
    assert_eq!(held(&oa).len(), 8);
}

#[tokio::test]
async fn a_node_restarted_within_the_ttl_adopts_its_leases_at_once() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (mut a, _) = keeper(&server, "a").await;
    let r = a.round().await.unwrap();
    assert_eq!(r.gained.len(), 8);
    drop(a);
    // the same node id, a new process (a fresh keeper and gate): its first round takes the
    // leases that still name it, with no hold and no wait for the TTL
    let (mut again, o) = keeper(&server, "a").await;
    let r = again.round().await.unwrap();
    assert_eq!(r.gained.len(), 8, "{r:?}");
    assert!(r.gained.iter().all(|(_, hold)| hold.is_zero()));
    assert_eq!(o.closed_for(&key_of(3)), None);
}
