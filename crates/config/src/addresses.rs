//! `[addresses]`: the fetcher's address policy (which IP addresses a fetch may connect
//! to). The built-in refusals and why: `docs/fetcher.md`, "Address policy".

use serde::Deserialize;

use super::{bad, ConfigError};

/// `[addresses]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AddressesSection {
    /// CIDRs (or single addresses) allowed even though the built-in list refuses them:
    /// `["127.0.0.0/8"]` for sites on this machine, `["10.0.0.0/8"]` for an intranet crawl.
    pub allow: Vec<String>,
    /// CIDRs refused in addition to the built-in list; a deny wins over an allow.
    pub deny: Vec<String>,
}

const ALLOWED: &str = "allowed: CIDRs such as \"127.0.0.0/8\", \"10.0.0.0/8\", \"fd00::/8\", or single addresses (\"192.0.2.10\", \"::1\")";

/// A CIDR, or one address as its /32 or /128.
fn net(s: &str) -> Option<fetcher::IpNet> {
    let s = s.trim();
    s.parse::<fetcher::IpNet>()
        .ok()
        .or_else(|| s.parse::<std::net::IpAddr>().ok().map(fetcher::IpNet::from))
}

impl AddressesSection {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (key, list) in [
            ("addresses.allow", &self.allow),
            ("addresses.deny", &self.deny),
        ] {
            for s in list {
                if net(s).is_none() {
                    return Err(bad(key, format!("{s:?}"), ALLOWED));
                }
            }
        }
        Ok(())
    }

    /// The fetcher's policy (the daemon adds its own listeners once they are bound).
    pub fn policy(&self) -> fetcher::AddressPolicy {
        fetcher::AddressPolicy {
            allow: self.allow.iter().filter_map(|s| net(s)).collect(),
            deny: self.deny.iter().filter_map(|s| net(s)).collect(),
            own_listeners: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_and_single_addresses_are_read_and_others_refused_by_name() {
        let s = AddressesSection {
            allow: vec!["127.0.0.0/8".into(), "::1".into(), "10.1.2.3".into()],
            deny: vec!["169.254.0.0/16".into()],
        };
        s.check().unwrap();
        let p = s.policy();
        assert_eq!(p.allow.len(), 3);
        assert!(p.check("10.1.2.3".parse().unwrap(), 80).is_ok());
        assert!(p.check("10.1.2.4".parse().unwrap(), 80).is_err());
        for wrong in ["10.0.0.0/33", "localhost", "", "10.0.0/8"] {
            let s = AddressesSection {
                deny: vec![wrong.into()],
                ..Default::default()
            };
            let e = s.check().unwrap_err().to_string();
            assert!(e.contains("addresses.deny"), "{e}");
        }
    }
}
