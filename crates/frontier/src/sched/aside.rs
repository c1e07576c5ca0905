//! What keeps one origin or one URL from holding up its host: URLs of held origins set
//! aside, per-URL retries waiting out their own back-off behind the queue, the order the
//! next URL is taken in, and the queue breakdown (see `docs/frontier.md`, Scheduling).

/// Queued URLs by what they wait for, from the in-memory host state (no store scan).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueBreakdown {
    /// Could be handed out now: the host's gap is over and it has a free slot.
    pub eligible: u64,
    /// Waiting for the host's gap, back-off, free slot or global quota, or for their own
    /// retry back-off.
    pub politeness: u64,
    /// Held by their origin's robots state (state name -> URLs), including URLs of a host
    /// whose robots.txt is being fetched.
    pub robots: std::collections::BTreeMap<&'static str, u64>,
    /// Of a host paused by the operator.
    pub paused: u64,
}

impl QueueBreakdown {
    /// Every queued URL.
    pub fn total(&self) -> u64 {
        self.eligible + self.politeness + self.paused + self.robots.values().sum::<u64>()
    }
}

/// URLs of one origin set aside while its robots state holds them.
pub(crate) struct Parked {
    /// Look at the origin's state again at this instant (unix ms).
    pub(crate) until_ms: u64,
    /// Their sequences, in the order they were set aside.
    pub(crate) seqs: Vec<u64>,
}

/// A URL waiting out its own retry back-off.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delayed {
    pub(crate) seq: u64,
    /// Not before this instant (unix ms).
    pub(crate) due_ms: u64,
    /// The queue's tail when it failed: it goes behind the URLs queued before it failed.
    pub(crate) behind: u64,
}

/// Where the next URL of a host comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The front: a lease returned at open, a host-throttled retry, a released parked URL.
    Front,
    /// A per-URL retry whose back-off is over.
    Delayed,
    /// The head of the queue.
    Head,
}

/// Most URLs of held origins set aside per visit of a host: a host whose only origin is
/// held sets its queue aside this fast at most (one `T` write each), not all at once.
pub(crate) const PARK_PER_VISIT: usize = 64;
