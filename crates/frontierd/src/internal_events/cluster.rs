//! `[cluster]`: the broker connection, shard deliveries, link routing, the intake router and
//! published events.

use std::fmt::Display;
use std::time::Duration;

use super::{chain, label, InternalEvent};
use crate::metrics::Metrics;

/// A cluster activity hit a broker error and waits before trying again (the local crawl
/// goes on). `activity` is the `activity` label: intake, routing, router, events, status.
pub struct BrokerPaused<'a> {
    pub activity: &'static str,
    /// What exactly (e.g. `shard 3`).
    pub what: &'a str,
    pub error: &'a (dyn std::error::Error + 'static),
    pub retry_in: Duration,
    /// True on the first error of a run of errors (the `paused` gauge goes up then).
    pub first: bool,
}

impl InternalEvent for BrokerPaused<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(
            activity = self.activity,
            what = self.what,
            error = %chain(self.error),
            retry_in_ms = self.retry_in.as_millis() as u64,
            "cluster activity paused by a broker error; retrying with back-off"
        );
        m.cluster
            .pauses
            .get_or_create(&label("activity", self.activity))
            .inc();
        if self.first {
            m.cluster
                .paused
                .get_or_create(&label("activity", self.activity))
                .inc();
        }
    }
}

/// A paused activity works again.
pub struct BrokerResumed<'a> {
    pub activity: &'static str,
    pub what: &'a str,
    pub paused_for: Duration,
}

impl InternalEvent for BrokerResumed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            activity = self.activity,
            what = self.what,
            paused_ms = self.paused_for.as_millis() as u64,
            "cluster activity resumed"
        );
        m.cluster
            .paused
            .get_or_create(&label("activity", self.activity))
            .dec();
    }
}

/// Messages of an owned shard committed to the store (and then acknowledged).
pub struct ShardBatchCommitted {
    pub shard: u32,
    pub messages: u64,
    pub redeliveries: u64,
    pub urls: u64,
    /// Of `urls`, those handed off by the shard's previous holder.
    pub handed_off: u64,
}

impl InternalEvent for ShardBatchCommitted {
    fn emit(self, m: &Metrics) {
        tracing::debug!(
            shard = self.shard,
            messages = self.messages,
            redeliveries = self.redeliveries,
            urls = self.urls,
            "shard messages committed"
        );
        if self.redeliveries > 0 {
            tracing::info!(
                shard = self.shard,
                redeliveries = self.redeliveries,
                "shard messages delivered again (an earlier delivery was not acknowledged in time)"
            );
        }
        let c = &m.cluster;
        c.deliveries
            .get_or_create(&label("kind", "first"))
            .inc_by(self.messages - self.redeliveries);
        c.deliveries
            .get_or_create(&label("kind", "redelivery"))
            .inc_by(self.redeliveries);
        c.urls_received.inc_by(self.urls);
        c.handoff_received.inc_by(self.handed_off);
    }
}

/// A line of a broker message refused (by its number in the message).
pub struct BrokerLineRejected<'a> {
    /// `shard 3` or `intake`.
    pub source: &'a str,
    pub sequence: u64,
    pub error: &'a cluster::LineError,
}

impl InternalEvent for BrokerLineRejected<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(
            source = self.source,
            message = self.sequence,
            line = self.error.line,
            reason = %self.error.reason,
            "line of a broker message rejected"
        );
        m.cluster
            .lines_rejected
            .get_or_create(&label("reason", self.error.code))
            .inc();
    }
}

/// Acknowledging a committed message failed: it comes back after the ack wait.
pub struct AckFailed<'a> {
    pub error: &'a (dyn std::error::Error + 'static),
}

impl InternalEvent for AckFailed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(error = %chain(self.error), "acknowledging a committed message failed; it will be delivered again");
        m.cluster.acks_failed.inc();
    }
}

/// Discovered links of one page split by owner.
pub struct LinksRouted {
    pub local: u64,
    pub remote: u64,
}

impl InternalEvent for LinksRouted {
    fn emit(self, m: &Metrics) {
        tracing::trace!(
            local = self.local,
            remote = self.remote,
            "links routed by shard"
        );
        let c = &m.cluster;
        c.links
            .get_or_create(&label("to", "local"))
            .inc_by(self.local);
        c.links
            .get_or_create(&label("to", "remote"))
            .inc_by(self.remote);
    }
}

/// URLs published to shard subjects and acknowledged.
pub struct UrlsPublished {
    /// `links` or `router`.
    pub source: &'static str,
    pub urls: u64,
}

