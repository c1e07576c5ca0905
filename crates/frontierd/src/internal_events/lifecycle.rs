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
