//! Name resolution: a curl `--resolve`-like table in front of the DNS cache (`dns.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::Name;
use tower_service::Service;

use crate::address::{check_shared, AddressRefused, SharedPolicy, CONNECT_PORT};
use crate::dns::{DnsCache, DnsResult};

/// Host names pinned to IP addresses, consulted before the system resolver.
///
/// Patterns are exact names (`site-a.test`) or wildcards (`*.wild.test`, matching any
/// name that ends in `.wild.test`, but not `wild.test` itself). Matching ignores case and
/// a trailing dot; IDNs are stored as punycode. An exact entry beats a wildcard, and a
/// longer wildcard suffix beats a shorter one. The URL's port is always kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolveTable {
    exact: HashMap<String, Vec<IpAddr>>,
    /// (suffix including the leading dot, addresses), longest suffix first.
    wildcards: Vec<(String, Vec<IpAddr>)>,
}

/// A pattern that cannot go into a [`ResolveTable`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResolveTableError {
    #[error("resolve pattern {pattern:?} is not a domain name or `*.suffix` wildcard")]
    InvalidPattern { pattern: String },
    #[error("resolve pattern {pattern:?} maps to no address")]
    NoAddresses { pattern: String },
}

impl ResolveTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `pattern` (exact name or `*.suffix`) to `addrs`, replacing any earlier entry.
    pub fn insert(
        &mut self,
        pattern: &str,
        addrs: impl IntoIterator<Item = IpAddr>,
    ) -> Result<(), ResolveTableError> {
        let addrs: Vec<IpAddr> = addrs.into_iter().collect();
        if addrs.is_empty() {
            return Err(ResolveTableError::NoAddresses {
                pattern: pattern.to_owned(),
            });
        }
        let invalid = || ResolveTableError::InvalidPattern {
            pattern: pattern.to_owned(),
        };
        if let Some(suffix) = pattern.strip_prefix("*.") {
            let suffix = format!(".{}", normalize_domain(suffix).ok_or_else(invalid)?);
            self.wildcards.retain(|(s, _)| *s != suffix);
            self.wildcards.push((suffix, addrs));
            self.wildcards
                .sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        } else {
            let name = normalize_domain(pattern).ok_or_else(invalid)?;
            self.exact.insert(name, addrs);
        }
        Ok(())
    }

    /// Builder form of [`ResolveTable::insert`].
    pub fn with(
        mut self,
        pattern: &str,
        addrs: impl IntoIterator<Item = IpAddr>,
    ) -> Result<Self, ResolveTableError> {
        self.insert(pattern, addrs)?;
        Ok(self)
    }

    /// The pinned addresses for `host`, if the table has an entry that matches it.
    pub fn lookup(&self, host: &str) -> Option<&[IpAddr]> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if let Some(addrs) = self.exact.get(&host) {
            return Some(addrs);
        }
        self.wildcards
            .iter()
            .find(|(suffix, _)| host.len() > suffix.len() && host.ends_with(suffix.as_str()))
            .map(|(_, addrs)| addrs.as_slice())
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcards.is_empty()
    }
}

/// Lower-case punycode form of a domain name, or None if it is not a domain (IP literals
/// are not names: they never reach a resolver).
fn normalize_domain(name: &str) -> Option<String> {
    let name = name.trim_end_matches('.');
    if name.is_empty() || name.contains('*') {
        return None;
    }
    match url::Host::parse(name).ok()? {
        url::Host::Domain(d) => Some(d.to_ascii_lowercase()),
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => None,
    }
}

/// Name resolution failed; found in an error's source chain to classify it as DNS.
#[derive(Debug, thiserror::Error)]
#[error("resolving {host}: {source}")]
pub(crate) struct ResolveError {
    host: String,
    #[source]
    source: std::io::Error,
}

/// The resolver plugged into `HttpConnector`: the table first, then the DNS cache; the
/// answer is then passed through the address policy, so refused addresses never reach
/// the connector (a name whose every address is refused fails with [`AddressRefused`]).
#[derive(Clone)]
pub(crate) struct TableResolver {
    table: Arc<ResolveTable>,
    dns: DnsCache,
    policy: SharedPolicy,
}

