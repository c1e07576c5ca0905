//! What the frontier tells its caller: counters, the events it hands out, and typed views
//! of what it stores.

use std::collections::VecDeque;

use crate::store::codec::DropRecord;

/// Global counters since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontierStats {
    /// URLs queued.
    pub enqueued: u64,
    /// Duplicates refused.
    pub duplicates: u64,
    /// URLs rejected.
    pub rejected: u64,
    /// Page leases handed out.
    pub dispatched: u64,
    /// robots.txt fetches handed out.
    pub robots_fetches: u64,
    /// Page leases completed.
    pub completed: u64,
    /// Of those, reports that came after their lease had expired (the URL not handed out
    /// again meanwhile): completed all the same, not fetched again.
    pub late_reports: u64,
    /// URLs dropped (robots rules or skipped host).
    pub dropped: u64,
    /// URLs given up.
    pub given_up: u64,
    /// Retries scheduled.
    pub retried: u64,
    /// Crawl-delays clamped to the cap.
    pub crawl_delay_clamped: u64,
    /// URLs dropped because the host's crawl-delay exceeds the cap.
    pub crawl_delay_skipped: u64,
    /// Times the global quota stopped a dispatch.
    pub rate_limited: u64,
    /// Leases returned to their queues at open.
    pub recovered_leases: u64,
    /// Fetched URLs given a next due time (recrawl).
    pub revisits_scheduled: u64,
    /// Due URLs moved from the due index back to their host queues.
    pub revisits_queued: u64,
    /// URLs that left the schedule after `gone_after` 404/410 answers in a row.
    pub revisits_gone: u64,
    /// Scheduled URLs made due now by a sitemap `lastmod` later than their last fetch.
    pub lastmod_moves: u64,
    /// Hosts whose address was asked for before their first robots.txt fetch.
    pub resolves_asked: u64,
    /// Times a host ready by its own rules waited for its IP address's budget (a slot, or
    /// the gap between two requests to the address).
    pub ip_waits: u64,
}

/// What the gauges show about the queues, from one walk over the hosts in memory
/// ([`crate::Frontier::queue_gauges`]).
#[derive(Debug, Clone, Default)]
pub struct QueueGauges {
    pub totals: HostTotals,
    pub breakdown: crate::QueueBreakdown,
    /// When the walk was made (the caller's clock, unix ms).
    pub computed_at_ms: u64,
}

/// Totals over the hosts with work, from [`crate::Frontier::host_totals`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostTotals {
    /// URLs queued over all hosts.
    pub queued: u64,
    /// Leases (pages and robots.txt) out over all hosts.
    pub in_flight: u64,
    /// Hosts with work that are backing off (after 429/503/errors).
    pub in_backoff: u64,
    /// Politeness keys paused by the operator.
    pub paused: u64,
}

/// Something the frontier did that its caller logs, counts or acts on; taken with
/// [`crate::Frontier::poll_event`] or [`crate::Frontier::drain_events`], oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrontierEvent {
    /// A URL dropped (robots rules, skipped host) or given up; durable before it is
    /// listed. Acknowledge it with [`crate::Frontier::drops_logged`] once logged, or it is
    /// reported again after a restart (at-least-once).
    Dropped(DropRecord),
    /// A robots.txt outcome was applied to an origin's state (`from` and `to` may be equal:
    /// a refresh).
    RobotsTransition {
        /// `scheme://host[:port]`.
        origin: String,
        /// State before.
        from: &'static str,
        /// State after.
        to: &'static str,
    },
    /// Leases in flight when the last run ended went back to their queues at open.
    LeasesReturned {
        /// How many.
        count: u64,
    },
    /// A checkpoint of the host journal ended: the latest record of every host changed
    /// since the one before is in `H`, and the journal records it covered are gone.
    JournalCheckpointed {
        /// Host records it wrote.
        hosts: u64,
        /// Journal bytes it covered (what triggered it).
        journal_bytes: u64,
    },
}

/// Events not yet taken, bounded: past [`MAX_EVENTS`] the newest are not kept (the store
/// still has every [`DropRecord`], and unacknowledged drops come back at the next open).
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    events: VecDeque<FrontierEvent>,
    /// Events not kept because the queue was full.
    pub(crate) lost: u64,
}

/// Most events kept for the caller.
pub const MAX_EVENTS: usize = 100_000;

impl EventQueue {
    pub(crate) fn push(&mut self, ev: FrontierEvent) {
        if self.events.len() < MAX_EVENTS {
            self.events.push_back(ev);
        } else {
            self.lost += 1;
        }
    }

    pub(crate) fn pop(&mut self) -> Option<FrontierEvent> {
        self.events.pop_front()
    }

    pub(crate) fn drain(&mut self) -> Vec<FrontierEvent> {
        self.events.drain(..).collect()
    }
}

/// One origin's robots state as the frontier holds it, decoded.
#[derive(Debug, Clone)]
pub struct OriginView {
    /// `scheme://host[:port]`.
    pub origin: String,
    /// Its status at the instant asked about.
    pub status: robots_policy::state::RobotsStatus,
    /// Sitemaps named by the copy in force (or the last good one).
    pub sitemaps: Vec<String>,
}
