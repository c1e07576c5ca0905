//! The daemon's counters, read in one place: [`Shared::snapshot`] refreshes the gauges
//! computed from the frontier and reads every counter once, for `/v1/stats`, the progress
//! line and `/metrics` alike. Events count through internal_events; the frontier keeps its
//! own counters (`FrontierStats`), read here through its API.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use frontier::{FrontierStats, QueueBreakdown};

use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::daemon::FrontierCall;

/// Every counter of the daemon at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
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

impl Shared {
    /// Refreshes the gauges `/metrics` shows and reads every counter.
    pub fn snapshot(&self) -> Snapshot {
        let (queued_by_reason, in_flight) = self.refresh_gauges();
        let m = &self.metrics;
        Snapshot {
            uptime_s: self.started.elapsed().as_secs(),
            stopping: self.stopping.load(Ordering::Relaxed),
            queued: m.urls_queued.get().max(0) as u64,
            queued_by_reason,
            in_flight,
            accepted: m.urls_accepted.get(),
            duplicate: m.urls_duplicate.get(),
            pages_fetched: m.pages_completed.get(),
            frontier: self.frontier.stats(),
            hosts_in_backoff: m.hosts_backoff.get(),
            hosts_paused: m.hosts_paused.get(),
            bytes_fetched: m.fetched_bytes.get(),
            warc_bytes: m.warc_bytes.get(),
            store_bytes: m.store_size.get(),
        }
    }

    /// Refreshes the gauges computed from the frontier's state; returns the queue
    /// breakdown it read (None if the frontier could not say) and what is in flight: the
    /// workers' fetches, or the frontier's leases out when more (an external fetcher's
    /// through gRPC, with `fetch.workers = 0` all of them).
    fn refresh_gauges(&self) -> (Option<QueueBreakdown>, u64) {
        let now = now_ms();
        let mut in_flight = self.in_flight.load(Ordering::Relaxed);
        // one walk over the hosts in memory, reused while young (at 1M hosts a walk holds
        // the scheduler for a third of a second); on an error the gauges keep their values
        let breakdown = match self.frontier.queue_gauges(now) {
            Ok(g) => {
                in_flight = in_flight.max(g.totals.in_flight);
                self.metrics.urls_queued.set(g.totals.queued as i64);
                self.metrics.hosts_backoff.set(g.totals.in_backoff as i64);
                self.metrics.hosts_paused.set(g.totals.paused as i64);
                let b = &g.breakdown;
                self.metrics.queued_by_reason("eligible", b.eligible as i64);
                self.metrics
                    .queued_by_reason("politeness", b.politeness as i64);
                self.metrics.queued_by_reason("paused", b.paused as i64);
                for k in robots_policy::state::RobotsStateKind::ALL {
                    let n = b.robots.get(k.as_str()).copied().unwrap_or(0);
                    self.metrics
                        .queued_by_reason(&format!("robots-{}", k.as_str()), n as i64);
                }
                Some(g.breakdown)
            }
            Err(e) => {
                self.frontier_failed(FrontierCall::QueueGauges, &e, 0);
                None
            }
        };
        self.metrics
            .open_connections
            .set(self.fetcher.open_connections() as i64);
        let mut by_state: BTreeMap<&'static str, i64> = BTreeMap::new();
        for k in robots_policy::state::RobotsStateKind::ALL {
            by_state.insert(k.as_str(), 0);
        }
        if let Ok(counts) = self.frontier.robots_state_counts(now) {
            for (kind, n) in counts {
                *by_state.entry(kind).or_default() += n as i64;
            }
        }
        for (k, n) in by_state {
            self.metrics.robots_state(k, n);
        }
        let fs = self.frontier.stats();
        self.metrics
            .crawl_delays_clamped_total(fs.crawl_delay_clamped);
        self.metrics
            .recrawl_totals(fs.revisits_queued, fs.revisits_gone);
        self.metrics.ip_waits_total(fs.ip_waits);
        self.metrics
            .ip_groups
            .set(self.frontier.ip_group_count() as i64);
        self.metrics.dns_lookups_total(&self.fetcher.dns_stats());
        self.metrics.in_flight.set(in_flight as i64);
        if let Ok(size) = self.frontier.size_on_disk() {
            self.metrics.store_size.set(size as i64);
        }
        (breakdown, in_flight)
    }
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
