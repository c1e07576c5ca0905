//! A new host's address before its first robots.txt fetch (with
//! `FrontierConfig::resolve_before_robots`): dispatch lists the host instead of handing out
//! its robots.txt, the caller resolves the name (the frontier does no I/O) and reports the
//! answer, and from then on the host waits for its IP group like any host whose address is
//! known, its robots.txt included. Without this, 400 new names on one address got their
//! 400 robots.txt requests at the pace of their own rules only (`docs/politeness.md`).

use std::net::IpAddr;

use crate::api::Frontier;
use crate::error::Result;

pub use crate::work::ResolveRequest;

/// The host part of a canonical origin `scheme://host[:port]` (an IPv6 literal without its
/// brackets).
pub(crate) fn host_of_origin(origin: &str) -> &str {
    let rest = origin.split_once("://").map_or(origin, |(_, r)| r);
    if let Some(v6) = rest.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    rest.split(':').next().unwrap_or(rest)
}

impl Frontier {
    /// The hosts to resolve before their first robots.txt fetch, listed by dispatch since
    /// the last call (each once). Each waits until [`Frontier::resolved`] reports it.
    pub fn take_resolves(&self) -> Vec<ResolveRequest> {
        std::mem::take(&mut self.inner.lock().resolves)
    }

    /// The answers to [`Frontier::take_resolves`]: (host id, its address, or None when
    /// the name did not resolve). A host with an address joins its IP group (and the
    /// address is stored, as a fetch's would be); one without lets its robots.txt fetch go,
    /// to fail as a fetch does (the DNS failure outcome, its back-off). Either way the host
    /// is scheduled again. Returns the hosts whose address changed: (host id, before, now).
    ///
    /// `Err`: the addresses could not be written. The answers are applied all the same
    /// (each host has its address in memory and goes on; its record is written with its
    /// next change): an answer lost would hold its host and its robots.txt slot for the
    /// process's life, and enough of them would stop every new host's robots.txt.
    pub fn resolved(
        &self,
        answers: &[(u64, Option<IpAddr>)],
    ) -> Result<Vec<(u64, Option<IpAddr>, IpAddr)>> {
        let found: Vec<(u64, IpAddr, u64)> = answers
            .iter()
            .filter_map(|&(id, ip)| ip.map(|ip| (id, ip, 0)))
            .collect();
        // the address before the host may go again: its first fetch is gated by it
        let noted = self.note_addresses(&found);
        let mut guard = self.inner.lock();
        for &(id, ip) in answers {
            guard.sched.handle_resolve_answered(id, ip.is_some());
        }
        noted
    }
}

#[cfg(test)]
mod tests {
    use super::host_of_origin;

    #[test]
    fn the_host_of_an_origin() {
        assert_eq!(host_of_origin("http://a.test"), "a.test");
        assert_eq!(host_of_origin("https://a.test:8443"), "a.test");
        assert_eq!(host_of_origin("http://127.0.0.2:80"), "127.0.0.2");
        assert_eq!(host_of_origin("http://[::1]:8080"), "::1");
        assert_eq!(host_of_origin("http://[2001:db8::1]"), "2001:db8::1");
    }
}
