//! Who can reach a listener: only this machine, or others too. An admin API reachable from
//! other machines needs a token (or the operator's word that the network is trusted); the
//! configuration check and the daemon's start both apply this rule.

use std::net::{IpAddr, SocketAddr};

/// Whether only this machine can reach a listener on `addr` (127.0.0.0/8, ::1, and
/// IPv4-mapped loopback); 0.0.0.0 and :: listen on every interface.
pub fn is_loopback(addr: SocketAddr) -> bool {
    match addr.ip() {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|m| m.is_loopback()),
    }
}

/// Anyone who can reach the admin API can add URLs and pause hosts: off this machine it
/// needs a token, or the operator's explicit word that the network is trusted.
pub fn unauthenticated_listener(listen: SocketAddr) -> String {
    format!(
        "admin.listen = \"{listen}\" is reachable from other machines but admin.token_file is \
         not set (or the file is empty): anyone who can connect could add URLs and pause \
         hosts. Set admin.token_file, listen on 127.0.0.1, or set \
         admin.allow_unauthenticated = true if the network is trusted"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for a in [
            "127.0.0.1:1",
            "127.1.2.3:1",
            "[::1]:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(is_loopback(a.parse().unwrap()), "{a}");
        }
        for a in [
            "0.0.0.0:1",
            "[::]:1",
            "192.168.1.2:1",
            "[::ffff:10.0.0.1]:1",
        ] {
            assert!(!is_loopback(a.parse().unwrap()), "{a}");
        }
    }
}
