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

/// When a host may go if its gap is counted with `crawl_delay_ms`, longer than the
/// crawl-delay its record holds: the running gap (ending at `next_allowed_ms`) began
/// [`gap_ms`] before its end, and the longer one runs from the same start. Some if that
/// is after `now_ms`.
///
/// The record's crawl-delay is the one its robots.txt gave when the gap was counted; a
/// robots state that gives a longer one now (a record a crash left without it, a state
/// another node answered, a state set without a lease) must not let the next request out
/// sooner than the longer delay after the last one.
pub fn lengthened_until(
    cfg: &FrontierConfig,
    rec: &HostRecord,
    crawl_delay_ms: u64,
    now_ms: u64,
) -> Option<u64> {
    if crawl_delay_ms <= u64::from(rec.crawl_delay_ms) {
        return None;
    }
    let started = rec.next_allowed_ms.saturating_sub(gap_ms(cfg, rec));
    let longer = HostRecord {
        crawl_delay_ms: crate::sched::records::to_u32(crawl_delay_ms),
        ..*rec
    };
    let until = started.saturating_add(gap_ms(cfg, &longer));
    (until > now_ms).then_some(until)
}

/// Hold a host for its gap from `from_ms`: a request to it may have ended just before.
///
/// A stored time further ahead of `from_ms` than any gap (or back-off) can reach was counted
/// on a wall clock that has since been set back (between two runs, or in a run before the
/// last restart): waited out, it would hold the host for as long as the clock went back.
/// Such a gap is taken as having just begun, and such a back-off as its longest.
pub(crate) fn hold_for_restart(
    cfg: &FrontierConfig,
    rec: &mut HostRecord,
    from_ms: u64,
    client_delay_ms: u64,
) {
    let longest_gap = cfg
        .max_delay_ms
        .max(cfg.max_crawl_delay_ms)
        .max(rec.crawl_delay_ms.into())
        .max(client_delay_ms);
    if rec.next_allowed_ms > from_ms.saturating_add(longest_gap) {
        rec.next_allowed_ms = from_ms;
    }
    let longest_backoff = crate::sched::failure::longest_host_backoff_ms(cfg);
    rec.backoff_until_ms = rec
        .backoff_until_ms
        .min(from_ms.saturating_add(longest_backoff));
    let gap = crate::sched::lease::gap_with_client_delay(gap_ms(cfg, rec), client_delay_ms);
    let until = from_ms.saturating_add(gap);
    rec.next_allowed_ms = rec.next_allowed_ms.max(until);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FrontierConfig {
        let mut c = FrontierConfig::new("unused");
        c.min_delay_ms = 400;
        c.max_delay_ms = 400;
        c.delay_factor = 0.0;
        c
    }

    #[test]
    fn a_longer_crawl_delay_runs_from_the_running_gaps_start() {
        let rec = HostRecord {
            next_allowed_ms: 10_400,
            ..HostRecord::default()
        };
        // the gap of 400 began at 10 000: with a 2 s crawl-delay the host goes at 12 000
        assert_eq!(lengthened_until(&cfg(), &rec, 2_000, 10_400), Some(12_000));
        assert_eq!(lengthened_until(&cfg(), &rec, 2_000, 11_999), Some(12_000));
        assert_eq!(lengthened_until(&cfg(), &rec, 2_000, 12_000), None);
        // no longer than the record's, or below the plain gap: nothing changes
        let with = HostRecord {
            crawl_delay_ms: 2_000,
            next_allowed_ms: 12_000,
            ..HostRecord::default()
        };
        assert_eq!(lengthened_until(&cfg(), &with, 2_000, 10_500), None);
        assert_eq!(lengthened_until(&cfg(), &rec, 300, 10_400), None);
    }
}
