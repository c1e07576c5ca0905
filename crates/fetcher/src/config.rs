//! Fetcher configuration: a plain struct whose `Default` is the documented defaults.

use std::time::Duration;

use crate::address::AddressPolicy;
use crate::dns::DnsConfig;
use crate::resolve::ResolveTable;

/// The User-Agent sent when none is configured: product token plus contact URL.
pub const DEFAULT_USER_AGENT: &str = "frontierd/0.1 (+https://example.org/bot)";

/// 500 KiB: Google parses only the first 500 KiB of a robots.txt (spec section 4).
pub const DEFAULT_ROBOTS_BODY_CAP: usize = 500 * 1024;

/// 10 MiB per page.
pub const DEFAULT_PAGE_BODY_CAP: usize = 10 * 1024 * 1024;

/// 10 MiB of decoded output per `Content-Encoding` body.
pub const DEFAULT_MAX_DECODED_BYTES: usize = 10 * 1024 * 1024;

/// Redirect hops a robots.txt fetch follows (the spec asks for at least 5).
pub const DEFAULT_ROBOTS_MAX_REDIRECTS: u32 = 5;

/// Default [`FetcherConfig::max_pooled_connections`]. A kept connection holds about 4 KiB
/// of heap (vendor/hyper/PATCH.md); a crawl going round more hosts than this at once
/// raises it (the daemon's configuration scales it with its workers).
pub const DEFAULT_MAX_POOLED_CONNECTIONS: usize = 1024;

/// A content coding the fetcher asks servers for (`Accept-Encoding`) and decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptedCoding {
    Gzip,
    Deflate,
    Brotli,
}

impl AcceptedCoding {
    /// The coding's token in `Accept-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            AcceptedCoding::Gzip => "gzip",
            AcceptedCoding::Deflate => "deflate",
            AcceptedCoding::Brotli => "br",
        }
    }

    /// The coding a token names (`gzip`, `deflate`, `br`, any case); `None` for any other.
    pub fn from_token(token: &str) -> Option<AcceptedCoding> {
        [
            AcceptedCoding::Gzip,
            AcceptedCoding::Deflate,
            AcceptedCoding::Brotli,
        ]
        .into_iter()
        .find(|c| c.token().eq_ignore_ascii_case(token))
    }
}

/// gzip and deflate, not br: a brotli body costs far more CPU to decode than the same body
/// in gzip, for a few percent fewer bytes on the wire (docs/benchmarks.md, "Brotli or
/// gzip"), and gzip is what every WARC reader decodes. A server sends br to a crawler
/// that asks for it, so br is the operator's choice (`[fetch] accept_encoding`).
pub const DEFAULT_ACCEPT_ENCODING: &[AcceptedCoding] =
    &[AcceptedCoding::Gzip, AcceptedCoding::Deflate];

/// Default [`FetcherConfig::tls_sessions`]: as many servers as the default pool keeps
/// connections for.
pub const DEFAULT_TLS_SESSIONS: usize = DEFAULT_MAX_POOLED_CONNECTIONS;

/// The certificates of a PEM file (its `CERTIFICATE` blocks), DER, for
/// [`FetcherConfig::extra_root_certificates`]; other blocks (a key) are passed over.
pub fn certificates_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>, crate::FetcherError> {
    use rustls::pki_types::pem::PemObject;
    let certificates = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|der| der.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(crate::FetcherError::Pem)?;
    if certificates.is_empty() {
        return Err(crate::FetcherError::NoCertificateInPem);
    }
    Ok(certificates)
}

