//! fetcher: HTTP only. Fetches robots.txt and pages and classifies each outcome into one
//! [`FetchOutcome`].
//!
//! It owns the HTTP client (hyper + rustls, HTTP/1.1 and HTTP/2 by ALPN), name resolution
//! (a `--resolve`-style [`ResolveTable`] in front of a DNS cache that keeps answers for
//! their TTL, see [`DnsConfig`]), timeouts, body caps,
//! `Content-Encoding` decoding, and the one-time parsing of `Retry-After` and
//! `Cache-Control: max-age`.
//!
//! It also owns the address policy ([`AddressPolicy`]): which IP addresses a connection
//! may be made to, checked on the address actually connected to (after `[resolve]` and
//! DNS, for every request and redirect hop), refusing loopback, private, link-local and the
//! other special-purpose ranges unless allowed.
//!
//! It asks the caller's send gate ([`SendGate`]) for a request's origin right before the
//! connection is opened and before each write, so a caller whose right to ask a host lapsed
//! while the request waited sends nothing.
//!
//! It must never decide robots policy (what a 5xx or a redirect overflow *means* belongs
//! to robots-policy), never touch storage, and never depend on another crate of ours.
//!
//! See `docs/fetcher.md` for the classification table and the defaults.

mod address;
mod body;
mod client;
mod config;
mod dns;
mod error;
mod gate;
mod gunzip;
mod headers;
mod outcome;
mod pool_cap;
mod resolve;

pub use address::{builtin_rule, AddressPolicy, AddressRefused, AddressRule, IpNet};
pub use client::{Conditional, Fetcher, PageOptions};
pub use config::{
    certificates_from_pem, AcceptedCoding, FetcherConfig, DEFAULT_ACCEPT_ENCODING,
    DEFAULT_MAX_DECODED_BYTES, DEFAULT_MAX_POOLED_CONNECTIONS, DEFAULT_PAGE_BODY_CAP,
    DEFAULT_ROBOTS_BODY_CAP, DEFAULT_ROBOTS_MAX_REDIRECTS, DEFAULT_TLS_SESSIONS,
    DEFAULT_USER_AGENT,
};
pub use dns::{DnsConfig, DnsResult, DnsStats};
pub use error::{FetchError, FetcherError};
pub use gate::{SendGate, Withheld};
pub use headers::{
    max_age_from_headers, parse_cache_control_max_age, parse_retry_after, retry_after_from_headers,
};
pub use outcome::{
    ContentCoding, FetchOutcome, NetworkErrorKind, PageFetch, RequestRecord, ResponseRecord,
    RobotsFetch, RobotsHop, Timings,
};
pub use resolve::{ResolveTable, ResolveTableError};

/// Re-exported so callers need no direct dependency to read statuses and headers.
pub use http::{HeaderMap, StatusCode};
pub use url::Url;
