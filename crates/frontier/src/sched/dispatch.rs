//! What to do with the URL at the head of a host once its origin's robots verdict is
//! known: hand it out, fetch robots.txt first, set it aside, put the host to sleep, or
//! drop it. Pure: the caller (`dispatch.rs`) applies the step to the host and persists it.

use crate::config::{CrawlDelayOverCap, FrontierConfig};
use crate::sched::aside::PARK_PER_VISIT;
use crate::sched::robots_gate::RobotsVerdict;
use crate::store::codec::DropReason;

/// Most URLs dropped per visit of a host: a host whose queue robots.txt disallows is
/// emptied this fast at most, and other hosts get their turn in between.
pub const DROPS_PER_VISIT: usize = 1000;

/// Most URLs dropped by one dispatch call, over all its visits: each drop is written in
/// the call's one store batch and reported as an event, and sled holds a copy of every
/// node a batch changes until it returns, so a host whose 45,000 queued URLs robots.txt
/// disallows cost 90 MB in one call (and 140 MB more when their drops were acknowledged
/// at once). The caller calls again at once for the rest.
pub const DROPS_PER_CALL: usize = 1000;

/// The decision about one URL at the head of its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Its origin is held until `until_ms`: set it aside, go on with the host's next URL.
    SetAside {
        /// When to look at the origin's robots state again (unix ms).
        until_ms: u64,
    },
    /// Its origin is held and this visit set enough aside: the host sleeps until then.
    Sleep {
        /// When to look again (unix ms).
        until_ms: u64,
    },
    /// Drop it for good.
    Drop {
        /// Why.
        reason: DropReason,
        /// The rule or limit that dropped it.
        detail: String,
    },
    /// Its origin's robots.txt must be fetched first.
    FetchRobots,
    /// Hand it out; the host's crawl-delay becomes `crawl_delay_ms`.
    Lease {
        /// The host's crawl-delay from now on (the rules', capped).
        crawl_delay_ms: u64,
        /// The rules' crawl-delay was cut to the cap and the host did not have the cap
        /// already (the clamp is counted once, not per page).
        clamped: bool,
    },
}

/// Decide what happens to a URL whose robots verdict is `verdict`, on a host whose current
/// crawl-delay is `host_crawl_delay_ms`, after `parked_this_visit` URLs of this visit were
/// set aside.
pub fn decide(
    verdict: RobotsVerdict,
    cfg: &FrontierConfig,
    host_crawl_delay_ms: u64,
    parked_this_visit: usize,
    now_ms: u64,
) -> Step {
    match verdict {
        RobotsVerdict::FetchRobots => Step::FetchRobots,
        RobotsVerdict::Hold(until) => {
            let until_ms = until
                .unwrap_or(now_ms + cfg.robots_hold_recheck_ms)
                .max(now_ms + 1);
            if parked_this_visit >= PARK_PER_VISIT {
                Step::Sleep { until_ms }
            } else {
                Step::SetAside { until_ms }
            }
        }
        RobotsVerdict::Disallow(rule) => Step::Drop {
            reason: DropReason::RobotsDisallowed,
            detail: rule,
        },
        RobotsVerdict::Allow(crawl_delay) => {
            let cd = crawl_delay.map_or(0, |d| d.as_millis() as u64);
            let cap = cfg.max_crawl_delay_ms;
            if cd <= cap {
                return Step::Lease {
                    crawl_delay_ms: cd,
                    clamped: false,
                };
            }
            match cfg.crawl_delay_over_cap {
                CrawlDelayOverCap::Skip => Step::Drop {
                    reason: DropReason::CrawlDelayTooLong,
                    detail: format!("crawl-delay {cd} ms above cap {cap} ms"),
                },
                CrawlDelayOverCap::Clamp => Step::Lease {
                    crawl_delay_ms: cap,
                    clamped: host_crawl_delay_ms != cap,
                },
            }
        }
    }
}