/// Everything the fetcher can be told. Build with `FetcherConfig::default()` and override fields.
#[derive(Debug, Clone)]
pub struct FetcherConfig {
    /// `User-Agent` header: a product token and a contact URL.
    /// Default [`DEFAULT_USER_AGENT`].
    pub user_agent: String,
    /// Limit on establishing the TCP connection (per address tried). Default 10 s.
    pub connect_timeout: Duration,
    /// Limit on a whole fetch: connect, TLS, request, headers and body.
    /// For robots.txt it covers the whole redirect chain. Default 30 s.
    pub total_timeout: Duration,
    /// robots.txt bytes kept (decoded); the rest is discarded and the body flagged
    /// truncated. Default 500 KiB.
    pub robots_body_cap: usize,
    /// Page bytes kept (decoded); the rest is discarded and flagged. Also bounds the
    /// bytes read off the wire. Default 10 MiB.
    pub page_body_cap: usize,
    /// Ceiling on the decoded output of a gzip/deflate/br body, whatever the fetch kind:
    /// a decompression bomb is cut here, not obeyed. Default 10 MiB.
    pub max_decoded_bytes: usize,
    /// Codings asked for in `Accept-Encoding`, in this order; empty asks for `identity`
    /// (no header at all would accept any coding). A body in a coding the fetcher decodes
    /// is decoded whether it was asked for or not. Default [`DEFAULT_ACCEPT_ENCODING`].
    pub accept_encoding: Vec<AcceptedCoding>,
    /// Redirect hops followed by a robots.txt fetch; one more redirect yields
    /// [`crate::FetchOutcome::RedirectLimitExceeded`]. Default 5.
    pub robots_max_redirects: u32,
    /// Names answered without asking the system resolver, like curl's `--resolve`.
    /// Default empty (every name goes to the system resolver).
    pub resolve: ResolveTable,
    /// The DNS cache (names not in `resolve`). Default [`DnsConfig::default`].
    pub dns: DnsConfig,
    /// How long an idle pooled connection is kept. Default 90 s.
    pub pool_idle_timeout: Duration,
    /// Idle connections kept open for reuse, in total over all hosts: a connection opened
    /// while this many open ones serve no fetch serves its one request and closes.
    /// Connections busy with a fetch do not count. Bounds idle keep-alive sockets when a
    /// crawl touches many hosts (after a burst they can reach this plus the fetches that
    /// were in flight, until `pool_idle_timeout`). Default 1024.
    pub max_pooled_connections: usize,
    /// Offer HTTP/2 by ALPN besides HTTP/1.1. Off by default: a crawler asks a host one
    /// page at a time, where HTTP/2 gains nothing and costs the daemon more CPU a page and
    /// more memory a kept connection (docs/benchmarks.md, "HTTP/2"),
    /// and an HTTP/1.1 exchange is archived as it went over the wire, where an HTTP/2 one
    /// is rendered in HTTP/1.1's form.
    pub http2: bool,
    /// Servers whose TLS sessions are remembered, so that a new connection to one of them
    /// resumes (TLS 1.3 tickets, TLS 1.2 tickets or ids) instead of a full handshake: no
    /// certificate chain to verify, a fraction of the CPU. A crawl going round more hosts
    /// than this resumes none (the oldest server is forgotten first); rustls's own default
    /// remembers 32. Each holds the server's certificate chain and its tickets (a few KB;
    /// docs/benchmarks.md, "TLS handshakes").
    /// 0 never resumes. Default [`DEFAULT_TLS_SESSIONS`].
    pub tls_sessions: usize,
    /// DER-encoded certificates trusted in addition to the webpki roots (a private CA,
    /// or a test server's self-signed certificate; [`certificates_from_pem`] reads them
    /// from a PEM file). Default empty.
    pub extra_root_certificates: Vec<Vec<u8>>,
    /// Which addresses may be connected to. Default: the built-in refusals (loopback,
    /// private, link-local, ...; see [`AddressPolicy`]) with nothing allowed: a fetcher
    /// pointed at the open web never reads this machine's or its network's services.
    pub addresses: AddressPolicy,
}

impl Default for FetcherConfig {
    fn default() -> Self {
        FetcherConfig {
            user_agent: DEFAULT_USER_AGENT.to_owned(),
            connect_timeout: Duration::from_secs(10),
            total_timeout: Duration::from_secs(30),
            robots_body_cap: DEFAULT_ROBOTS_BODY_CAP,
            page_body_cap: DEFAULT_PAGE_BODY_CAP,
            max_decoded_bytes: DEFAULT_MAX_DECODED_BYTES,
            accept_encoding: DEFAULT_ACCEPT_ENCODING.to_vec(),
            robots_max_redirects: DEFAULT_ROBOTS_MAX_REDIRECTS,
            resolve: ResolveTable::default(),
            dns: DnsConfig::default(),
            pool_idle_timeout: Duration::from_secs(90),
            max_pooled_connections: DEFAULT_MAX_POOLED_CONNECTIONS,
            http2: false,
            tls_sessions: DEFAULT_TLS_SESSIONS,
            extra_root_certificates: Vec::new(),
            addresses: AddressPolicy::default(),
        }
    }
}
