//! Lease expiry for external fetchers: a page lease handed out with a deadline returns to
//! its queue when the deadline passes without a completion (url-frontier's
//! `delay_requestable`). Pure: the caller moves the expired leases back.
//!
//! Deadlines live in memory only: at open every lease in flight returns to its queue
//! anyway (see `store/recover.rs`), which is what an expiry would have done.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use crate::work::LeaseId;

/// Deadlines of the leases handed out with one, earliest first.
#[derive(Debug, Default)]
pub struct LeaseClock {
    by_deadline: BTreeSet<(u64, u64, u64)>,
    deadline_of: HashMap<LeaseId, u64>,
}

impl LeaseClock {
    /// `lease` expires at `deadline_ms` (replacing an earlier deadline of the same lease).
    pub fn set(&mut self, lease: LeaseId, deadline_ms: u64) {
        self.clear(lease);
        self.by_deadline
            .insert((deadline_ms, lease.host_id, lease.seq));
        self.deadline_of.insert(lease, deadline_ms);
    }

    /// `lease` ended (completed or returned): it no longer expires.
    pub fn clear(&mut self, lease: LeaseId) {
        if let Some(d) = self.deadline_of.remove(&lease) {
            self.by_deadline.remove(&(d, lease.host_id, lease.seq));
        }
    }

    /// The deadline of `lease`, if it has one.
    pub fn deadline(&self, lease: LeaseId) -> Option<u64> {
        self.deadline_of.get(&lease).copied()
    }

    /// Take the leases whose deadline is at or before `now_ms`, earliest first.
    pub fn take_expired(&mut self, now_ms: u64) -> Vec<LeaseId> {
        let mut out = Vec::new();
        while let Some(&(d, host_id, seq)) = self.by_deadline.first() {
            if d > now_ms {
                break;
            }
            self.by_deadline.pop_first();
            let lease = LeaseId { host_id, seq };
            self.deadline_of.remove(&lease);
            out.push(lease);
        }
        out
    }

    /// The earliest deadline, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.by_deadline.first().map(|&(d, _, _)| d)
    }

    /// Leases with a deadline.
    pub fn len(&self) -> usize {
        self.deadline_of.len()
    }

    /// Whether no lease has a deadline.
    pub fn is_empty(&self) -> bool {
        self.deadline_of.is_empty()
    }
}

/// What a client's queue settings (url-frontier's SetDelay and BlockQueueUntil) make of a
/// host's gap: the longest of the frontier's own gap and the client's delay.
pub fn gap_with_client_delay(frontier_gap_ms: u64, client_delay_ms: u64) -> u64 {
    frontier_gap_ms.max(client_delay_ms)
}

/// The instant a host may go, with a client's block (0: none) taken into account.
pub fn ready_with_block(ready_ms: u64, blocked_until_ms: u64) -> u64 {
    ready_ms.max(blocked_until_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(seq: u64) -> LeaseId {
        LeaseId { host_id: 1, seq }
    }

    #[test]
    fn leases_expire_at_their_deadline_in_order() {
        let mut c = LeaseClock::default();
        c.set(lease(1), 300);
        c.set(lease(2), 100);
        c.set(lease(3), 200);
        assert_eq!(c.take_expired(99), vec![]);
        assert_eq!(c.take_expired(200), vec![lease(2), lease(3)]);
        assert_eq!(c.next_deadline(), Some(300));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_cleared_or_renewed_lease_does_not_expire_early() {
        let mut c = LeaseClock::default();
        c.set(lease(1), 100);
        c.set(lease(2), 100);
        c.clear(lease(1));
        c.set(lease(2), 500);
        assert_eq!(c.take_expired(400), vec![]);
        assert_eq!(c.deadline(lease(2)), Some(500));
        assert_eq!(c.take_expired(500), vec![lease(2)]);
        assert!(c.is_empty());
    }

    #[test]
    fn client_delay_and_block_only_lengthen() {
        assert_eq!(gap_with_client_delay(1_000, 0), 1_000);
        assert_eq!(gap_with_client_delay(1_000, 5_000), 5_000);
        assert_eq!(ready_with_block(10, 0), 10);
        assert_eq!(ready_with_block(10, 50), 50);
        assert_eq!(ready_with_block(60, 50), 60);
    }
}
