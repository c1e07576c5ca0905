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

/// A host's set-aside URLs by origin. Almost every host has none, and a host has few
/// origins: a list costs 8 bytes per host where a map cost 48 (a million hosts in memory).
#[derive(Default)]
pub(crate) struct ParkedOrigins(thin_vec::ThinVec<(std::sync::Arc<str>, Parked)>);

impl ParkedOrigins {
    pub(crate) const fn new() -> ParkedOrigins {
        ParkedOrigins(thin_vec::ThinVec::new())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Parked> {
        self.0.iter().map(|(_, p)| p)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&std::sync::Arc<str>, &Parked)> {
        self.0.iter().map(|(o, p)| (o, p))
    }

    pub(crate) fn get_mut(&mut self, origin: &str) -> Option<&mut Parked> {
        self.0
            .iter_mut()
            .find(|(o, _)| &**o == origin)
            .map(|(_, p)| p)
    }

    pub(crate) fn remove(&mut self, origin: &str) -> Option<Parked> {
        let i = self.0.iter().position(|(o, _)| &**o == origin)?;
        Some(self.0.remove(i).1)
    }

    /// The origin's entry, made by `new` if it has none; true if it was made.
    pub(crate) fn get_or_insert(
        &mut self,
        origin: &str,
        new: impl FnOnce() -> Parked,
    ) -> (&mut Parked, bool) {
        match self.0.iter().position(|(o, _)| &**o == origin) {
            Some(i) => (&mut self.0[i].1, false),
            None => {
                self.0.push((std::sync::Arc::from(origin), new()));
                let last = self.0.len() - 1;
                (&mut self.0[last].1, true)
            }
        }
    }
}

/// A URL waiting out its own retry back-off.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delayed {
    pub(crate) seq: u64,
    /// Not before this instant (unix ms).
    pub(crate) due_ms: u64,
    /// The queue's tail when it failed: it goes behind the URLs queued before it failed.
    pub(crate) behind: u64,
    /// Taken back from an external fetcher whose lease expired: a report of that lease
    /// arriving late still completes it ([`crate::Frontier::complete_visits`]).
    pub(crate) expired: bool,
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
