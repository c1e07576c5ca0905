//! The daemon's counters as `/v1/stats` and the progress line show them.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::daemon::shared::{now_ms, Shared};

impl Shared {
    /// Refresh gauges that are computed from the store.
    pub fn refresh_gauges(&self) {
        let now = now_ms();
        let mut queued = 0u64;
        let mut backoff = 0i64;
        let mut paused = 0i64;
        if let Ok(hosts) = self.frontier.hosts(None, usize::MAX) {
            for (key, rec) in hosts {
                queued += rec.counters.queued;
                if rec.backoff_until_ms > now {
                    backoff += 1;
                }
                if self.frontier.is_paused(&key) {
                    paused += 1;
                }
            }
        }
        self.metrics.urls_queued.set(queued as i64);
        match self.frontier.queue_breakdown(now) {
            Ok(b) => {
                self.metrics.queued_by_reason("eligible", b.eligible as i64);
                self.metrics
                    .queued_by_reason("politeness", b.politeness as i64);
                self.metrics.queued_by_reason("paused", b.paused as i64);
                for k in robots_policy::state::RobotsStateKind::ALL {
                    let n = b.robots.get(k.as_str()).copied().unwrap_or(0);
                    self.metrics
                        .queued_by_reason(&format!("robots-{}", k.as_str()), n as i64);
                }
            }
            Err(e) => tracing::warn!(error = %e, "queue breakdown failed"),
        }
        self.metrics.hosts_backoff.set(backoff);
        self.metrics.hosts_paused.set(paused);
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
        self.metrics
            .crawl_delays_clamped_total(self.frontier.stats().crawl_delay_clamped);
        self.metrics
            .in_flight
            .set(self.in_flight.load(Ordering::Relaxed) as i64);
        if let Ok(size) = self.frontier.size_on_disk() {
            self.metrics.store_size.set(size as i64);
        }
    }

    /// Stats as JSON (API and the periodic line).
    pub fn stats_json(&self) -> serde_json::Value {
        self.refresh_gauges();
        let s = self.frontier.stats();
        let m = &self.metrics;
        serde_json::json!({
            "uptime_s": self.started.elapsed().as_secs(),
            "stopping": self.stopping.load(Ordering::Relaxed),
            "queued": m.urls_queued.get(),
            "queued_by_reason": self.queued_by_reason_json(),
            "in_flight": self.in_flight.load(Ordering::Relaxed),
            "accepted": m.urls_accepted.get(),
            "duplicate": m.urls_duplicate.get(),
            "rejected": s.rejected,
            "pages_fetched": self.pages_done.load(Ordering::Relaxed),
            "dispatched": s.dispatched,
            "robots_fetches": s.robots_fetches,
            "completed": s.completed,
            "dropped": s.dropped,
            "given_up": s.given_up,
            "retried": s.retried,
            "crawl_delay_clamped": s.crawl_delay_clamped,
            "rate_limited": s.rate_limited,
            "recovered_leases": s.recovered_leases,
            "hosts_in_backoff": m.hosts_backoff.get(),
            "hosts_paused": m.hosts_paused.get(),
            "bytes_fetched": m.fetched_bytes.get(),
            "warc_bytes": m.warc_bytes.get(),
            "store_bytes": m.store_size.get(),
        })
    }

    /// The queue breakdown: eligible now, waiting on politeness, paused, and held by
    /// robots.txt per state (every state listed, 0 included).
    fn queued_by_reason_json(&self) -> serde_json::Value {
        let b = match self.frontier.queue_breakdown(now_ms()) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "queue breakdown failed");
                return serde_json::Value::Null;
            }
        };
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
}
