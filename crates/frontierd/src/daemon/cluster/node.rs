//! This node's side of the cluster: its settings, the broker connection, the publisher of
//! links other nodes own and its durable outbox, the crawl-log events queue, and what a
//! broker-facing task needs to wait out errors (`Backoff`) and report rates. Holds no daemon
//! state: the tasks that join it to the daemon are in `mod.rs`, `intake.rs`, `status.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cluster::{ConnectionState, JetStream, Publisher};
use tokio::sync::{mpsc, Notify};

use crate::config::cluster::ClusterNodeSettings;
use crate::internal_events::cluster::{BrokerPaused, BrokerResumed, EventDropped};
use crate::internal_events::InternalEvent;
use crate::metrics::Metrics;
use cluster::Outbox;

/// Crawl-log records buffered for publishing; beyond this (broker down or slow) they are
/// counted as dropped: the crawl log file stays the record.
const EVENT_BUFFER: usize = 10_000;

/// This node's cluster side, shared by the tasks and the workers.
pub struct ClusterNode {
    pub settings: ClusterNodeSettings,
    pub js: JetStream,
    pub connection: Arc<ConnectionState>,
    pub publisher: Publisher,
    pub outbox: Outbox,
    /// Links were written to the outbox: publish them now.
    pub outbox_kick: Notify,
    max_url_len: usize,
    pub(super) events: Option<mpsc::Sender<Vec<u8>>>,
    pub(super) events_rx: Mutex<Option<mpsc::Receiver<Vec<u8>>>>,
    /// A reason the daemon must stop (the broker's streams were made for another shard
    /// count); `failed` wakes run.rs.
    pub(super) fatal: Mutex<Option<String>>,
    pub failed: Notify,
    /// Counted for the rates in this node's status.
    pub urls_received: AtomicU64,
    pub links_published: AtomicU64,
}

impl ClusterNode {
    /// Connect in the background (the daemon starts and crawls locally while the broker is
    /// down) and open the outbox in the data directory.
    pub async fn open(
        settings: ClusterNodeSettings,
        data_dir: &std::path::Path,
        max_url_len: usize,
    ) -> Result<ClusterNode> {
        let path = data_dir.join("cluster-outbox");
        let outbox = tokio::task::spawn_blocking(move || Outbox::open(&path))
            .await
            .context("outbox open task")??;
        let (client, connection) = cluster::connect_in_background(&settings.lib)
            .await
            .context("[cluster]")?;
        let js = cluster::jetstream(client.clone());
        let publisher = Publisher::new(js.clone(), settings.lib.shard_map, max_url_len);
        let (events, events_rx) = if settings.publish_events {
            let (tx, rx) = mpsc::channel(EVENT_BUFFER);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        tracing::info!(
            node = %settings.lib.node_id,
            nats = %settings.lib.nats_url,
            shards = settings.lib.shard_map.shards(),
            owned = settings.lib.owned.len(),
            outbox = outbox.len(),
            "cluster mode"
        );
        Ok(ClusterNode {
            settings,
            js,
            connection,
            publisher,
            outbox,
            outbox_kick: Notify::new(),
            max_url_len,
            events,
            events_rx: Mutex::new(events_rx),
            fatal: Mutex::new(None),
            failed: Notify::new(),
            urls_received: AtomicU64::new(0),
            links_published: AtomicU64::new(0),
        })
    }

    pub fn node_id(&self) -> &str {
        &self.settings.lib.node_id
    }

    /// Whether this node owns the shard of `url`; a URL without a shard (it does not
    /// canonicalize) counts as ours, so the frontier refuses and reports it as it always did.
    pub fn owns_url(&self, url: &str) -> bool {
        self.settings
            .lib
            .shard_map
            .shard_of_url(url, self.max_url_len)
            .map_or(true, |shard| self.settings.lib.owned.contains(shard))
    }

    /// Hand a crawl-log record to the events task (never waits).
    pub fn publish_event(&self, record: &str, metrics: &Metrics) {
        if let Some(tx) = &self.events {
            if tx.try_send(record.as_bytes().to_vec()).is_err() {
                EventDropped.emit(metrics);
            }
        }
    }

    /// Stop the daemon with this reason.
    pub(super) fn fail(&self, reason: String) {
        *self.fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        self.failed.notify_one();
    }

    /// The reason given to [`ClusterNode::fail`], if any.
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Back-off of one broker-facing activity: counts the errors of a run, says when to try
/// again, and reports the pause and the resumption.
pub struct Backoff {
    activity: &'static str,
    what: String,
    attempt: usize,
    since: Option<Instant>,
}

impl Backoff {
    pub fn new(activity: &'static str, what: impl Into<String>) -> Backoff {
        Backoff {
            activity,
            what: what.into(),
            attempt: 0,
            since: None,
        }
    }

    /// Report the error and wait before the next try.
    pub async fn pause(
        &mut self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
        m: &Metrics,
    ) {
        self.attempt += 1;
        let retry_in = cluster::reconnect_delay(self.attempt);
        BrokerPaused {
            activity: self.activity,
            what: &self.what,
            error,
            retry_in,
            first: self.since.is_none(),
        }
        .emit(m);
        self.since.get_or_insert_with(Instant::now);
        tokio::time::sleep(retry_in).await;
    }

    /// The operation worked: end a pause if there was one.
    pub fn ok(&mut self, m: &Metrics) {
        if let Some(since) = self.since.take() {
            BrokerResumed {
                activity: self.activity,
                what: &self.what,
                paused_for: since.elapsed(),
            }
            .emit(m);
        }
        self.attempt = 0;
    }
}

/// Rates over the last interval, for the status.
pub fn per_second(now: u64, before: u64, over: Duration) -> f64 {
    now.saturating_sub(before) as f64 / over.as_secs_f64().max(0.001)
}

pub fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}
