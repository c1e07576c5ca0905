//! The records the scheduler keeps about a host and the reasons a URL leaves it; `store/`
//! encodes and persists them (`store/codec.rs`), the scheduler never touches the store.

/// Per-host counters, persisted with the host record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
// The running totals are u32 in memory (the store keeps u64, codec.rs reads them back
// saturated, and they count up saturating): 32 bytes less a host keeps one in memory within
// 192 bytes (sched/hosts.rs). At one request a second a host takes 136 years to pass 2^32.
// `queued` stays u64: it is the queue's own accounting, not a total.
pub struct HostCounters {
    /// URLs ever queued for this host.
    pub enqueued: u32,
    /// URLs currently queued (not in flight).
    pub queued: u64,
    /// Page leases handed out.
    pub dispatched: u32,
    /// Page leases completed.
    pub completed: u32,
    /// URLs dropped (robots rules, skipped host).
    pub dropped: u32,
    /// URLs given up after too many attempts.
    pub given_up: u32,
    /// Retries scheduled (429/503/transient failures).
    pub retried: u32,
    /// Times a crawl-delay above the cap was clamped.
    pub crawl_delay_clamped: u32,
    /// Times the host was skipped because its crawl-delay was above the cap.
    pub crawl_delay_skipped: u32,
    /// robots.txt fetches handed out.
    pub robots_fetches: u32,
}

/// One more on a running total (saturating: see [`HostCounters`]).
pub(crate) fn bump(total: &mut u32) {
    *total = total.saturating_add(1);
}

/// The persisted per-host (per politeness key) record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
// The narrow fields keep a host in memory within 192 bytes (sched/hosts.rs): each u32 is a
// count or a span in ms far below 2^32, the back-off level is a small exponent and
// `skipped` a flag; the store keeps u64 for each (codec.rs) and reads them back saturated.
pub struct HostRecord {
    /// Numeric id used in queue keys.
    pub id: u64,
    /// Earliest instant (unix ms) of the next request.
    pub next_allowed_ms: u64,
    /// Leases in flight (reset to 0 on recovery, when leases return to the queue).
    pub in_flight: u32,
    /// Back-off level (0 = none); reset after a success.
    pub backoff_level: u16,
    /// No request before this instant (unix ms) because of back-off or Retry-After.
    pub backoff_until_ms: u64,
    /// Crawl-delay in force in ms (after capping), 0 = none.
    pub crawl_delay_ms: u32,
    /// Last response time in ms.
    pub last_response_ms: u32,
    /// The host is skipped (crawl-delay above the cap with `skip` configured).
    pub skipped: bool,
    /// Counters.
    pub counters: HostCounters,
    /// Queue sequence of the next URL to hand out: every sequence below it was handed out
    /// (returned leases and retries come back through the lease list and retry entries).
    /// 0 in records written before queues were packed into segments.
    pub head_seq: u64,
}

/// Why a URL left the frontier without being fetched to completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// robots.txt rules disallow it.
    RobotsDisallowed = 1,
    /// Host skipped because its crawl-delay is above the cap.
    CrawlDelayTooLong = 2,
    /// Retried the configured number of times.
    GaveUp = 3,
}

impl DropReason {
    /// Stable name.
    pub fn code(self) -> &'static str {
        match self {
            DropReason::RobotsDisallowed => "robots-disallowed",
            DropReason::CrawlDelayTooLong => "crawl-delay-too-long",
            DropReason::GaveUp => "gave-up",
        }
    }
}

/// A client's delay and block for a queue. Both only lengthen what the frontier's own
/// politeness asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueControl {
    /// Gap between two serves of the queue asked by the client, in ms (0: none).
    pub delay_ms: u64,
    /// Nothing is served before this instant (unix ms; 0: not blocked).
    pub blocked_until_ms: u64,
}

impl QueueControl {
    /// Whether it asks for nothing (its key can go).
    pub fn is_empty(&self) -> bool {
        self.delay_ms == 0 && self.blocked_until_ms == 0
    }
}

/// A count or a span in ms into one of the record's u32 fields, saturated (none comes near
/// 2^32: a crawl-delay is capped, a response times out).
pub(crate) fn to_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A back-off level into the record's u16, saturated (each level doubles a wait that is
/// capped long before level 16).
pub(crate) fn to_u16(v: u64) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}