impl InternalEvent for UrlsPublished {
    fn emit(self, m: &Metrics) {
        tracing::debug!(
            source = self.source,
            urls = self.urls,
            "URLs published to their shards"
        );
        m.cluster
            .urls_published
            .get_or_create(&label("source", self.source))
            .inc_by(self.urls);
    }
}

/// A URL not published: the frontier would refuse it.
pub struct Unroutable<'a> {
    pub error: &'a cluster::RouteError,
}

impl InternalEvent for Unroutable<'_> {
    fn emit(self, m: &Metrics) {
        tracing::debug!(error = %self.error, "URL not routed");
        m.cluster.unroutable.inc();
    }
}

/// Lists from `frontierd.intake` routed by this node.
pub struct IntakeListsRouted {
    pub lists: u64,
    pub urls: u64,
}

impl InternalEvent for IntakeListsRouted {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            lists = self.lists,
            urls = self.urls,
            "intake lists routed to shards"
        );
        m.cluster.intake_lists_routed.inc_by(self.lists);
        m.cluster
            .urls_published
            .get_or_create(&label("source", "router"))
            .inc_by(self.urls);
    }
}

/// A crawl-log record not published: the buffer was full.
pub struct EventDropped;

impl InternalEvent for EventDropped {
    fn emit(self, m: &Metrics) {
        tracing::debug!("crawl-log record not published: event buffer full");
        m.cluster.events_dropped.inc();
    }
}

/// A crawl-log record published.
pub struct EventPublished;

impl InternalEvent for EventPublished {
    fn emit(self, m: &Metrics) {
        tracing::trace!("crawl-log record published");
        m.cluster.events_published.inc();
    }
}

/// What went wrong in one of the node's cluster tasks, other than the broker being
/// unreachable (that pauses with back-off: `BrokerPaused`). Each is an ERROR line and a
/// count by kind; the work it was about is retried (messages come back, links stay in the
/// outbox).
pub enum ClusterTaskError<'a> {
    /// A shard's messages could not be committed to the frontier: not acknowledged, so
    /// the broker delivers them again.
    ShardCommit { shard: u32, error: &'a dyn Display },
    /// `cluster.shards` does not match the cluster's streams: the node stops.
    ShardsMismatch { error: &'a dyn Display },
    /// A cluster task panicked.
    Panicked { error: &'a dyn Display },
    /// The outbox could not be read.
    OutboxRead { error: &'a dyn Display },
    /// Published links could not be removed from the outbox (they are published again).
    OutboxRemove { error: &'a dyn Display },
    /// A blocking outbox task died.
    OutboxTask { error: &'a dyn Display },
    /// The lease bucket was made for another lease TTL: the node stops.
    LeaseTtlMismatch { error: &'a dyn Display },
    /// Queued URLs of shards not held could not be handed off (they stay here; the next
    /// sweep tries again).
    HandOff { error: &'a dyn Display },
    /// A shard's log could not be used: its pending URLs not queued here (read again when
    /// the shard is taken again), or its compaction failed (tried again later).
    ShardLog {
        shard: u32,
        what: &'static str,
        error: &'a dyn Display,
    },
}

impl ClusterTaskError<'_> {
    fn kind(&self) -> &'static str {
        match self {
            ClusterTaskError::ShardCommit { .. } => "shard-commit",
            ClusterTaskError::ShardsMismatch { .. } => "shards-mismatch",
            ClusterTaskError::Panicked { .. } => "panicked",
            ClusterTaskError::OutboxRead { .. } => "outbox-read",
            ClusterTaskError::OutboxRemove { .. } => "outbox-remove",
            ClusterTaskError::OutboxTask { .. } => "outbox-task",
            ClusterTaskError::LeaseTtlMismatch { .. } => "lease-ttl-mismatch",
            ClusterTaskError::HandOff { .. } => "handoff",
            ClusterTaskError::ShardLog { .. } => "shard-log",
        }
    }
}

impl InternalEvent for ClusterTaskError<'_> {
    fn emit(self, m: &Metrics) {
        let kind = self.kind();
        match self {
            ClusterTaskError::ShardCommit { shard, error } => tracing::error!(
                shard, error = %error,
                "committing shard messages failed; they will be delivered again"
            ),
            ClusterTaskError::ShardsMismatch { error } => {
                tracing::error!(error = %error, "cluster.shards does not match the cluster: stopping")
            }
            ClusterTaskError::Panicked { error } => {
                tracing::error!(error = %error, "a cluster task panicked")
            }
            ClusterTaskError::OutboxRead { error } => {
                tracing::error!(error = %error, "reading the cluster outbox failed")
            }
            ClusterTaskError::OutboxRemove { error } => tracing::error!(
                error = %error, "removing published links from the outbox failed"
            ),
            ClusterTaskError::OutboxTask { error } => {
                tracing::error!(error = %error, "cluster outbox task failed")
            }
            ClusterTaskError::LeaseTtlMismatch { error } => {
                tracing::error!(error = %error, "cluster.lease_ttl does not match the cluster: stopping")
            }
            ClusterTaskError::HandOff { error } => tracing::error!(
                error = %error, "handing off queued URLs failed; they stay here and are tried again"
            ),
            ClusterTaskError::ShardLog { shard, what, error } => {
                tracing::error!(shard, error = %error, "{what} failed")
            }
        }
        m.cluster
            .task_errors
            .get_or_create(&label("kind", kind))
            .inc();
    }
}

/// The streams exist and match: the node consumes its shards.
pub struct StreamsReady;

impl InternalEvent for StreamsReady {
    fn emit(self, _: &Metrics) {
        tracing::info!("cluster streams ready; consuming owned shards");
    }
}

/// An outbox entry that could not be read was removed (it would have blocked the outbox).
pub struct OutboxEntryDamaged<'a> {
    pub key: &'a [u8],
}

impl InternalEvent for OutboxEntryDamaged<'_> {
    fn emit(self, _: &Metrics) {
        tracing::error!(key = ?self.key, "unreadable cluster outbox entry removed");
    }
}

/// A cluster activity's pauses ([`cluster::Backoff`]) as [`BrokerPaused`] and
/// [`BrokerResumed`].
pub struct BrokerReports<'a>(pub &'a Metrics);

impl cluster::BrokerPauses for BrokerReports<'_> {
    fn paused(&self, p: cluster::Paused<'_>) {
        BrokerPaused {
            activity: p.activity,
            what: p.what,
            error: p.error,
            retry_in: p.retry_in,
            first: p.first,
        }
        .emit(self.0);
    }

    fn resumed(&self, r: cluster::Resumed<'_>) {
        BrokerResumed {
            activity: r.activity,
            what: r.what,
            paused_for: r.paused_for,
        }
        .emit(self.0);
    }
}

