//! What to do with the URL at the head of a host: whether it gets as far as its robots
//! verdict (`admit`), then, once the verdict is known, hand it out, fetch robots.txt
//! first (and what comes before that fetch: `robots_first`), set it aside, put the host
//! to sleep, or drop it ([`decide`]); and how much a dispatch call and a host visit may
//! drop or discard (`Budget`). Pure: the caller (`dispatch.rs`) reads the entry from the
//! store, applies the step to the host and persists it.

use crate::canon::origin_of;
use crate::config::{CrawlDelayOverCap, FrontierConfig};
use crate::crawl::{self, CrawlBook, CrawlGate};
use crate::sched::aside::PARK_PER_VISIT;
use crate::sched::ipgroup::Resolve;
use crate::sched::records::DropReason;
use crate::sched::robots_gate::RobotsVerdict;

/// Most URLs dropped per visit of a host: a host whose queue robots.txt disallows is
/// emptied this fast at most, and other hosts get their turn in between.
pub const DROPS_PER_VISIT: usize = 1000;

/// Most URLs dropped by one dispatch call, over all its visits: each drop is written in
/// the call's one store batch and reported as an event, and sled holds a copy of every
/// node a batch changes until it returns, so a host whose 45,000 queued URLs robots.txt
/// disallows cost 90 MB in one call (and 140 MB more when their drops were acknowledged
/// at once). The caller calls again at once for the rest.
pub const DROPS_PER_CALL: usize = 1000;

/// Dead URLs (of deleted crawl queues) discarded per host visit, at most (bounds the time
/// under the lock; the host is scheduled again at once).
pub(crate) const DISCARDS_PER_VISIT: usize = 4096;

/// What a dispatch call, and its current host visit, have spent of their bounds: the call's
/// drops (each is written in the call's one batch), and the visit's drops, discards (the
/// time under the lock) and URLs set aside ([`decide`] puts the host to sleep after enough).
#[derive(Debug, Default)]
pub(crate) struct Budget {
    call_drops: usize,
    visit_drops: usize,
    visit_discards: usize,
    visit_set_aside: usize,
}

impl Budget {
    /// Whether the call may visit another host: it has not dropped its share.
    pub(crate) fn call_open(&self) -> bool {
        self.call_drops < DROPS_PER_CALL
    }

    /// A host visit starts: its own counts start from zero.
    pub(crate) fn start_visit(&mut self) {
        self.visit_drops = 0;
        self.visit_discards = 0;
        self.visit_set_aside = 0;
    }

    /// URLs this visit set aside so far (for [`decide`]).
    pub(crate) fn set_aside(&self) -> usize {
        self.visit_set_aside
    }

    /// One more URL of this visit set aside.
    pub(crate) fn count_set_aside(&mut self) {
        self.visit_set_aside += 1;
    }

    /// One more dead URL discarded. True when the visit has discarded its share: the host
    /// is scheduled again at once.
    pub(crate) fn count_discard(&mut self) -> bool {
        self.visit_discards += 1;
        self.visit_discards >= DISCARDS_PER_VISIT
    }

    /// One more URL dropped. True when the visit or the call has dropped its share: the
    /// host is scheduled again at once.
    pub(crate) fn count_drop(&mut self) -> bool {
        self.visit_drops += 1;
        self.call_drops += 1;
        self.visit_drops >= DROPS_PER_VISIT || self.call_drops >= DROPS_PER_CALL
    }
}

/// Why a URL at the head of its host does not go on to its robots verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its crawl or queue was deleted: discard it unserved.
    DeadQueue,
    /// Its crawl (this name) reached its limit at this queue: set it aside until the limit
    /// changes, so that other crawls' URLs go on.
    AtLimit(String),
    /// It belongs to another crawl than the caller asked for: the host keeps its turn (one
    /// queue per host holds every crawl's URLs in order).
    OtherCrawl,
    /// Not canonical (cannot happen for what was stored): drop it.
    NotCanonical,
}

/// The gates a stored URL passes before its robots verdict, in order: its crawl (deleted,
/// or at its limit at the host's queue `host_key`), the caller's crawl (`want`, an external
/// fetcher's), and a canonical origin. Its origin when it passes them all.
pub(crate) fn admit(
    crawls: &CrawlBook,
    url: &str,
    host_key: &str,
    want: Option<&str>,
) -> Result<String, Refusal> {
    match crawl::gate(crawls, url, host_key) {
        CrawlGate::Go => {}
        CrawlGate::Dead => return Err(Refusal::DeadQueue),
        CrawlGate::Limited(name) => return Err(Refusal::AtLimit(name)),
    }
    if let Some(want) = want {
        if crawl::split_stored(url).crawl != want {
            return Err(Refusal::OtherCrawl);
        }
    }
    origin_of(url)
        .map(str::to_string)
        .ok_or(Refusal::NotCanonical)
}

/// What comes before a robots.txt fetch ([`Step::FetchRobots`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RobotsFirst {
    /// Ask for the host's address, so that even its first request waits for its IP group.
    AskAddress,
    /// The address was asked for: wait for the answer (`resolved` schedules the host).
    AwaitAddress,
    /// Every robots.txt slot is taken: wait in line for one (the heap goes on with hosts
    /// whose rules are known).
    AwaitSlot,
    /// Fetch it now (if the global quota allows).
    Fetch,
}

/// What a host whose origin needs its robots.txt does first. An address is asked for
/// (`cfg.resolve_before_robots`) only for a host without one, and not for an external
/// fetcher's; a name that did not resolve goes on to the fetch, which fails as an outcome.
/// Asking takes a robots.txt slot too (`robots_slots_taken` counts the lookups under way
/// with the fetches): a million new hosts are looked up a slot's worth at a time, not all
/// at once (a million lookups in flight at the resolvers, and their tasks in memory).
/// `cap`: the slots this call may fill (`max_robots_in_flight`, or its spare cap once
/// nothing else may go).
pub(crate) fn robots_first(
    cfg: &FrontierConfig,
    cap: Option<u64>,
    external: bool,
    has_address: bool,
    resolve: Resolve,
    robots_slots_taken: u64,
) -> RobotsFirst {
    let full = cap.is_some_and(|cap| robots_slots_taken >= cap);
    if cfg.resolve_before_robots && !external && !has_address {
        match resolve {
            Resolve::NotAsked if full => return RobotsFirst::AwaitSlot,
            Resolve::NotAsked => return RobotsFirst::AskAddress,
            Resolve::Asked => return RobotsFirst::AwaitAddress,
            Resolve::Failed => {}
        }
    }
    if full {
        return RobotsFirst::AwaitSlot;
    }
    RobotsFirst::Fetch
}

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
