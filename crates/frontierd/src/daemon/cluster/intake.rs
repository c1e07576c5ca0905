//! URLs in from the broker: one task per owned shard takes messages, commits their URLs to
//! the frontier (durable on return: the frontier's group commit), and only then
//! acknowledges them; and the intake router, which splits lists published to
//! `frontierd.intake` by shard.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cluster::{Backoff, IntakeError, IntakeRouter, Node, ShardConsumer};
use frontier::EnqueueItem;

use crate::daemon::offer::Offer;
use crate::daemon::shared::Shared;
use crate::internal_events::cluster::{
    AckFailed, BrokerLineRejected, BrokerReports, ClusterTaskError, IntakeListsRouted,
    ShardBatchCommitted, Unroutable,
};
use crate::internal_events::InternalEvent;

/// Messages taken from a shard per round (each holds up to 256 KiB of URLs).
const SHARD_BATCH: usize = 64;
/// How long one round waits for messages (capped by the library at half the ack wait).
const SHARD_WAIT: Duration = Duration::from_secs(5);
/// Intake lists routed per round.
const ROUTER_BATCH: usize = 16;
/// While free space is low, a shard's messages are given back to come again after this.
const DISK_LOW_REDELIVERY: Duration = Duration::from_secs(30);
/// Time a routing round may take beyond its wait (publishing and acknowledging its lists).
const ROUTER_GRACE: Duration = Duration::from_secs(60);

/// Consume one owned shard until the daemon stops (the task is aborted then: deliveries not
/// yet acknowledged come back after the ack wait, and the seen-set absorbs those whose URLs
/// were committed).
pub async fn shard_loop(sh: Arc<Shared>, node: Arc<Node>, shard: u32) {
    let m = &sh.metrics;
    let mut backoff = Backoff::new("intake", format!("shard {shard}"));
    let consumer = loop {
        match ShardConsumer::open(&node.js, &node.settings.lib, shard).await {
            Ok(c) => break c,
            Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    };
    loop {
        let deliveries = match consumer.next_batch(SHARD_BATCH, SHARD_WAIT).await {
            Ok(d) => d,
            Err(e) => {
                backoff.pause(&e, &BrokerReports(m)).await;
                continue;
            }
        };
        backoff.ok(&BrokerReports(m));
        if deliveries.is_empty() {
            continue;
        }
        if crate::daemon::disk::refuse_intake(&sh, "cluster").is_some() {
            // nothing committed: the broker keeps them and delivers them again later
            for d in &deliveries {
                if let Err(e) = d.nak_with_delay(DISK_LOW_REDELIVERY).await {
                    AckFailed { error: &e }.emit(m);
                }
            }
            continue;
        }
        let source = format!("shard {shard}");
        let mut items: Vec<EnqueueItem> = Vec::new();
        let mut handed: Vec<EnqueueItem> = Vec::new();
        let mut redeliveries = 0;
        for d in &deliveries {
            for rejected in &d.batch.rejected {
                BrokerLineRejected {
                    source: &source,
                    sequence: d.stream_sequence,
                    error: rejected,
                }
                .emit(m);
            }
            if d.is_redelivery() {
                redeliveries += 1;
            }
            for r in &d.batch.records {
                let to = if r.handoff { &mut handed } else { &mut items };
                to.push(EnqueueItem::from(r.clone()));
            }
        }
        let urls = (items.len() + handed.len()) as u64;
        let handed_off = handed.len() as u64;
        // durable on return; rejected URLs are counted and written to the crawl log
        let mut offered = Ok(());
        if !handed.is_empty() {
            let again = Offer {
                again: true,
                ..Offer::submitted(handed)
            };
            offered = sh.offer(again).await.map(|_| ());
        }
        if offered.is_ok() {
            offered = sh.offer(Offer::submitted(items)).await.map(|_| ());
        }
        if let Err(e) = offered {
            // not acknowledged: the messages come back after the ack wait
            let error = format!("{e:#}");
            ClusterTaskError::ShardCommit {
                shard,
                error: &error,
            }
            .emit(m);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        ShardBatchCommitted {
            shard,
            messages: deliveries.len() as u64,
            redeliveries,
            urls,
            handed_off,
        }
        .emit(m);
        node.urls_received.fetch_add(urls, Ordering::Relaxed);
        for d in &deliveries {
            if let Err(e) = d.ack().await {
                AckFailed { error: &e }.emit(m);
            }
        }
    }
}

/// Route lists from `frontierd.intake` until the daemon stops. Every router shares one
/// durable consumer, so each list is routed by one of them.
pub async fn router_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let m = &sh.metrics;
    let mut backoff = Backoff::new("router", cluster::INTAKE_SUBJECT);
    let router = loop {
        match IntakeRouter::open(&node.js, node.publisher.clone(), node.settings.lib.ack_wait).await
        {
            Ok(r) => break r,
            Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    };
    loop {
        // a pull request lost with the connection is never answered: give it up (a list
        // taken and not acknowledged comes back after the ack wait)
        let routed = tokio::time::timeout(
            SHARD_WAIT + ROUTER_GRACE,
            router.route_once(ROUTER_BATCH, SHARD_WAIT),
        )
        .await
        .unwrap_or_else(|_| {
            Err(IntakeError::Broker(cluster::BrokerError::IntakeFetch {
                source: format!("no answer within {:?}", SHARD_WAIT + ROUTER_GRACE).into(),
            }))
        });
        match routed {
            Ok(report) => {
                backoff.ok(&BrokerReports(m));
                report_routed(&sh, &report);
            }
            Err(IntakeError::Publish(failure)) => {
                report_routed(&sh, &failure.report);
                backoff.pause(&*failure, &BrokerReports(m)).await;
            }
            Err(e @ IntakeError::Broker(_)) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    }
}

fn report_routed(sh: &Shared, report: &cluster::IntakeReport) {
    let m = &sh.metrics;
    for (sequence, rejected) in &report.rejected {
        BrokerLineRejected {
            source: "intake",
            sequence: *sequence,
            error: rejected,
        }
        .emit(m);
    }
    for (_, e) in &report.unroutable {
        Unroutable { error: e }.emit(m);
    }
    if report.messages > 0 {
        IntakeListsRouted {
            lists: report.messages as u64,
            urls: report.routed as u64,
        }
        .emit(m);
    }
}
