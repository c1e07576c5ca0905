//! The daemon's counters, read in one place: [`Shared::snapshot`] refreshes the gauges
//! computed from the frontier and reads every counter once, for `/v1/stats`, the progress
//! line and `/metrics` alike. Events count through internal_events; the frontier keeps its
//! own counters (`FrontierStats`), read here through its API.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use frontier::QueueBreakdown;

use crate::metrics;
pub use frontierd_admin::stats::{ClusterShards, Snapshot};

/// The `class` labels of `page_fetches`, in the order the status page shows them.
const PAGE_CLASSES: [&str; 6] = ["2xx", "3xx", "4xx", "5xx", "network", "refused"];

use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::daemon::FrontierCall;

impl Shared {
    /// Refreshes the gauges `/metrics` shows and reads every counter.
    pub fn snapshot(&self) -> Snapshot {
        let (queued_by_reason, in_flight, robots_states) = self.refresh_gauges();
        let m = &self.metrics;
        let fetch_classes = PAGE_CLASSES
            .iter()
            .map(|c| {
                (
                    *c,
                    m.page_fetches.get_or_create(&metrics::l("class", c)).get(),
                )
            })
            .collect();
        let cluster = self.settings.cluster.as_ref().map(|c| ClusterShards {
            node_id: c.lib.node_id.clone(),
            owned_shards: self
                .cluster
                .as_ref()
                .map_or_else(String::new, |n| n.ownership.held_text()),
            shards: c.lib.shard_map.shards(),
        });
        Snapshot {
            robots_states,
            fetch_classes,
            cluster,
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
    fn refresh_gauges(&self) -> (Option<QueueBreakdown>, u64, BTreeMap<&'static str, i64>) {
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
        for (k, n) in &by_state {
            self.metrics.robots_state(k, *n);
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
        (breakdown, in_flight, by_state)
    }
}