/// This node is in cluster mode (its broker connection is made in the background).
pub struct ClusterJoined<'a> {
    pub node: &'a cluster::Node,
}

impl InternalEvent for ClusterJoined<'_> {
    fn emit(self, m: &Metrics) {
        let s = &self.node.settings.lib;
        m.cluster
            .shards_held
            .set(self.node.ownership.held().len() as i64);
        tracing::info!(
            node = %s.node_id,
            nats = %s.nats_url,
            shards = s.shard_map.shards(),
            owned = %s.owned.as_ref().map_or("auto (shard leases)".to_string(), |o| o.to_string()),
            outbox = self.node.outbox.len(),
            "cluster mode"
        );
    }
}

/// A lease round changed this node's shards (`owned_shards = "auto"`).
pub struct ShardLeases<'a> {
    pub report: &'a cluster::RoundReport,
    /// What the node holds after the round.
    pub ownership: &'a cluster::Ownership,
}

impl InternalEvent for ShardLeases<'_> {
    fn emit(self, m: &Metrics) {
        let (r, c, held) = (self.report, &m.cluster, self.ownership.held_text());
        c.shards_held.set(self.ownership.held().len() as i64);
        c.live_nodes.set(r.live as i64);
        if !r.lost.is_empty() {
            tracing::warn!(lost = ?r.lost, %held, "shard lost: another node holds it, or its lease ran out");
        }
        if !(r.gained.is_empty() && r.lost.is_empty() && r.to_release.is_empty()) {
            let gained: Vec<String> = r
                .gained
                .iter()
                .map(|(s, hold)| format!("{s} (hold {} ms)", hold.as_millis()))
                .collect();
            tracing::info!(
                gained = ?gained, lost = ?r.lost, handing_off = ?r.to_release,
                %held, live_nodes = r.live,
                "shard leases changed"
            );
        }
        if let Some(error) = &r.error {
            tracing::warn!(error = %error, "a shard lease write failed (retried next round)");
        }
        for (change, n) in [("gained", r.gained.len()), ("lost", r.lost.len())] {
            c.shard_changes
                .get_or_create(&label("change", change))
                .inc_by(n as u64);
        }
    }
}

/// A shard handed off (its queued URLs with the next owners) was released.
pub struct ShardReleased {
    pub shard: u32,
    pub hold: Duration,
}

impl InternalEvent for ShardReleased {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            shard = self.shard,
            hold_ms = self.hold.as_millis() as u64,
            "shard released to the next owner"
        );
        m.cluster
            .shard_changes
            .get_or_create(&label("change", "released"))
            .inc();
    }
}

