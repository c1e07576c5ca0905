//! Politeness: the gap a host keeps between two requests.

use crate::config::FrontierConfig;
use crate::sched::records::HostRecord;

impl FrontierConfig {
    /// The gap a host keeps after a request ([`gap_ms`]).
    pub fn gap_ms(&self, rec: &HostRecord) -> u64 {
        gap_ms(self, rec)
    }
}

/// The host's gap after a request: `delay_factor` times its last response time, within
/// `[min_delay, max_delay]`, and never below its robots crawl-delay.
pub fn gap_ms(cfg: &FrontierConfig, rec: &HostRecord) -> u64 {
    let by_response = (cfg.delay_factor * rec.last_response_ms as f64) as u64;
    let base = cfg.min_delay_ms.max(by_response).min(cfg.max_delay_ms);
    base.max(rec.crawl_delay_ms.into())
}
