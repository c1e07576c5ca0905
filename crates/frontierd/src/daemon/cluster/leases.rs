//! `owned_shards = "auto"`: shard leases (docs/cluster.md, "Shard leases"). The rounds, the
//! fencing, the hand-offs and when a shard is released are the cluster crate's
//! ([`cluster::LeaseKeeper`], [`cluster::Handoffs`], [`cluster::hand_off_all`]); here they
//! run, one round and one sweep every third of the lease TTL: a consumer task for each shard
//! taken, stopped for each shard lost or given up, and at the stop everything handed off.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cluster::{Backoff, LeaseError, Node, SweepReport};
use tokio::task::{AbortHandle, JoinSet};

use crate::daemon::cluster::intake::{shard_loop, Taken};
use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::cluster::{
    BrokerReports, ClusterTaskError, ShardLeases, ShardReleased, UrlsHandedOff,
};
use crate::internal_events::InternalEvent;

/// How long the stop may spend handing off (the broker may be down: then the leases run out
/// and the next owner takes over after its hold; the URLs stay in this node's store).
const STOP_HANDOFF: Duration = Duration::from_secs(30);

/// Open the lease buckets, then run rounds until the daemon stops.
pub async fn lease_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let m = &sh.metrics;
    let mut backoff = Backoff::new("leases", "shard leases");
    let every = loop {
        match node.open_leases().await {
            Ok(every) => break every,
            Err(e @ LeaseError::TtlMismatch { .. }) => {
                ClusterTaskError::LeaseTtlMismatch { error: &e }.emit(m);
                node.fail(e.to_string());
                return;
            }
            Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    };
    // the consumer tasks of the shards held: a JoinSet aborts them all when the lease task
    // is aborted at the stop
    let mut tasks = JoinSet::new();
    let mut consumers: HashMap<u32, AbortHandle> = HashMap::new();
    // the hand-offs publish (maybe many URLs, maybe to a slow broker) beside the rounds,
    // which must never wait on them: a late round lets the fences run out
    tasks.spawn(sweep_loop(sh.clone(), node.clone(), every));
    loop {
        let started = tokio::time::Instant::now();
        let round = match node.keeper.lock().await.as_mut() {
            Some(k) => k.round().await,
            None => return, // taken by the stop
        };
        match round {
            Ok(report) => {
                backoff.ok(&BrokerReports(m));
                for &(shard, hold) in &report.gained {
                    // a shard taken from another node: queue what its log has pending
                    let taken = Taken {
                        replay: !report.adopted.contains(&shard),
                        hold,
                    };
                    let task = tasks.spawn(shard_loop(sh.clone(), node.clone(), shard, taken));
                    consumers.insert(shard, task);
                }
                for shard in report.lost.iter().chain(&report.to_release) {
                    consumers.remove(shard).inspect(AbortHandle::abort);
                    if let Some(j) = &node.journal {
                        j.forget(*shard);
                    }
                }
                while tasks.try_join_next().is_some() {}
                node.handoffs.lock().await.give_up(&report.to_release);
                let ownership = &node.ownership;
                ShardLeases {
                    report: &report,
                    ownership,
                }
                .emit(m);
            }
            // the next round comes at its time, not after a growing back-off: a node that
            // retried less often than its TTL would lose leases a recovered broker kept
            Err(e) => backoff.failed(&e, &BrokerReports(m), every),
        }
        tokio::time::sleep_until(started + every).await;
    }
}

/// Hand off the hosts of shards not held, every `every`; release the shards given up whose
/// hosts are all handed off.
async fn sweep_loop(sh: Arc<Shared>, node: Arc<Node>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        report(&sh, &node.sweep(&sh.frontier, now_ms()).await);
    }
}

/// Log and count what a sweep (or the stop's hand-off) did.
fn report(sh: &Shared, r: &SweepReport) {
    let m = &sh.metrics;
    for h in &r.handoffs {
        UrlsHandedOff { handoff: h }.emit(m);
    }
    for &(shard, hold) in &r.released {
        ShardReleased { shard, hold }.emit(m);
    }
    for e in &r.errors {
        ClusterTaskError::HandOff { error: e }.emit(m);
    }
}

/// At the stop, after the last completion: every shard handed off and released, and this
/// node out of the member list, so the others take its shards at once.
pub async fn hand_off_at_stop(sh: &Arc<Shared>, node: &Arc<Node>) {
    match node
        .hand_off_at_stop(&sh.frontier, now_ms(), STOP_HANDOFF)
        .await
    {
        Ok(Some(r)) => report(sh, &r),
        Ok(None) => {}
        Err(_) => ClusterTaskError::HandOff {
            error: &"the broker did not answer within 30 s: the leases run out instead",
        }
        .emit(&sh.metrics),
    }
}
