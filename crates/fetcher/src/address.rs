//! The address policy: which IP addresses a fetch may connect to.
//!
//! A crawler follows links written by strangers. Without a policy, any page could make it
//! read the machine's own services (the admin API, a cloud metadata endpoint at
//! 169.254.169.254, a database on 10.x.x.x) and archive the answer, and a public name that
//! resolves to such an address (DNS rebinding), or a redirect, does the same. So the
//! special-purpose ranges (loopback, private, link-local, ...) are refused unless the
//! operator allows them, and the check is made on the address a connection is actually
//! made to: after the `[resolve]` table and DNS, for every request (pages, robots.txt,
//! sitemaps, each redirect hop). An IPv4 address written in IPv6 form (IPv4-mapped
//! `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`)
//! is judged as the IPv4 address it carries.
//!
//! Order of the rules: the daemon's own listening addresses are always refused; then the
//! operator's `deny` list; then the `allow` list; then the built-in list. (`allow =
//! ["0.0.0.0/0", "::/0"]` turns the built-in list off.)

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use http::Uri;
use tower_service::Service;

pub use ipnet::IpNet;

/// Why an address was refused: a built-in range, the operator's deny list, or the
/// daemon's own listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressRule {
    /// 0.0.0.0/8 "this network" (RFC 791), except 0.0.0.0 itself.
    ThisNetwork,
    /// 0.0.0.0 or `::`.
    Unspecified,
    /// 127.0.0.0/8, `::1`.
    Loopback,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16.
    Private,
    /// 100.64.0.0/10, shared address space (RFC 6598, carrier-grade NAT).
    Cgnat,
    /// 169.254.0.0/16, fe80::/10 (cloud metadata services live here).
    LinkLocal,
    /// fc00::/7 (RFC 4193).
    UniqueLocal,
    /// fec0::/10, deprecated site-local (RFC 3879), still routed inside some networks.
    SiteLocal,
    /// 192.0.0.0/24 IETF protocol assignments (RFC 6890), 64:ff9b:1::/48 local NAT64.
    IetfProtocol,
    /// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 198.18.0.0/15, 2001:2::/48 (RFC 2544, RFC 5180).
    Benchmarking,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240.0.0.0/4 (reserved for future use), 100::/64 (discard-only).
    Reserved,
    /// In `[addresses] deny`.
    Denied,
    /// One of the daemon's own listening addresses (admin API, gRPC): never fetched,
    /// whatever `allow` says.
    OwnListener,
}

impl AddressRule {
    /// Every rule, in this order (metric labels).
    pub const ALL: [AddressRule; 16] = [
        AddressRule::ThisNetwork,
        AddressRule::Unspecified,
        AddressRule::Loopback,
        AddressRule::Private,
        AddressRule::Cgnat,
        AddressRule::LinkLocal,
        AddressRule::UniqueLocal,
        AddressRule::SiteLocal,
        AddressRule::IetfProtocol,
        AddressRule::Documentation,
        AddressRule::Benchmarking,
        AddressRule::Multicast,
        AddressRule::Broadcast,
        AddressRule::Reserved,
        AddressRule::Denied,
        AddressRule::OwnListener,
    ];

    /// The stable name (metric label, crawl log reason).
    pub fn as_str(self) -> &'static str {
        match self {
            AddressRule::ThisNetwork => "this-network",
            AddressRule::Unspecified => "unspecified",
            AddressRule::Loopback => "loopback",
            AddressRule::Private => "private",
            AddressRule::Cgnat => "cgnat",
            AddressRule::LinkLocal => "link-local",
            AddressRule::UniqueLocal => "unique-local",
            AddressRule::SiteLocal => "site-local",
            AddressRule::IetfProtocol => "ietf-protocol",
            AddressRule::Documentation => "documentation",
            AddressRule::Benchmarking => "benchmarking",
            AddressRule::Multicast => "multicast",
            AddressRule::Broadcast => "broadcast",
            AddressRule::Reserved => "reserved",
            AddressRule::Denied => "deny",
            AddressRule::OwnListener => "own-listener",
        }
    }
}

