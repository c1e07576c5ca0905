//! The crawl as a whole.

use super::InternalEvent;
use crate::metrics::Metrics;

/// Nothing queued, nothing in flight: logged once each time the crawl runs out of work.
pub struct CrawlDrained {
    /// Pages fetched since start.
    pub fetched: u64,
}

impl InternalEvent for CrawlDrained {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            fetched = self.fetched,
            "crawl drained: nothing queued, nothing in flight"
        );
        m.crawl_drained.inc();
    }
}

/// A robots.txt outcome was applied to an origin's state (`from` and `to` may be equal: a
/// refresh).
pub struct RobotsTransition<'a> {
    pub origin: &'a str,
    /// The state names of `robots_policy::state::RobotsStateKind`.
    pub from: &'static str,
    pub to: &'static str,
}

impl InternalEvent for RobotsTransition<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(origin = %self.origin, from = self.from, to = self.to, "robots state changed");
        m.robots_transitions
            .get_or_create(&super::label("to", self.to))
            .inc();
    }
}

/// Leases in flight when the last run ended went back to their queues at open.
pub struct LeasesReturned {
    pub count: u64,
}

impl InternalEvent for LeasesReturned {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            count = self.count,
            "leases in flight at the last stop returned to their queues"
        );
        m.leases_returned.inc_by(self.count);
    }
}

/// A checkpoint of the frontier's host journal ended (its host records were written a
/// slice per store batch; the memory and pause this takes at a million hosts is in
/// docs/benchmarks.md).
pub struct JournalCheckpointed {
    pub hosts: u64,
    pub journal_bytes: u64,
}

impl InternalEvent for JournalCheckpointed {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            hosts = self.hosts,
            journal_bytes = self.journal_bytes,
            "host journal checkpointed"
        );
        m.journal_checkpoints.inc();
        m.journal_checkpoint_hosts.inc_by(self.hosts);
    }
}

/// The periodic progress line (`[log] stats_interval`): rates over the interval and the
/// totals, from the same snapshot as /v1/stats.
pub struct Progress<'a> {
    pub pages_per_s: f64,
    pub bytes_per_s: f64,
    pub snapshot: &'a frontierd_admin::stats::Snapshot,
}

impl InternalEvent for Progress<'_> {
    fn emit(self, _: &Metrics) {
        let s = self.snapshot;
        tracing::info!(
            pages_per_s = format!("{:.1}", self.pages_per_s),
            kib_per_s = format!("{:.1}", self.bytes_per_s / 1024.0),
            queued = s.queued,
            in_flight = s.in_flight,
            fetched = s.pages_fetched,
            // reported by external fetchers (gRPC) included
            completed = s.frontier.completed,
            accepted = s.accepted,
            dropped = s.frontier.dropped,
            given_up = s.frontier.given_up,
            hosts_in_backoff = s.hosts_in_backoff,
            warc_mib = format!("{:.1}", s.warc_bytes as f64 / 1048576.0),
            "progress"
        );
    }
}
