//! Names and addresses: a fetch whose host name did not resolve, a host that joined an IP
//! group. (DNS lookup counts and the IP-group gauges are read from the fetcher and the
//! frontier by stats.rs.)

use std::net::IpAddr;

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// Which fetch a DNS failure hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchKind {
    Robots,
    Page,
}

impl FetchKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FetchKind::Robots => "robots",
            FetchKind::Page => "page",
        }
    }
}

/// A fetch was not sent: the address policy refuses the address its host is on. Not a
/// failure of the host (nothing backs off); a page is logged `blocked-address`, a robots.txt
/// allows all for a short while so its pages reach their own refusal.
pub struct AddressRefused<'a> {
    pub url: &'a str,
    pub fetch: FetchKind,
    pub refused: &'a fetcher::AddressRefused,
}

impl InternalEvent for AddressRefused<'_> {
    fn emit(self, m: &Metrics) {
        match self.fetch {
            // one per origin (then its pages, each in the crawl log)
            FetchKind::Robots => tracing::info!(
                url = %self.url,
                addr = %self.refused.addr,
                rule = self.refused.rule.as_str(),
                "robots.txt not fetched: address refused by the address policy"
            ),
            FetchKind::Page => tracing::debug!(
                url = %self.url,
                addr = %self.refused.addr,
                rule = self.refused.rule.as_str(),
                "page not fetched: address refused by the address policy"
            ),
        }
        m.address_refusals
            .get_or_create(&vec![
                ("fetch".to_string(), self.fetch.as_str().to_string()),
                ("rule".to_string(), self.refused.rule.as_str().to_string()),
            ])
            .inc();
    }
}

/// A fetch failed because its host name did not resolve: the host backs off (a page is
/// retried, a robots.txt failure holds the origin), other hosts go on.
pub struct DnsLookupFailed<'a> {
    pub url: &'a str,
    pub fetch: FetchKind,
    pub detail: &'a str,
}

impl InternalEvent for DnsLookupFailed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(
            url = %self.url,
            fetch = self.fetch.as_str(),
            detail = %self.detail,
            "DNS lookup failed: the host backs off"
        );
        m.fetch_dns_failures
            .get_or_create(&label("fetch", self.fetch.as_str()))
            .inc();
    }
}

/// A host's fetches connected to an address it was not known at: it shares that address's
/// politeness budget from now on.
pub struct HostAddressChanged<'a> {
    pub host: &'a str,
    pub before: Option<IpAddr>,
    pub ip: IpAddr,
}

impl InternalEvent for HostAddressChanged<'_> {
    fn emit(self, m: &Metrics) {
        match self.before {
            None => {
                tracing::debug!(host = %self.host, ip = %self.ip, "host joined the IP group of its address")
            }
            Some(before) => {
                tracing::info!(host = %self.host, %before, ip = %self.ip, "host moved to another IP group")
            }
        }
        m.host_address_changes.inc();
    }
}

/// A new host's name was resolved before its first robots.txt fetch (that fetch then waits
/// for the address's IP group), or did not resolve (its robots.txt fetch goes and reports
/// the failure as an outcome, with its back-off).
pub struct HostResolved<'a> {
    pub host: &'a str,
    pub answer: Result<IpAddr, &'a str>,
}

impl InternalEvent for HostResolved<'_> {
    fn emit(self, m: &Metrics) {
        let result = match self.answer {
            Ok(ip) => {
                tracing::debug!(host = %self.host, %ip, "host resolved before its robots.txt");
                "resolved"
            }
            Err(detail) => {
                tracing::info!(host = %self.host, %detail, "host did not resolve before its robots.txt: the fetch will report it");
                "failed"
            }
        };
        m.host_resolutions
            .get_or_create(&label("result", result))
            .inc();
    }
}