impl fmt::Display for AddressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One refused connection target: the address (with the port connected to) and the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("address {addr} refused by the address policy (rule {rule})")]
pub struct AddressRefused {
    pub addr: SocketAddr,
    pub rule: AddressRule,
}

/// Which addresses fetches may connect to. `Default` is the built-in refusals with no
/// `allow`, no `deny` and no own listeners: safe to point at the open web.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Allowed even when the built-in list refuses them (an intranet crawl, a test
    /// site on loopback).
    pub allow: Vec<IpNet>,
    /// Refused in addition to the built-in list; wins over `allow`.
    pub deny: Vec<IpNet>,
    /// The daemon's own listening addresses. An unspecified IP (0.0.0.0, `::`) stands for
    /// every address: its port is then refused on all of them.
    pub own_listeners: Vec<SocketAddr>,
}

impl AddressPolicy {
    /// Adds `net` to `allow` (builder form).
    pub fn allowing(mut self, net: IpNet) -> Self {
        self.allow.push(net);
        self
    }

    /// The built-in list with loopback (127.0.0.0/8 and ::1) allowed: what tests against
    /// servers on this machine need.
    pub fn allowing_loopback() -> Self {
        // (both prefixes are valid; an invalid one is left out, never widened to /0)
        let v4 = ipnet::Ipv4Net::new(Ipv4Addr::new(127, 0, 0, 0), 8).map(IpNet::V4);
        let v6 = ipnet::Ipv6Net::new(Ipv6Addr::LOCALHOST, 128).map(IpNet::V6);
        AddressPolicy {
            allow: [v4.ok(), v6.ok()].into_iter().flatten().collect(),
            ..AddressPolicy::default()
        }
    }

    /// Whether a connection to `ip` on `port` may be made.
    pub fn check(&self, ip: IpAddr, port: u16) -> Result<(), AddressRefused> {
        let refused = |rule| AddressRefused {
            addr: SocketAddr::new(ip, port),
            rule,
        };
        let canonical = canonical_ip(ip);
        if self.own_listeners.iter().any(|l| {
            l.port() == port && (l.ip().is_unspecified() || canonical_ip(l.ip()) == canonical)
        }) {
            return Err(refused(AddressRule::OwnListener));
        }
        if self
            .deny
            .iter()
            .any(|net| net.contains(&ip) || net.contains(&canonical))
        {
            return Err(refused(AddressRule::Denied));
        }
        if self
            .allow
            .iter()
            .any(|net| net.contains(&ip) || net.contains(&canonical))
        {
            return Ok(());
        }
        match builtin_rule(ip) {
            Some(rule) => Err(refused(rule)),
            None => Ok(()),
        }
    }
}

/// The built-in range `ip` falls in, if any.
pub fn builtin_rule(ip: IpAddr) -> Option<AddressRule> {
    match ip {
        IpAddr::V4(v4) => v4_rule(v4),
        IpAddr::V6(v6) => v6_rule(v6),
    }
}

/// An IPv4 address carried in IPv6 form as that IPv4 address; anything else as it is.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The IPv4 address an IPv6 address carries: IPv4-mapped (::ffff:0:0/96), IPv4-compatible
/// (::/96, except :: and ::1), NAT64 well-known prefix (64:ff9b::/96), 6to4 (2002::/16).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        [0, 0, 0, 0, 0, 0, 0, 0] | [0, 0, 0, 0, 0, 0, 0, 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

