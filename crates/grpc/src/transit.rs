//! URLs in transit: handed out by GetURLs and not yet reported by PutURLs. url-frontier's
//! clients report a URL, not a lease, so the service keeps which lease each URL is under.
//! In memory only: at a restart every lease returns to its queue anyway.

use std::collections::HashMap;

use frontier::LeaseId;

#[derive(Debug, Default)]
pub(crate) struct Transit {
    lease_of: HashMap<String, LeaseId>,
    url_of: HashMap<LeaseId, String>,
}

impl Transit {
    /// `url` is out under `lease` (a URL leased again after an expiry replaces its lease).
    pub(crate) fn insert(&mut self, url: String, lease: LeaseId) {
        if let Some(old) = self.lease_of.insert(url.clone(), lease) {
            self.url_of.remove(&old);
        }
        self.url_of.insert(lease, url);
    }

    /// The lease `url` is out under, taken out of transit.
    pub(crate) fn take(&mut self, url: &str) -> Option<LeaseId> {
        let lease = self.lease_of.remove(url)?;
        self.url_of.remove(&lease);
        Some(lease)
    }

    /// Whether `url` is out, and under which lease.
    pub(crate) fn lease_of(&self, url: &str) -> Option<LeaseId> {
        self.lease_of.get(url).copied()
    }

    /// `lease` returned to its queue: its URL is no longer out.
    pub(crate) fn forget_lease(&mut self, lease: LeaseId) {
        if let Some(url) = self.url_of.remove(&lease) {
            self.lease_of.remove(&url);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lease_of.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_out_until_taken_or_its_lease_forgotten() {
        let mut t = Transit::default();
        let a = LeaseId { host_id: 1, seq: 1 };
        let b = LeaseId { host_id: 1, seq: 2 };
        t.insert("http://x/a".into(), a);
        t.insert("http://x/b".into(), b);
        assert_eq!(t.take("http://x/a"), Some(a));
        assert_eq!(t.take("http://x/a"), None);
        t.forget_lease(b);
        assert_eq!(t.lease_of("http://x/b"), None);
        assert_eq!(t.len(), 0);
    }
}
