//! One [`Snapshot`] of every counter of the daemon, as `/v1/stats` answers it and the
//! daemon's progress line and `/metrics` read it (the daemon takes it: its `stats.rs`).

use frontier::{FrontierStats, QueueBreakdown};

/// This node's shards, when `[cluster]` is on.
#[derive(Debug, Clone)]
pub struct ClusterShards {
    pub node_id: String,
    /// The shards this node holds now, as ranges (`0-3,8`; `-` for none): its fixed
    /// `cluster.owned_shards`, or its shard leases.
    pub owned_shards: String,
    /// Shards in the cluster.
    pub shards: u32,
}

/// Every counter of the daemon at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Origins per robots.txt state.
    pub robots_states: std::collections::BTreeMap<&'static str, i64>,
    /// Page fetches per class (`2xx` ... `network`, `refused`).
    pub fetch_classes: Vec<(&'static str, u64)>,
    pub cluster: Option<ClusterShards>,
    pub uptime_s: u64,
    pub stopping: bool,
    /// URLs queued in the frontier (held ones included).
    pub queued: u64,
    pub queued_by_reason: Option<QueueBreakdown>,
    pub in_flight: u64,
    pub accepted: u64,
    pub duplicate: u64,
    /// Pages the frontier counted done.
    pub pages_fetched: u64,
    pub frontier: FrontierStats,
    pub hosts_in_backoff: i64,
    pub hosts_paused: i64,
    pub bytes_fetched: u64,
    pub warc_bytes: u64,
    pub store_bytes: i64,
}

impl Snapshot {
    /// `GET /v1/stats`.
    pub fn to_json(&self) -> serde_json::Value {
        let s = &self.frontier;
        serde_json::json!({
            "uptime_s": self.uptime_s,
            "stopping": self.stopping,
            "queued": self.queued,
            "queued_by_reason": self.queued_by_reason.as_ref().map(queued_by_reason_json),
            "in_flight": self.in_flight,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "rejected": s.rejected,
            "pages_fetched": self.pages_fetched,
            "dispatched": s.dispatched,
            "robots_fetches": s.robots_fetches,
            "completed": s.completed,
            "late_reports": s.late_reports,
            "dropped": s.dropped,
            "given_up": s.given_up,
            "retried": s.retried,
            "crawl_delay_clamped": s.crawl_delay_clamped,
            "rate_limited": s.rate_limited,
            "recovered_leases": s.recovered_leases,
            "hosts_in_backoff": self.hosts_in_backoff,
            "hosts_paused": self.hosts_paused,
            "bytes_fetched": self.bytes_fetched,
            "warc_bytes": self.warc_bytes,
            "store_bytes": self.store_bytes,
            "robots_states": self.robots_states,
            "fetch_classes": self
                .fetch_classes
                .iter()
                .map(|(c, n)| (c.to_string(), serde_json::json!(n)))
                .collect::<serde_json::Map<_, _>>(),
            "revisits": {
                "scheduled": s.revisits_scheduled,
                "queued": s.revisits_queued,
                "gone": s.revisits_gone,
            },
            "cluster": self.cluster.as_ref().map(|c| serde_json::json!({
                "node_id": c.node_id,
                "owned_shards": c.owned_shards,
                "shards": c.shards,
            })),
        })
    }
}

/// The queue breakdown: eligible now, waiting on politeness, paused, and held by robots.txt
/// per state (every state listed, 0 included).
fn queued_by_reason_json(b: &QueueBreakdown) -> serde_json::Value {
    let robots: serde_json::Map<String, serde_json::Value> =
        robots_policy::state::RobotsStateKind::ALL
            .iter()
            .map(|k| {
                let n = b.robots.get(k.as_str()).copied().unwrap_or(0);
                (k.as_str().to_string(), serde_json::json!(n))
            })
            .collect();
    serde_json::json!({
        "eligible": b.eligible,
        "politeness": b.politeness,
        "paused": b.paused,
        "robots": robots,
    })
}
