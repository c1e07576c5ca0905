//! What keeps one origin or one URL from holding up its host: URLs of held origins set
//! aside, per-URL retries waiting out their own back-off behind the queue, the order the
//! next URL is taken in, and the queue breakdown (see `docs/frontier.md`, Scheduling).

use std::sync::Arc;

use super::{keys, Frontier, FrontierError, HostMem, Inner, Result};
use crate::codec::QueueEntry;
use crate::store::Batch;

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
pub(super) struct Parked {
    /// Look at the origin's state again at this instant (unix ms).
    pub(super) until_ms: u64,
    /// Their sequences, in the order they were set aside.
    pub(super) seqs: Vec<u64>,
}

/// A URL waiting out its own retry back-off.
#[derive(Debug, Clone, Copy)]
pub(super) struct Delayed {
    pub(super) seq: u64,
    /// Not before this instant (unix ms).
    pub(super) due_ms: u64,
    /// The queue's tail when it failed: it goes behind the URLs queued before it failed.
    pub(super) behind: u64,
}

/// Where the next URL of a host comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The front: a lease returned at open, a host-throttled retry, a released parked URL.
    Front,
    /// A per-URL retry whose back-off is over.
    Delayed,
    /// The head of the queue.
    Head,
}

/// Most URLs of held origins set aside per visit of a host: a host whose only origin is
/// held sets its queue aside this fast at most (one `T` write each), not all at once.
pub(super) const PARK_PER_VISIT: usize = 64;

impl HostMem {
    /// Whether the queue from the head on is empty.
    pub(super) fn head_exhausted(&self) -> bool {
        self.next_seq_from(self.rec.head_seq).is_none()
    }

    /// The next per-URL retry that may go now: its back-off is over and the URLs queued
    /// before it failed have gone (or the queue is empty).
    pub(super) fn due_retry(&self, now_ms: u64) -> Option<usize> {
        let exhausted = self.head_exhausted();
        self.delayed
            .iter()
            .enumerate()
            .filter(|(_, d)| d.due_ms <= now_ms && (d.behind <= self.rec.head_seq || exhausted))
            .min_by_key(|(_, d)| (d.due_ms, d.seq))
            .map(|(i, _)| i)
    }

    /// When something set aside may go again (None if nothing is).
    pub(super) fn set_aside_wake(&self) -> Option<u64> {
        let parked = self.parked.values().map(|p| p.until_ms);
        let delayed = self.delayed.iter().map(|d| d.due_ms);
        parked.chain(delayed).min()
    }

    /// Make sure `seq` has a `T` entry holding `entry` (it is leaving the places the host
    /// record lists).
    pub(super) fn keep_entry(&mut self, id: u64, seq: u64, entry: &QueueEntry, batch: &mut Batch) {
        if !self.retries.contains(&seq) {
            batch.put(keys::retry(id, seq), entry.encode());
            batch.cut();
            self.retries.push(seq);
        }
    }
}

impl Frontier {
    /// Queued URLs split by what they wait for at `now_ms`, from the hosts in memory.
    pub fn queue_breakdown(&self, now_ms: u64) -> Result<QueueBreakdown> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut out = QueueBreakdown::default();
        let mut robots_of: Vec<(Arc<str>, u64)> = Vec::new();
        for h in inner.hosts.values() {
            let queued = h.rec.counters.queued;
            if inner.paused.contains(&h.key) {
                out.paused += queued;
                continue;
            }
            let mut rest = queued;
            for (origin, p) in &h.parked {
                let n = (p.seqs.len() as u64).min(rest);
                robots_of.push((origin.clone(), n));
                rest -= n;
            }
            let delayed = (h.delayed.len() as u64).min(rest);
            out.politeness += delayed;
            rest -= delayed;
            let blocking_origin = h
                .robots_pending
                .as_deref()
                .map(Arc::from)
                .or_else(|| h.held_origin.clone().filter(|_| h.hold_until_ms > now_ms));
            if let Some(origin) = blocking_origin {
                robots_of.push((origin, rest));
                continue;
            }
            let ready = h.rec.next_allowed_ms.max(h.rec.backoff_until_ms);
            if ready > now_ms || h.rec.in_flight >= self.cfg.max_in_flight_per_host {
                out.politeness += rest;
            } else {
                out.eligible += rest;
            }
        }
        for (origin, n) in robots_of {
            if n == 0 {
                continue;
            }
            let store = &self.store;
            let entry = inner.robots.entry(&origin, || {
                store
                    .get(&keys::robots(&origin))
                    .map_err(FrontierError::from)
            })?;
            *out.robots.entry(entry.state.kind()).or_default() += n;
        }
        Ok(out)
    }

    /// The next entry to hand out: the front (returned leases, host-throttled retries,
    /// released URLs of held origins) first, then a per-URL retry that is due, then the
    /// head of the queue.
    pub(super) fn head_entry(
        &self,
        id: u64,
        h: &mut HostMem,
        now_ms: u64,
    ) -> Result<Option<(u64, QueueEntry, Source)>> {
        while let Some(&seq) = h.front.first() {
            match self.entry_bytes(id, h, seq)? {
                Some(b) => return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Front))),
                None => {
                    tracing::error!(host = %h.key, seq, "returned URL has no entry; skipped");
                    h.front.remove(0);
                }
            }
        }
        while let Some(i) = h.due_retry(now_ms) {
            let seq = h.delayed[i].seq;
            match self.entry_bytes(id, h, seq)? {
                Some(b) => return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Delayed))),
                None => {
                    tracing::error!(host = %h.key, seq, "retried URL has no entry; skipped");
                    h.delayed.swap_remove(i);
                }
            }
        }
        while let Some(seq) = h.next_seq_from(h.rec.head_seq) {
            match self.entry_bytes(id, h, seq)? {
                Some(b) => {
                    h.rec.head_seq = seq;
                    return Ok(Some((seq, QueueEntry::decode(&b)?, Source::Head)));
                }
                None => h.rec.head_seq = seq + 1,
            }
        }
        Ok(None)
    }

    /// Origins whose URLs were set aside and whose robots state no longer holds them: the
    /// URLs go back to the front (they are older than the head), to be gated again.
    pub(super) fn release_parked(&self, inner: &mut Inner, id: u64, now_ms: u64) -> Result<()> {
        let due: Vec<Arc<str>> = match inner.hosts.get(&id) {
            Some(h) => h
                .parked
                .iter()
                .filter(|(_, p)| p.until_ms <= now_ms)
                .map(|(o, _)| o.clone())
                .collect(),
            None => return Ok(()),
        };
        for origin in due {
            let store = &self.store;
            let entry = inner.robots.entry(&origin, || {
                store
                    .get(&keys::robots(&origin))
                    .map_err(FrontierError::from)
            })?;
            let still_held = match entry.state.decide(now_ms) {
                crate::robots::RobotsDecision::Hold(until) => {
                    Some(until.unwrap_or(now_ms + self.cfg.robots_hold_recheck_ms))
                }
                _ => None,
            };
            let Some(h) = inner.hosts.get_mut(&id) else {
                return Ok(());
            };
            match still_held {
                Some(until) => {
                    if let Some(p) = h.parked.get_mut(&origin) {
                        p.until_ms = until.max(now_ms + 1);
                    }
                }
                None => {
                    if let Some(p) = h.parked.remove(&origin) {
                        tracing::info!(%origin, urls = p.seqs.len(), "origin no longer held: its set-aside URLs go back to the front");
                        h.front.extend(p.seqs);
                        h.front.sort_unstable();
                        h.front.dedup();
                    }
                }
            }
        }
        Ok(())
    }
}