fn v4_rule(ip: Ipv4Addr) -> Option<AddressRule> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_unspecified() => AddressRule::Unspecified,
        (0, _, _) => AddressRule::ThisNetwork,
        (127, _, _) => AddressRule::Loopback,
        (10, _, _) => AddressRule::Private,
        (172, 16..=31, _) => AddressRule::Private,
        (192, 168, _) => AddressRule::Private,
        (100, 64..=127, _) => AddressRule::Cgnat,
        (169, 254, _) => AddressRule::LinkLocal,
        (192, 0, 0) => AddressRule::IetfProtocol,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => AddressRule::Documentation,
        (198, 18..=19, _) => AddressRule::Benchmarking,
        (224..=239, _, _) => AddressRule::Multicast,
        _ if ip.is_broadcast() => AddressRule::Broadcast,
        (240..=255, _, _) => AddressRule::Reserved,
        _ => return None,
    })
}

fn v6_rule(ip: Ipv6Addr) -> Option<AddressRule> {
    if ip.is_unspecified() {
        return Some(AddressRule::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressRule::Loopback);
    }
    if let Some(v4) = embedded_v4(ip) {
        return v4_rule(v4);
    }
    let s = ip.segments();
    Some(match s[0] {
        0xfe80..=0xfebf => AddressRule::LinkLocal,
        0xfec0..=0xfeff => AddressRule::SiteLocal,
        0xfc00..=0xfdff => AddressRule::UniqueLocal,
        0xff00..=0xffff => AddressRule::Multicast,
        0x2001 if s[1] == 0x0db8 => AddressRule::Documentation,
        0x3fff if s[1] <= 0x0fff => AddressRule::Documentation,
        0x2001 if s[1] == 0x0002 && s[2] == 0 => AddressRule::Benchmarking,
        0x0064 if s[1] == 0xff9b && s[2] == 1 => AddressRule::IetfProtocol,
        0x0100 if s[1..4] == [0, 0, 0] => AddressRule::Reserved,
        _ => return None,
    })
}

/// The policy as the connector and the resolver read it: shared with the [`crate::Fetcher`],
/// which adds the daemon's own listeners once they are bound.
pub(crate) type SharedPolicy = Arc<RwLock<AddressPolicy>>;

/// Checks `ip` on `port` against the shared policy.
pub(crate) fn check_shared(
    policy: &SharedPolicy,
    ip: IpAddr,
    port: u16,
) -> Result<(), AddressRefused> {
    match policy.read() {
        Ok(p) => p.check(ip, port),
        Err(poisoned) => poisoned.into_inner().check(ip, port),
    }
}

