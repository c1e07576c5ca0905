//! `[cluster]`: this node as one of several over NATS JetStream (docs/cluster.md). The
//! decisions (shard map, message format, acknowledgements) are crates/cluster's; this wires
//! them to the daemon:
//!
//! - intake.rs: one task per owned shard (take messages, commit their URLs to the frontier,
//!   then acknowledge), and the intake router
//! - leases.rs: `owned_shards = "auto"`: the shard lease rounds, a consumer per shard held,
//!   the hand-off of shards given up and of everything at the stop
//! - this node (settings, connection, publisher, the durable outbox of links other nodes
//!   own, events queue) and the `Backoff` of its tasks: the cluster crate's `Node`
//! - status.rs: this node's published status, the shard gauges, crawl-log events
//!
//! Every broker-facing task waits out errors with [`cluster::reconnect_delay`] back-off
//! ([`cluster::Backoff`], its pauses reported as internal events) and never stops the
//! local crawl.

pub mod intake;
pub mod leases;
pub mod status;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cluster::{Backoff, Node, UrlRecord};
use frontier::EnqueueItem;
use tokio::task::JoinSet;

use crate::daemon::offer::Offer;
use crate::daemon::shared::Shared;
use crate::internal_events::cluster::{
    BrokerReports, ClusterTaskError, DoneUrlsSkipped, LinksRouted, OutboxEntryDamaged,
    ShardLogAppended, StreamsReady, Unroutable, UrlsPublished,
};
use crate::internal_events::InternalEvent;

use cluster::PUBLISH_BATCH;

/// The fetcher's send gate in a leased cluster: a request goes only while its shard is open
/// to this node ([`Node::may_send_to_origin`]).
pub struct ShardSendGate(pub Arc<Node>);

impl fetcher::SendGate for ShardSendGate {
    fn may_send(&self, origin: &str) -> bool {
        self.0.may_send_to_origin(origin)
    }
}

impl Shared {
    /// Queue what a page led to (links, a redirect target): URLs of shards this node owns
    /// go to the frontier as on a single node; the others go to the durable outbox, to be
    /// published to their owners' shard subjects (never fetched here). Durable on return.
    pub async fn queue_discovered(self: &Arc<Self>, items: Vec<EnqueueItem>) -> Result<()> {
        let Some(node) = &self.cluster else {
            self.offer(Offer::found(items)).await?;
            return Ok(());
        };
        let (mut local, remote): (Vec<EnqueueItem>, Vec<EnqueueItem>) =
            items.into_iter().partition(|i| node.owns_url(&i.url));
        if let Some(j) = &node.journal {
            // a page a shard's last holder fetched is not fetched again here
            let urls = j.drop_done(&mut local, |i| &i.url) as u64;
            DoneUrlsSkipped { shard: None, urls }.emit(&self.metrics);
        }
        LinksRouted {
            local: local.len() as u64,
            remote: remote.len() as u64,
        }
        .emit(&self.metrics);
        if !remote.is_empty() {
            let records: Vec<UrlRecord> = remote.into_iter().map(UrlRecord::from).collect();
            let n = node.clone();
            tokio::task::spawn_blocking(move || n.outbox.push(&records))
                .await
                .context("outbox task")??;
            self.metrics
                .cluster
                .outbox_urls
                .set(node.outbox.len() as i64);
            node.outbox_kick.notify_one();
        }
        if !local.is_empty() {
            self.offer(Offer::found(local)).await?;
        }
        Ok(())
    }
}

