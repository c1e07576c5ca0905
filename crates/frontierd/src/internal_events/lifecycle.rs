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