tokio::task_local! {
    /// The port of the connection being made, for the resolver's check (the resolver is
    /// given only the name; the connector knows the port).
    pub(crate) static CONNECT_PORT: u16;
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Wraps the TCP connector: an IP literal in the URL is checked here (the connector does
/// not ask the resolver for it); for a name, the port is made known to the resolver,
/// which drops refused addresses from its answer. So no connection is ever attempted to a
/// refused address, whatever the table, DNS or a redirect said.
#[derive(Clone)]
pub(crate) struct GuardedConnector<C> {
    inner: C,
    policy: SharedPolicy,
}

impl<C> GuardedConnector<C> {
    pub(crate) fn new(inner: C, policy: SharedPolicy) -> Self {
        GuardedConnector { inner, policy }
    }
}

impl<C> Service<Uri> for GuardedConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("https") => 443,
            _ => 80,
        });
        let literal = uri
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|h| h.parse::<IpAddr>().ok());
        if let Some(ip) = literal {
            if let Err(refused) = check_shared(&self.policy, ip, port) {
                return Box::pin(std::future::ready(Err(Box::new(refused) as BoxError)));
            }
        }
        let connecting = CONNECT_PORT.scope(port, self.inner.call(uri));
        Box::pin(async move { connecting.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule_of(ip: &str) -> Option<AddressRule> {
        builtin_rule(ip.parse().expect(ip))
    }

    /// Every built-in range, at its first and last address and just outside, in both
    /// families and in the IPv6 forms that carry an IPv4 address.
    #[test]
    fn builtin_ranges_in_both_families() {
        use AddressRule::*;
        let table: &[(&str, Option<AddressRule>)] = &[
            ("0.0.0.0", Some(Unspecified)),
            ("0.0.0.1", Some(ThisNetwork)),
            ("0.255.255.255", Some(ThisNetwork)),
            ("1.0.0.0", None),
            ("9.255.255.255", None),
            ("10.0.0.0", Some(Private)),
            ("10.255.255.255", Some(Private)),
            ("11.0.0.0", None),
            ("100.63.255.255", None),
            ("100.64.0.0", Some(Cgnat)),
            ("100.127.255.255", Some(Cgnat)),
            ("100.128.0.0", None),
            ("126.255.255.255", None),
            ("127.0.0.0", Some(Loopback)),
            ("127.0.0.1", Some(Loopback)),
            ("127.255.255.255", Some(Loopback)),
            ("128.0.0.0", None),
            ("169.253.255.255", None),
            ("169.254.0.0", Some(LinkLocal)),
            ("169.254.169.254", Some(LinkLocal)),
            ("169.254.255.255", Some(LinkLocal)),
            ("169.255.0.0", None),
            ("172.15.255.255", None),
            ("172.16.0.0", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.32.0.0", None),
            ("192.0.0.0", Some(IetfProtocol)),
            ("192.0.0.255", Some(IetfProtocol)),
            ("192.0.1.0", None),
            ("192.0.2.0", Some(Documentation)),
            ("192.0.2.255", Some(Documentation)),
            ("192.0.3.0", None),
            ("192.167.255.255", None),
            ("192.168.0.0", Some(Private)),
            ("192.168.255.255", Some(Private)),
            ("192.169.0.0", None),
            ("198.17.255.255", None),
            ("198.18.0.0", Some(Benchmarking)),
            ("198.19.255.255", Some(Benchmarking)),
            ("198.20.0.0", None),
            ("198.51.100.7", Some(Documentation)),
            ("203.0.113.255", Some(Documentation)),
            ("203.0.114.0", None),
            ("223.255.255.255", None),
            ("224.0.0.0", Some(Multicast)),
            ("239.255.255.255", Some(Multicast)),
            ("240.0.0.0", Some(Reserved)),
            ("255.255.255.254", Some(Reserved)),
            ("255.255.255.255", Some(Broadcast)),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
            // IPv6
            ("::", Some(Unspecified)),
            ("::1", Some(Loopback)),
            ("::2", Some(ThisNetwork)), // IPv4-compatible 0.0.0.2
            ("fe80::", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("febf:ffff::", Some(LinkLocal)),
            ("fec0::1", Some(SiteLocal)),
            ("feff::1", Some(SiteLocal)),
            ("fbff:ffff::", None),
            ("fc00::", Some(UniqueLocal)),
            ("fd12:3456::1", Some(UniqueLocal)),
            ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(UniqueLocal)),
            ("fe00::", None),
            ("ff00::", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("2001:db8::", Some(Documentation)),
            ("2001:db8:ffff::1", Some(Documentation)),
            ("2001:db9::", None),
            ("3fff::1", Some(Documentation)),
            ("3fff:fff::1", Some(Documentation)),
            ("3fff:1000::1", None),
            ("2001:2::1", Some(Benchmarking)),
            ("2001:2:1::1", None),
            ("64:ff9b:1::1", Some(IetfProtocol)),
            ("100::1", Some(Reserved)),
            ("100:0:0:1::", None),
            ("2606:4700::1111", None),
            ("2001:4860:4860::8888", None),
            // IPv4 in IPv6 form: judged as the IPv4 address
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:10.1.2.3", Some(Private)),
            ("::ffff:169.254.169.254", Some(LinkLocal)),
            ("::ffff:0.0.0.0", Some(Unspecified)),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some(Loopback)),
            ("::192.168.1.1", Some(Private)),
            ("::100.64.0.1", Some(Cgnat)),
            ("::8.8.8.8", None),
            ("64:ff9b::127.0.0.1", Some(Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(LinkLocal)),
            ("64:ff9b::8.8.8.8", None),
            ("2002:7f00:1::", Some(Loopback)),
            ("2002:a00:1::1", Some(Private)),
            ("2002:808:808::1", None),
        ];
        for (ip, want) in table {
            assert_eq!(rule_of(ip), *want, "{ip}");
        }
    }

    #[test]
    fn allowing_loopback_allows_loopback_only() {
        let p = AddressPolicy::allowing_loopback();
        assert!(p.check("127.0.0.1".parse().unwrap(), 80).is_ok());
        assert!(p.check("127.255.0.9".parse().unwrap(), 80).is_ok());
        assert!(p.check("::1".parse().unwrap(), 80).is_ok());
        assert!(p.check("10.0.0.1".parse().unwrap(), 80).is_err());
        assert!(p.check("169.254.169.254".parse().unwrap(), 80).is_err());
    }

    #[test]
    fn every_rule_has_a_distinct_name() {
        let mut names: Vec<_> = AddressRule::ALL.iter().map(|r| r.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), AddressRule::ALL.len());
    }

    fn net(s: &str) -> IpNet {
        s.parse().expect(s)
    }

    #[test]
    fn allow_opens_a_range_and_deny_wins_over_allow() {
        let p = AddressPolicy::default()
            .allowing(net("10.0.0.0/8"))
            .allowing(net("127.0.0.0/8"));
        let p = AddressPolicy {
            deny: vec![net("10.1.0.0/16"), net("8.8.8.0/24")],
            ..p
        };
        let check = |ip: &str| p.check(ip.parse().unwrap(), 80).map_err(|e| e.rule);
        assert_eq!(check("10.2.3.4"), Ok(()));
        assert_eq!(
            check("::ffff:10.2.3.4"),
            Ok(()),
            "mapped form of an allowed address"
        );
        assert_eq!(check("127.0.0.1"), Ok(()));
        assert_eq!(check("10.1.2.3"), Err(AddressRule::Denied));
        assert_eq!(check("::ffff:10.1.2.3"), Err(AddressRule::Denied));
        assert_eq!(check("8.8.8.8"), Err(AddressRule::Denied));
        assert_eq!(check("8.8.4.4"), Ok(()));
        assert_eq!(check("192.168.0.1"), Err(AddressRule::Private));
        assert_eq!(check("::1"), Err(AddressRule::Loopback));
        assert_eq!(check("169.254.169.254"), Err(AddressRule::LinkLocal));
    }

    #[test]
    fn own_listeners_are_refused_even_when_allowed() {
        let p = AddressPolicy {
            own_listeners: vec![
                "127.0.0.1:8470".parse().unwrap(),
                "[::]:9090".parse().unwrap(),
            ],
            ..AddressPolicy::allowing_loopback()
        };
        let check = |ip: &str, port| p.check(ip.parse().unwrap(), port).map_err(|e| e.rule);
        assert_eq!(check("127.0.0.1", 8470), Err(AddressRule::OwnListener));
        assert_eq!(
            check("::ffff:127.0.0.1", 8470),
            Err(AddressRule::OwnListener)
        );
        assert_eq!(check("127.0.0.1", 8471), Ok(()));
        assert_eq!(
            check("127.0.0.2", 8470),
            Ok(()),
            "another loopback address, allowed"
        );
        // an unspecified listener answers on every address: its port is refused on all
        assert_eq!(check("127.0.0.5", 9090), Err(AddressRule::OwnListener));
        assert_eq!(check("93.184.216.34", 9090), Err(AddressRule::OwnListener));
        assert_eq!(check("93.184.216.34", 80), Ok(()));
    }

    #[test]
    fn refusal_names_the_address_port_and_rule() {
        let e = AddressPolicy::default()
            .check("169.254.169.254".parse().unwrap(), 80)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "address 169.254.169.254:80 refused by the address policy (rule link-local)"
        );
    }
}
