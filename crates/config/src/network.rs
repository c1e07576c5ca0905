//! `[dns]` and the per-IP keys of `[politeness]` (`max_in_flight_per_ip`, `ip_delay`):
//! defaults, checks, and what they become for the fetcher and the frontier. The reasons
//! for the defaults are in `configs/frontierd.toml` and `docs/politeness.md`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;

use super::{range_dur, range_u64, ConfigError, Dur, PolitenessSection};

/// `[dns]`: the fetcher's DNS cache.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DnsSection {
    /// Resolvers to ask (`"ip"` or `"ip:port"`); empty: those of `/etc/resolv.conf`.
    pub servers: Vec<String>,
    /// Names cached at most (answers and failures).
    pub cache_entries: u64,
    /// An answer is kept at least this long, whatever its TTL.
    pub min_ttl: Dur,
    /// An answer is kept at most this long, whatever its TTL.
    pub max_ttl: Dur,
    /// A failed lookup is answered from the cache (as a failure) this long.
    pub negative_ttl: Dur,
    /// One lookup's limit.
    pub timeout: Dur,
}

impl Default for DnsSection {
    /// The fetcher's own defaults, written once.
    fn default() -> Self {
        let d = fetcher::DnsConfig::default();
        DnsSection {
            servers: Vec::new(),
            cache_entries: d.cache_entries as u64,
            min_ttl: Dur(d.min_ttl),
            max_ttl: Dur(d.max_ttl),
            negative_ttl: Dur(d.negative_ttl),
            timeout: Dur(d.timeout),
        }
    }
}

impl DnsSection {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        range_u64("dns.cache_entries", self.cache_entries, 1, 100_000_000)?;
        range_dur("dns.min_ttl", self.min_ttl, 0, 7 * 86_400_000)?;
        range_dur(
            "dns.max_ttl",
            self.max_ttl,
            self.min_ttl.ms(),
            7 * 86_400_000,
        )?;
        range_dur("dns.negative_ttl", self.negative_ttl, 0, 86_400_000)?;
        range_dur("dns.timeout", self.timeout, 100, 600_000)?;
        for s in &self.servers {
            if server_addr(s).is_none() {
                return Err(super::bad(
                    "dns.servers",
                    format!("{s:?}"),
                    "allowed: IP addresses, with an optional port: \"192.0.2.53\", \"127.0.0.1:5353\", \"[2001:db8::53]:53\"",
                ));
            }
        }
        Ok(())
    }

    /// The fetcher's DNS settings.
    pub fn fetcher_config(&self) -> fetcher::DnsConfig {
        fetcher::DnsConfig {
            servers: self.servers.iter().filter_map(|s| server_addr(s)).collect(),
            cache_entries: usize::try_from(self.cache_entries).unwrap_or(usize::MAX),
            min_ttl: self.min_ttl.0,
            max_ttl: self.max_ttl.0,
            negative_ttl: self.negative_ttl.0,
            timeout: self.timeout.0,
        }
    }
}

/// A resolver's address: an IP (port 53) or a socket address.
fn server_addr(s: &str) -> Option<SocketAddr> {
    let s = s.trim();
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
}

/// The frontier's per-IP defaults as `[politeness]` values.
pub(super) fn default_ip_keys() -> (u64, Dur) {
    let f = frontier::FrontierConfig::new("");
    (
        f.max_in_flight_per_ip,
        Dur(Duration::from_millis(f.ip_delay_ms)),
    )
}

/// `politeness.max_in_flight_per_ip` and `politeness.ip_delay`, checked.
pub(super) fn check_ip_keys(p: &PolitenessSection) -> Result<(), ConfigError> {
    range_u64(
        "politeness.max_in_flight_per_ip",
        p.max_in_flight_per_ip,
        1,
        100_000,
    )?;
    range_dur("politeness.ip_delay", p.ip_delay, 0, 3_600_000)
}

/// Put the per-IP keys into the frontier's settings.
pub(super) fn apply_ip_keys(p: &PolitenessSection, f: &mut frontier::FrontierConfig) {
    f.max_in_flight_per_ip = p.max_in_flight_per_ip;
    f.ip_delay_ms = p.ip_delay.ms();
    // the daemon resolves a new host before its first robots.txt (the pipeline crate), so that
    // this request too waits for the host's IP group
    f.resolve_before_robots = true;
}
