//! The `[cluster]` metrics (docs/metrics.md, "Cluster"). Registered on every daemon (they
//! stay at 0 on a single node) so dashboards need no special case.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Labels;

#[derive(Default)]
pub struct ClusterMetrics {
    pub broker_connected: Gauge,
    pub broker_disconnects: Counter,
    pub paused: Family<Labels, Gauge>,
    pub pauses: Family<Labels, Counter>,
    pub deliveries: Family<Labels, Counter>,
    pub urls_received: Counter,
    pub lines_rejected: Family<Labels, Counter>,
    pub acks_failed: Counter,
    pub links: Family<Labels, Counter>,
    pub urls_published: Family<Labels, Counter>,
    pub unroutable: Counter,
    pub outbox_urls: Gauge,
    pub intake_lists_routed: Counter,
    pub events_published: Counter,
    pub events_dropped: Counter,
    pub shard_pending: Family<Labels, Gauge>,
    pub shard_ack_pending: Family<Labels, Gauge>,
    pub shard_redelivered: Family<Labels, Gauge>,
    pub task_errors: Family<Labels, Counter>,
    pub shards_held: Gauge,
    pub live_nodes: Gauge,
    pub shard_changes: Family<Labels, Counter>,
    pub handoff_urls: Counter,
    pub handoff_received: Counter,
    pub shard_log_entries: Counter,
    pub shard_log_replayed: Counter,
    pub shard_log_robots: Counter,
    pub shard_log_done_skipped: Counter,
    pub shard_log_late_done: Counter,
    pub shard_log_compactions: Counter,
    pub fetches_withheld: Counter,
}

impl ClusterMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "cluster_shards_held",
            "Shards this node holds now (owned_shards = \"auto\": its shard leases; otherwise its fixed owned_shards)",
            self.shards_held.clone(),
        );
        r.register(
            "cluster_live_nodes",
            "Nodes in the lease bucket's member list at this node's last lease round (0 with fixed owned_shards)",
            self.live_nodes.clone(),
        );
        r.register(
            "cluster_shard_changes",
            "Shard lease changes of this node, by change (gained, lost: another node took it or its lease ran out, released: handed off)",
            self.shard_changes.clone(),
        );
        r.register(
            "cluster_handoff_urls",
            "Queued URLs of shards this node no longer holds handed to their next owners (in the shard's log already, or published to the shard's subject), then deleted here",
            self.handoff_urls.clone(),
        );
        r.register(
            "cluster_handoff_urls_received",
            "URLs handed off by a shard's previous holder taken from this node's shards and queued here (even when seen before)",
            self.handoff_received.clone(),
        );
        r.register(
            "cluster_shard_log_entries",
            "Entries this node appended to its shards' logs in the broker (URLs queued, pages fetched for good), read by a shard's next holder",
            self.shard_log_entries.clone(),
        );
        r.register(
            "cluster_shard_log_replayed_urls",
            "URLs queued here from the log of a shard taken over: queued by its last holder and not fetched",
            self.shard_log_replayed.clone(),
        );
        r.register(
            "cluster_shard_log_robots_adopted",
            "robots.txt answers of shards taken over taken from their logs (origins this node had no record of): obeyed without asking again",
            self.shard_log_robots.clone(),
        );
        r.register(
            "cluster_shard_log_done_skipped",
            "URLs of shards taken over not queued (or, queued already, not fetched) here because the shard's log says its last holder fetched them",
            self.shard_log_done_skipped.clone(),
        );
        r.register(
            "cluster_shard_log_late_done",
            "Done keys that reached the log of a shard taken over after this node read it (its last holder could not reach the broker in time): their URLs are not fetched here",
            self.shard_log_late_done.clone(),
        );
        r.register(
            "cluster_fetches_withheld",
            "Requests (pages and robots.txt) leased while their shard was open here and not sent because it had closed by the time they would go (the node was frozen past its fence, or lost the shard): given back to the queue unsent",
            self.fetches_withheld.clone(),
        );
        r.register(
            "cluster_shard_log_compactions",
            "Shard logs this node folded and rewrote (its shards' logs stay as long as their pending URLs and done keys)",
            self.shard_log_compactions.clone(),
        );
        r.register(
            "cluster_broker_connected",
            "1 while this node's NATS connection is up, 0 while it is down or [cluster] is off",
            self.broker_connected.clone(),
        );
        r.register(
            "cluster_broker_disconnects",
            "Times this node's NATS connection was lost (the client reconnects with back-off)",
            self.broker_disconnects.clone(),
        );
        r.register(
            "cluster_paused",
            "Cluster activities waiting out a broker error with back-off, by activity (intake: shard consumers, one per shard; routing: the link outbox; router: the intake router; events; status)",
            self.paused.clone(),
        );
        r.register(
            "cluster_pauses",
            "Broker errors that paused a cluster activity, by activity",
            self.pauses.clone(),
        );
        r.register(
            "cluster_deliveries",
            "Messages taken from this node's shards, by kind (first, redelivery: an earlier delivery was not acknowledged in time)",
            self.deliveries.clone(),
        );
        r.register(
            "cluster_urls_received",
            "URLs in messages taken from this node's shards and committed to the store",
            self.urls_received.clone(),
        );
        r.register(
            "cluster_lines_rejected",
            "Lines of broker messages refused, by reason (not-utf8, too-long, bad-json, empty-url)",
            self.lines_rejected.clone(),
        );
        r.register(
            "cluster_acks_failed",
            "Acknowledgements of committed messages that failed (the message comes back; the seen-set absorbs it)",
            self.acks_failed.clone(),
        );
        r.register(
            "cluster_links",
            "Discovered links and redirect targets by where they went: local (a shard this node owns) or remote (the outbox, then the owner's shard subject)",
            self.links.clone(),
        );
        r.register(
            "cluster_urls_published",
            "URLs published to shard subjects and acknowledged by the broker, by source (links: this node's outbox; router: lists from frontierd.intake)",
            self.urls_published.clone(),
        );
        r.register(
            "cluster_unroutable",
            "URLs not published because the frontier would refuse them (not a URL, too long)",
            self.unroutable.clone(),
        );
        r.register(
            "cluster_outbox_urls",
            "Links waiting in this node's durable outbox to be published to their owners",
            self.outbox_urls.clone(),
        );
        r.register(
            "cluster_intake_lists_routed",
            "Lists from frontierd.intake routed to shard subjects by this node's router",
            self.intake_lists_routed.clone(),
        );
        r.register(
            "cluster_events_published",
            "Crawl-log records published to frontierd.events.<node_id>",
            self.events_published.clone(),
        );
        r.register(
            "cluster_events_dropped",
            "Crawl-log records not published because the event buffer was full (broker down or slow); the crawl log file has them",
            self.events_dropped.clone(),
        );
        r.register(
            "cluster_shard_pending",
            "Messages of an owned shard not yet delivered (its backlog), by shard",
            self.shard_pending.clone(),
        );
        r.register(
            "cluster_shard_ack_pending",
            "Messages of an owned shard delivered and not yet acknowledged, by shard",
            self.shard_ack_pending.clone(),
        );
        r.register(
            "cluster_shard_redelivered",
            "Messages of an owned shard delivered more than once and still unacknowledged, by shard",
            self.shard_redelivered.clone(),
        );
        r.register(
            "cluster_task_errors",
            "Errors of this node's cluster tasks other than an unreachable broker, by kind (shard-commit, shards-mismatch, panicked, outbox-read, outbox-remove, outbox-task); the work is retried",
            self.task_errors.clone(),
        );
    }
}
