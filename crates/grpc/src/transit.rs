//! URLs in transit: handed out by GetURLs and not yet reported by PutURLs. url-frontier's
//! clients report a URL, not a lease, so the service keeps which lease each URL is under.
//! A lease that expired is remembered a while longer ([`EXPIRED_REMEMBERED`] of them): a
//! fetch slower than its lease reports it late, and that report still completes the URL.
//! In memory only: at a restart every lease returns to its queue anyway. URLs are held as
//! the 128-bit hash of their transit key (`service::transit_key`), not as strings: two
//! maps of strings cost an allocation and a copy of the URL per lease each way. (Fx-hashed:
//! SipHash over these keys was most of the maps' cost.)

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use frontier::LeaseId;

/// Expired leases remembered for late reports, at most (the oldest are forgotten first).
pub(crate) const EXPIRED_REMEMBERED: usize = 100_000;

#[derive(Debug, Default)]
pub(crate) struct Transit {
    lease_of: HashMap<u128, LeaseId>,
    url_of: HashMap<LeaseId, u128>,
    /// URL -> its expired lease, for a late report.
    expired: HashMap<u128, LeaseId>,
    /// The order they expired in (entries may be stale: checked against `expired`).
    expired_order: VecDeque<(u128, LeaseId)>,
}

impl Transit {
    /// `url` is out under `lease` (a URL leased again after an expiry replaces its lease).
    pub(crate) fn insert(&mut self, url: u128, lease: LeaseId) {
        self.expired.remove(&url);
        if let Some(old) = self.lease_of.insert(url, lease) {
            self.url_of.remove(&old);
        }
        self.url_of.insert(lease, url);
    }

    /// The lease `url` is out under, taken out of transit; else the lease under which it
    /// was out when that expired (a late report: the frontier completes the URL if it has
    /// not been handed out again or given up).
    pub(crate) fn take(&mut self, url: u128) -> Option<LeaseId> {
        if let Some(lease) = self.lease_of.remove(&url) {
            self.url_of.remove(&lease);
            return Some(lease);
        }
        self.expired.remove(&url)
    }

    /// Whether `url` is out, and under which lease.
    pub(crate) fn lease_of(&self, url: u128) -> Option<LeaseId> {
        self.lease_of.get(&url).copied()
    }

    /// `lease` expired: its URL is no longer out, but a late report of it is expected.
    pub(crate) fn forget_lease(&mut self, lease: LeaseId) {
        if let Some(url) = self.url_of.remove(&lease) {
            self.lease_of.remove(&url);
            self.expired.insert(url, lease);
            self.expired_order.push_back((url, lease));
            while self.expired_order.len() > EXPIRED_REMEMBERED {
                if let Some((old, old_lease)) = self.expired_order.pop_front() {
                    if self.expired.get(&old) == Some(&old_lease) {
                        self.expired.remove(&old);
                    }
                }
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lease_of.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> u128 {
        frontier::url_hash(s)
    }

    #[test]
    fn a_url_is_out_until_taken_or_its_lease_forgotten() {
        let mut t = Transit::default();
        let a = LeaseId { host_id: 1, seq: 1 };
        let b = LeaseId { host_id: 1, seq: 2 };
        t.insert(u("http://x/a"), a);
        t.insert(u("http://x/b"), b);
        assert_eq!(t.take(u("http://x/a")), Some(a));
        assert_eq!(t.take(u("http://x/a")), None);
        t.forget_lease(b);
        assert_eq!(t.lease_of(u("http://x/b")), None);
        assert_eq!(t.len(), 0);
        // a late report still finds the expired lease, once
        assert_eq!(t.take(u("http://x/b")), Some(b));
        assert_eq!(t.take(u("http://x/b")), None);
    }

    #[test]
    fn a_lease_given_again_replaces_the_expired_one_and_old_expiries_are_forgotten() {
        let mut t = Transit::default();
        let a = LeaseId { host_id: 1, seq: 1 };
        t.insert(u("http://x/a"), a);
        t.forget_lease(a);
        t.insert(u("http://x/a"), a);
        assert_eq!(t.lease_of(u("http://x/a")), Some(a));
        assert_eq!(t.take(u("http://x/a")), Some(a));
        assert_eq!(
            t.take(u("http://x/a")),
            None,
            "the expiry before the new lease is gone"
        );
        for i in 0..(EXPIRED_REMEMBERED as u64 + 10) {
            let l = LeaseId { host_id: 2, seq: i };
            t.insert(u(&format!("http://y/{i}")), l);
            t.forget_lease(l);
        }
        assert_eq!(
            t.take(u("http://y/0")),
            None,
            "the oldest expiry is forgotten"
        );
        assert!(t
            .take(u(&format!("http://y/{}", EXPIRED_REMEMBERED + 9)))
            .is_some());
        assert!(t.expired.len() <= EXPIRED_REMEMBERED);
    }
}
