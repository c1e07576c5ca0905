//! What this node tells others: its status (for `frontierd cluster status`), its crawl-log
//! records as events; and the broker connection and shard backlogs as metrics.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::{load, per_second, Backoff, EventPublisher, Node};
use tokio::sync::mpsc;

use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::cluster::{BrokerReports, EventPublished};
use crate::internal_events::InternalEvent;

/// Keep the connection gauge and the disconnect counter in step with the client's state.
pub async fn connection_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let c = &sh.metrics.cluster;
    let mut counted = 0;
    loop {
        c.broker_connected
            .set(i64::from(node.connection.is_connected()));
        let now = node.connection.disconnects();
        if now > counted {
            c.broker_disconnects.inc_by(now - counted);
            counted = now;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Publish crawl-log records in order; a broker error holds the record and pauses with
/// back-off (records arriving meanwhile wait in the buffer, or are dropped and counted
/// once it is full).
pub async fn events_loop(sh: Arc<Shared>, node: Arc<Node>, mut rx: mpsc::Receiver<Vec<u8>>) {
    let m = &sh.metrics;
    let publisher = EventPublisher::new(node.js.clone(), node.node_id());
    let mut backoff = Backoff::new("events", publisher.subject().to_string());
    while let Some(record) = rx.recv().await {
        loop {
            match publisher.publish(record.clone()).await {
                Ok(_) => {
                    backoff.ok(&BrokerReports(m));
                    EventPublished.emit(m);
                    break;
                }
                Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
            }
        }
    }
}

/// Every `status_interval`: publish this node's status (owned shards, totals, rates over
/// the interval) and refresh the owned shards' backlog gauges.
pub async fn status_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let m = &sh.metrics;
    let interval = node.settings.status_interval;
    let mut backoff = Backoff::new("status", "node status");
    let mut last = (Instant::now(), 0u64, 0u64, 0u64);
    loop {
        let now = Instant::now();
        let received = load(&node.urls_received);
        let published = load(&node.links_published);
        let pages = m.pages_completed.get();
        let over = now.duration_since(last.0);
        let status = serde_json::json!({
            "node_id": node.node_id(),
            "time_ms": now_ms(),
            "shards": node.settings.lib.shard_map.shards(),
            "owned_shards": node.ownership.held_text(),
            "connected": node.connection.is_connected(),
            "outbox": node.outbox.len(),
            "urls_received": received,
            "links_published": published,
            "pages_completed": pages,
            "in_flight": sh.in_flight.load(Ordering::Relaxed),
            "urls_received_per_s": per_second(received, last.1, over),
            "links_published_per_s": per_second(published, last.2, over),
            "pages_per_s": per_second(pages, last.3, over),
        });
        last = (now, received, published, pages);
        match cluster::publish_node_status(
            &node.js,
            node.node_id(),
            status.to_string().into_bytes(),
        )
        .await
        {
            Ok(()) => backoff.ok(&BrokerReports(m)),
            Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
        }
        for shard in node.ownership.held() {
            let label = vec![("shard".to_string(), shard.to_string())];
            if let Ok(Some(b)) = cluster::shard_backlog(&node.js, shard).await {
                let c = &m.cluster;
                c.shard_pending.get_or_create(&label).set(b.pending as i64);
                c.shard_ack_pending
                    .get_or_create(&label)
                    .set(b.ack_pending as i64);
                c.shard_redelivered
                    .get_or_create(&label)
                    .set(b.redelivered as i64);
            }
        }
        tokio::time::sleep(interval).await;
    }
}