impl TableResolver {
    pub(crate) fn new(table: ResolveTable, dns: DnsCache, policy: SharedPolicy) -> Self {
        TableResolver {
            table: Arc::new(table),
            dns,
            policy,
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

type ResolveFuture =
    Pin<Box<dyn Future<Output = Result<std::vec::IntoIter<SocketAddr>, BoxError>> + Send>>;

/// The addresses of `ips` the policy allows on `port`; when it allows none, the first
/// refusal.
fn allowed(
    policy: &SharedPolicy,
    ips: &[IpAddr],
    port: u16,
) -> Result<std::vec::IntoIter<SocketAddr>, BoxError> {
    let mut first_refusal: Option<AddressRefused> = None;
    let mut addrs = Vec::with_capacity(ips.len());
    for ip in ips {
        match check_shared(policy, *ip, port) {
            // Port 0: HttpConnector puts the URL's port (or the scheme default) in.
            Ok(()) => addrs.push(SocketAddr::new(*ip, 0)),
            Err(refused) => {
                first_refusal.get_or_insert(refused);
            }
        }
    }
    match (addrs.is_empty(), first_refusal) {
        (true, Some(refused)) => Err(Box::new(refused)),
        _ => Ok(addrs.into_iter()),
    }
}

impl Service<Name> for TableResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = ResolveFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // always ready: each lookup is its own future
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_owned();
        // Set by the guarded connector around this call; without it (never, in the
        // fetcher) port 0 still meets every range rule, only an own listener is missed.
        let port = CONNECT_PORT.try_with(|p| *p).unwrap_or(0);
        if let Some(ips) = self.table.lookup(&host) {
            tracing::trace!(%host, ?ips, "resolved from the resolve table");
            self.dns.count(DnsResult::Table);
            return Box::pin(std::future::ready(allowed(&self.policy, ips, port)));
        }
        let dns = self.dns.clone();
        let policy = self.policy.clone();
        Box::pin(async move {
            match dns.lookup(&host).await {
                Ok(ips) => allowed(&policy, &ips, port),
                Err(failure) => Err(Box::new(ResolveError {
                    source: std::io::Error::other(format!(
                        "{}: {}",
                        failure.result, failure.detail
                    )),
                    host,
                }) as BoxError),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(a: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, a))
    }

    #[test]
    fn exact_and_wildcard_matching() {
        let table = ResolveTable::new()
            .with("site-a.test", [ip(1)])
            .unwrap()
            .with("*.wild.test", [ip(2)])
            .unwrap()
            .with("*.deep.wild.test", [ip(3)])
            .unwrap()
            .with("pinned.wild.test", [ip(4)])
            .unwrap();
        assert_eq!(table.lookup("site-a.test"), Some(&[ip(1)][..]));
        assert_eq!(table.lookup("SITE-A.test."), Some(&[ip(1)][..]));
        assert_eq!(table.lookup("x.wild.test"), Some(&[ip(2)][..]));
        assert_eq!(table.lookup("a.b.wild.test"), Some(&[ip(2)][..]));
        assert_eq!(table.lookup("x.deep.wild.test"), Some(&[ip(3)][..]));
        assert_eq!(table.lookup("pinned.wild.test"), Some(&[ip(4)][..]));
        assert_eq!(table.lookup("wild.test"), None);
        assert_eq!(table.lookup("notwild.test"), None);
        assert_eq!(table.lookup("site-b.test"), None);
    }

    #[test]
    fn idn_patterns_are_stored_as_punycode() {
        let table = ResolveTable::new()
            .with("www.exämple.com", [ip(1)])
            .unwrap();
        assert_eq!(table.lookup("www.xn--exmple-cua.com"), Some(&[ip(1)][..]));
    }

    #[test]
    fn invalid_patterns_are_rejected() {
        let mut table = ResolveTable::new();
        assert!(table.insert("*", [ip(1)]).is_err());
        assert!(table.insert("a.*.test", [ip(1)]).is_err());
        assert!(table.insert("127.0.0.1", [ip(1)]).is_err());
        assert!(table.insert("", [ip(1)]).is_err());
        assert_eq!(
            table.insert("ok.test", []),
            Err(ResolveTableError::NoAddresses {
                pattern: "ok.test".into()
            })
        );
        assert!(table.is_empty());
    }
}
