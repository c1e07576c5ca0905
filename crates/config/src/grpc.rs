//! `[grpc]`: the url-frontier gRPC API for external fetchers (crate frontier-grpc).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::{bad, range_u64, Config, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrpcSection {
    /// Address of the gRPC listener; empty: off.
    pub listen: String,
    /// File holding the bearer token every call must carry; empty: none (loopback only).
    pub token_file: String,
    /// At most this many URLs per GetURLs call.
    pub max_urls_per_call: u32,
    /// robots.txt fetches in flight at once when `fetch.workers = 0` (the daemon still
    /// fetches robots.txt itself for the queues external fetchers take from).
    pub robots_in_flight: u32,
    /// TLS (rustls): PEM certificate chain and private key files; both empty: plaintext.
    pub tls_cert_file: String,
    pub tls_key_file: String,
}

impl Default for GrpcSection {
    fn default() -> Self {
        GrpcSection {
            listen: String::new(),
            token_file: String::new(),
            max_urls_per_call: 10_000,
            robots_in_flight: 8,
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
        }
    }
}

/// The checked `[grpc]`, when on.
#[derive(Debug, Clone)]
pub struct GrpcListen {
    pub listen: SocketAddr,
    pub token_file: Option<PathBuf>,
    pub max_urls_per_call: usize,
    /// (certificate chain, private key) PEM files.
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// Check `[grpc]` (and `fetch.workers = 0`, which only makes sense with it).
pub fn check(c: &Config) -> Result<Option<GrpcListen>, ConfigError> {
    let g = &c.grpc;
    range_u64(
        "grpc.max_urls_per_call",
        g.max_urls_per_call.into(),
        1,
        1_000_000,
    )?;
    range_u64("grpc.robots_in_flight", g.robots_in_flight.into(), 1, 4096)?;
    if g.listen.is_empty() {
        if c.fetch.workers == 0 {
            return Err(bad(
                "fetch.workers",
                0,
                "0 (a pure frontier for external fetchers) needs grpc.listen set; otherwise 1 to 4096",
            ));
        }
        return Ok(None);
    }
    let listen: SocketAddr = g.listen.parse().map_err(|_| {
        bad(
            "grpc.listen",
            format!("{:?}", g.listen),
            "an IP address and port, e.g. \"127.0.0.1:7071\" (empty: off)",
        )
    })?;
    let token_file = (!g.token_file.is_empty()).then(|| PathBuf::from(&g.token_file));
    let tls = match (g.tls_cert_file.is_empty(), g.tls_key_file.is_empty()) {
        (true, true) => None,
        (false, false) => Some((
            PathBuf::from(&g.tls_cert_file),
            PathBuf::from(&g.tls_key_file),
        )),
        (true, false) => {
            return Err(bad(
                "grpc.tls_cert_file",
                "\"\"",
                "a PEM certificate chain file: grpc.tls_key_file is set, TLS needs both",
            ))
        }
        (false, true) => {
            return Err(bad(
                "grpc.tls_key_file",
                "\"\"",
                "a PEM private key file: grpc.tls_cert_file is set, TLS needs both",
            ))
        }
    };
    if token_file.is_none() && tls.is_none() && !crate::exposure::is_loopback(listen) {
        return Err(ConfigError::UnauthenticatedListener(unauthenticated(
            listen,
        )));
    }
    Ok(Some(GrpcListen {
        listen,
        token_file,
        max_urls_per_call: g.max_urls_per_call as usize,
        tls,
    }))
}

/// Why a non-loopback gRPC listener without a token is refused.
pub fn unauthenticated(listen: SocketAddr) -> String {
    format!(
        "grpc.listen = \"{listen}\" is reachable from other machines but neither grpc.token_file \
         (a bearer token, in a non-empty file) nor grpc.tls_cert_file/grpc.tls_key_file is \
         set: anyone who can connect could add URLs and take leases. Set grpc.token_file (and \
         TLS), or listen on 127.0.0.1"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text, "test").unwrap()
    }

    #[test]
    fn off_by_default() {
        let c = Config::load(None).unwrap();
        assert!(check(&c).unwrap().is_none());
    }

    #[test]
    fn a_non_loopback_listener_needs_a_token() {
        let err = check(&parse("[grpc]\nlisten = \"0.0.0.0:7071\"\n")).unwrap_err();
        assert!(err.to_string().contains("grpc.token_file"), "{err}");
        let ok = check(&parse(
            "[grpc]\nlisten = \"0.0.0.0:7071\"\ntoken_file = \"/etc/frontierd/grpc.token\"\n",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(ok.listen.port(), 7071);
        assert!(check(&parse("[grpc]\nlisten = \"127.0.0.1:7071\"\n"))
            .unwrap()
            .is_some());
        let tls = check(&parse(
            "[grpc]\nlisten = \"0.0.0.0:7071\"\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\n",
        ))
        .unwrap()
        .unwrap();
        assert!(tls.tls.is_some());
        let err = check(&parse(
            "[grpc]\nlisten = \"127.0.0.1:7071\"\ntls_cert_file = \"c.pem\"\n",
        ))
        .unwrap_err();
        assert!(err.to_string().starts_with("grpc.tls_key_file"), "{err}");
    }

    #[test]
    fn zero_workers_needs_grpc_and_bad_addresses_are_named() {
        let err = check(&parse("[fetch]\nworkers = 0\n")).unwrap_err();
        assert!(err.to_string().contains("grpc.listen"), "{err}");
        assert!(check(&parse(
            "[fetch]\nworkers = 0\n[grpc]\nlisten = \"127.0.0.1:7071\"\n"
        ))
        .is_ok());
        let err = check(&parse("[grpc]\nlisten = \"localhost\"\n")).unwrap_err();
        assert!(err.to_string().starts_with("grpc.listen = "), "{err}");
    }
}