/// Queued URLs of shards this node no longer holds went to their next owners.
pub struct UrlsHandedOff<'a> {
    pub handoff: &'a cluster::HandOff,
}

impl InternalEvent for UrlsHandedOff<'_> {
    fn emit(self, m: &Metrics) {
        let h = self.handoff;
        if h.hosts > 0 {
            tracing::info!(
                hosts = h.hosts,
                urls = h.urls,
                busy_hosts = h.busy_hosts,
                hold_ms = h.hold.as_millis() as u64,
                "queued URLs handed off"
            );
        }
        m.cluster.handoff_urls.inc_by(h.urls as u64);
    }
}

/// Entries appended to the shard logs (counted; logged at debug).
pub struct ShardLogAppended {
    pub entries: u64,
}

impl InternalEvent for ShardLogAppended {
    fn emit(self, m: &Metrics) {
        if self.entries > 0 {
            tracing::debug!(entries = self.entries, "shard log entries appended");
        }
        m.cluster.shard_log_entries.inc_by(self.entries);
    }
}

/// A taken shard's log read: its pending URLs queued here (when taken from another node),
/// its done keys kept to skip what the last holder fetched.
pub struct ShardLogRead<'a> {
    pub shard: u32,
    pub folded: &'a cluster::Folded,
    /// Pending URLs (and visited ones, for their next visit) queued here (0 for a shard
    /// adopted after this node's own restart).
    pub queued: u64,
    /// robots.txt answers taken (origins this node had no record of).
    pub robots: u64,
}

impl InternalEvent for ShardLogRead<'_> {
    fn emit(self, m: &Metrics) {
        let f = self.folded;
        tracing::info!(
            shard = self.shard,
            lines = f.lines,
            unreadable = f.unreadable,
            pending = f.pending.len(),
            done = f.done.len(),
            visited = f.visited.len(),
            queued = self.queued,
            robots = f.robots.len(),
            robots_taken = self.robots,
            "shard log read"
        );
        m.cluster.shard_log_replayed.inc_by(self.queued);
        m.cluster.shard_log_robots.inc_by(self.robots);
    }
}

/// URLs of a taken shard not queued: the shard's log says its last holder fetched them.
pub struct DoneUrlsSkipped {
    /// The shard whose messages they came in; None: links found on this node's pages.
    pub shard: Option<u32>,
    pub urls: u64,
}

impl InternalEvent for DoneUrlsSkipped {
    fn emit(self, m: &Metrics) {
        if self.urls > 0 {
            tracing::debug!(
                shard = ?self.shard,
                urls = self.urls,
                "URLs fetched by the shard's last holder skipped"
            );
        }
        m.cluster.shard_log_done_skipped.inc_by(self.urls);
    }
}

/// Done entries that reached a taken shard's log after this node read it: its last holder
/// could not reach the broker in time. A URL of them queued here is not fetched.
pub struct ShardLogLateDone {
    pub shard: u32,
    /// Keys not known before.
    pub urls: u64,
}

impl InternalEvent for ShardLogLateDone {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            shard = self.shard,
            urls = self.urls,
            "late done entries in a taken shard's log: its last holder fetched these URLs"
        );
        m.cluster.shard_log_late_done.inc_by(self.urls);
    }
}

/// A queued URL not fetched: a done entry of its shard's log (read when this node took the
/// shard, or appended late) says the last holder fetched it. Its lease is completed without
/// a request.
pub struct QueuedUrlFetchedElsewhere<'a> {
    pub url: &'a str,
}

impl InternalEvent for QueuedUrlFetchedElsewhere<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            url = self.url,
            "queued URL not fetched: the shard's last holder fetched it"
        );
        m.cluster.shard_log_done_skipped.inc();
    }
}

/// A request leased while its shard was open here was not sent: the shard had closed by
/// the time it would go (this node frozen past its fence, or the shard lost).
pub struct FetchWithheld<'a> {
    pub url: &'a str,
    pub fetch: crate::internal_events::network::FetchKind,
}

impl InternalEvent for FetchWithheld<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(
            url = self.url,
            fetch = self.fetch.as_str(),
            "request not sent: its shard is no longer open to this node; given back unsent"
        );
        m.cluster.fetches_withheld.inc();
    }
}

/// A shard's log folded and rewritten.
pub struct ShardLogCompacted {
    pub shard: u32,
    pub compacted: cluster::Compacted,
}

impl InternalEvent for ShardLogCompacted {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            shard = self.shard,
            lines_before = self.compacted.lines_before,
            lines_after = self.compacted.lines_after,
            "shard log compacted"
        );
        m.cluster.shard_log_compactions.inc();
    }
}
