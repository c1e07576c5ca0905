//! What keeps one origin or one URL from holding up its host: URLs of held origins set
//! aside, per-URL retries waiting out their own back-off behind the queue, the order the
//! next URL is taken in, and the queue breakdown (see `docs/frontier.md`, Scheduling).

use std::sync::Arc;

use crate::sched::hosts::HostMem;

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

impl HostMem {
    /// Whether the queue from the head on is empty.
    pub(crate) fn head_exhausted(&self) -> bool {
        self.next_seq_from(self.rec.head_seq).is_none()
    }

    /// The next per-URL retry that may go now: its back-off is over and the URLs queued
    /// before it failed have gone (or the queue is empty).
    pub(crate) fn due_retry(&self, now_ms: u64) -> Option<usize> {
        let exhausted = self.head_exhausted();
        self.delayed
            .iter()
            .enumerate()
            .filter(|(_, d)| d.due_ms <= now_ms && (d.behind <= self.rec.head_seq || exhausted))
            .min_by_key(|(_, d)| (d.due_ms, d.seq))
            .map(|(i, _)| i)
    }

    /// When something set aside may go again (None if nothing is).
    pub(crate) fn set_aside_wake(&self) -> Option<u64> {
        let parked = self.parked.values().map(|p| p.until_ms);
        let delayed = self.delayed.iter().map(|d| d.due_ms);
        parked.chain(delayed).min()
    }

    /// `seq` is leaving the places the host record lists: whether it needs a `T` entry
    /// written (it has none yet; it is counted as having one from now on).
    pub(crate) fn keep_entry(&mut self, seq: u64) -> bool {
        if self.retries.contains(&seq) {
            return false;
        }
        self.retries.push(seq);
        true
    }

    /// Set `seq` aside while `origin` is held until `until_ms`; true if the origin was not
    /// held before.
    pub(crate) fn park(&mut self, origin: &str, seq: u64, until_ms: u64) -> bool {
        let mut first = false;
        let p = self.parked.entry(Arc::from(origin)).or_insert_with(|| {
            first = true;
            Parked {
                until_ms,
                seqs: Vec::new(),
            }
        });
        p.until_ms = p.until_ms.min(until_ms);
        p.seqs.push(seq);
        first
    }

    /// Origins whose set-aside URLs are due for another look at `now_ms`.
    pub(crate) fn parked_due(&self, now_ms: u64) -> Vec<Arc<str>> {
        self.parked
            .iter()
            .filter(|(_, p)| p.until_ms <= now_ms)
            .map(|(o, _)| o.clone())
            .collect()
    }

    /// After a look at a parked origin's robots state: still held (until `until_ms`), or
    /// free, when its URLs go back to the front (they are older than the head) to be
    /// gated again. Returns how many went back.
    pub(crate) fn recheck_parked(
        &mut self,
        origin: &str,
        held_until: Option<u64>,
        now_ms: u64,
    ) -> usize {
        match held_until {
            Some(until) => {
                if let Some(p) = self.parked.get_mut(origin) {
                    p.until_ms = until.max(now_ms + 1);
                }
                0
            }
            None => match self.parked.remove(origin) {
                Some(p) => {
                    let n = p.seqs.len();
                    self.front.extend(p.seqs);
                    self.front.sort_unstable();
                    self.front.dedup();
                    n
                }
                None => 0,
            },
        }
    }
}
