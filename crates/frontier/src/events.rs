//! What the frontier tells its caller: counters, and the events it hands out.

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
}