/// Start the cluster tasks: set up the streams (retrying until the broker answers), then one
/// consumer task per owned shard, the router, the outbox publisher, the events publisher and
/// the status task. The returned task owns them all: aborting it ends them.
pub fn start(sh: Arc<Shared>, node: Arc<Node>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tasks = JoinSet::new();
        // the outbox needs no streams to be set up to be published (publishes fail until the
        // broker is there; acknowledged ones are in the stream)
        tasks.spawn(publish_loop(sh.clone(), node.clone()));
        tasks.spawn(status::connection_loop(sh.clone(), node.clone()));
        let mut backoff = Backoff::new("setup", "streams");
        loop {
            match cluster::ensure_streams(&node.js, &node.settings.lib).await {
                Ok(()) => break,
                Err(e @ cluster::BrokerError::ShardCountMismatch { .. }) => {
                    ClusterTaskError::ShardsMismatch { error: &e }.emit(&sh.metrics);
                    node.fail(e.to_string());
                    return;
                }
                Err(e) => backoff.pause(&e, &BrokerReports(&sh.metrics)).await,
            }
        }
        backoff.ok(&BrokerReports(&sh.metrics));
        StreamsReady.emit(&sh.metrics);
        match &node.settings.lib.owned {
            Some(owned) => {
                for shard in owned.iter() {
                    let fixed = intake::Taken::default();
                    tasks.spawn(intake::shard_loop(sh.clone(), node.clone(), shard, fixed));
                }
            }
            None => {
                tasks.spawn(leases::lease_loop(sh.clone(), node.clone()));
                tasks.spawn(journal_loop(sh.clone(), node.clone()));
            }
        }
        if node.settings.intake_router {
            tasks.spawn(intake::router_loop(sh.clone(), node.clone()));
        }
        if let Some(rx) = node.take_events() {
            tasks.spawn(status::events_loop(sh.clone(), node.clone(), rx));
        }
        tasks.spawn(status::status_loop(sh.clone(), node.clone()));
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                if e.is_panic() {
                    ClusterTaskError::Panicked { error: &e }.emit(&sh.metrics);
                }
            }
        }
    })
}

/// How often the entries waiting for the shard logs are appended (sooner when many wait):
/// a node that dies leaves the pages it fetched in its last this-long unmarked in the logs,
/// so their next holder fetches them again.
const JOURNAL_EVERY: Duration = Duration::from_millis(50);

/// Append the entries waiting for the shard logs (URLs queued here, pages fetched for good)
/// every [`JOURNAL_EVERY`], or at once when many wait; a broker error pauses it with
/// back-off, the entries wait.
async fn journal_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let Some(journal) = &node.journal else { return };
    let m = &sh.metrics;
    let mut backoff = Backoff::new("routing", "shard logs");
    loop {
        tokio::select! {
            _ = journal.kick.notified() => {}
            _ = tokio::time::sleep(JOURNAL_EVERY) => {}
        }
        match node.append_journal().await {
            Ok(n) => {
                backoff.ok(&BrokerReports(m));
                ShardLogAppended {
                    entries: n.entries as u64,
                }
                .emit(m);
            }
            // tried again at the next tick, not after a growing back-off: a shard's next
            // holder reads its log when its takeover hold ends, and the pages fetched here
            // before the broker failed should be marked done by then
            Err(e) => backoff.failed(&e, &BrokerReports(m), JOURNAL_EVERY),
        }
    }
}

/// Publish the outbox to the owners' shard subjects, oldest first, whenever links arrive
/// (and every second); a broker error pauses it with back-off, the links stay.
pub async fn publish_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let m = &sh.metrics;
    let mut backoff = Backoff::new("routing", "outbox");
    loop {
        let n = node.clone();
        let taken = tokio::task::spawn_blocking(move || n.outbox.oldest(PUBLISH_BATCH)).await;
        let entries = match taken {
            Ok(Ok(taken)) => {
                for key in &taken.damaged {
                    OutboxEntryDamaged { key }.emit(m);
                }
                taken.links
            }
            Ok(Err(e)) => {
                let error = format!("{e:#}");
                ClusterTaskError::OutboxRead { error: &error }.emit(m);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => {
                ClusterTaskError::OutboxTask { error: &e }.emit(m);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        m.cluster.outbox_urls.set(node.outbox.len() as i64);
        if entries.is_empty() {
            tokio::select! {
                _ = node.outbox_kick.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            continue;
        }
        let (keys, records): (Vec<Vec<u8>>, Vec<UrlRecord>) = entries.into_iter().unzip();
        match node.publisher.publish(records).await {
            Ok(report) => {
                backoff.ok(&BrokerReports(m));
                for e in &report.unroutable {
                    Unroutable { error: e }.emit(m);
                }
                UrlsPublished {
                    source: "links",
                    urls: report.published as u64,
                }
                .emit(m);
                node.links_published
                    .fetch_add(report.published as u64, Ordering::Relaxed);
                let n = node.clone();
                match tokio::task::spawn_blocking(move || n.outbox.remove(&keys)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        let error = format!("{e:#}");
                        ClusterTaskError::OutboxRemove { error: &error }.emit(m)
                    }
                    Err(e) => ClusterTaskError::OutboxTask { error: &e }.emit(m),
                }
                m.cluster.outbox_urls.set(node.outbox.len() as i64);
            }
            // every link stays in the outbox (those acknowledged are published again later,
            // absorbed by their owner's seen-set)
            Err(failure) => backoff.pause(&failure, &BrokerReports(m)).await,
        }
    }
}
