//! What a fetch yields: one outcome type for robots.txt and pages, plus the records the
//! WARC writer needs.

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, StatusCode, Version};
use url::Url;

/// How a fetch ended. Classification only: what to do about it is the caller's business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// 2xx with the body read (possibly cut at a cap).
    Success {
        status: StatusCode,
        headers: HeaderMap,
        /// Decoded content when `content_coding` is gzip/deflate/br, else as received.
        body: Bytes,
        /// The body was cut at a cap (body cap, decoded-size cap); the rest was discarded.
        truncated: bool,
        content_coding: ContentCoding,
        /// `Cache-Control: max-age`, if present.
        max_age: Option<Duration>,
    },
    /// 3xx. `location` is `Location` resolved against the request URL; None when absent or
    /// unparseable. In a robots.txt fetch this variant means a 3xx that could not be
    /// followed (no usable Location, or a non-HTTP target).
    Redirect {
        status: StatusCode,
        location: Option<Url>,
    },
    /// robots.txt only: the hop limit was reached and the server redirected once more.
    /// The robots contract treats this as a 404.
    RedirectLimitExceeded {
        /// Hops followed (the configured limit).
        hops: u32,
        /// Where the redirect past the limit pointed.
        location: Url,
    },
    /// 4xx other than 429.
    ClientError { status: StatusCode },
    /// 429, with `Retry-After` as a wait from when the response arrived.
    TooManyRequests { retry_after: Option<Duration> },
    /// 5xx, with `Retry-After` as a wait from when the response arrived.
    ServerError {
        status: StatusCode,
        retry_after: Option<Duration>,
    },
    /// No usable response.
    Network {
        kind: NetworkErrorKind,
        /// Human-readable cause, for logs.
        detail: String,
    },
}

impl FetchOutcome {
    /// The HTTP status, when a response head arrived and the outcome carries one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            FetchOutcome::Success { status, .. }
            | FetchOutcome::Redirect { status, .. }
            | FetchOutcome::ClientError { status }
            | FetchOutcome::ServerError { status, .. } => Some(*status),
            FetchOutcome::TooManyRequests { .. } => Some(StatusCode::TOO_MANY_REQUESTS),
            FetchOutcome::RedirectLimitExceeded { .. } | FetchOutcome::Network { .. } => None,
        }
    }

    pub fn network_error_kind(&self) -> Option<NetworkErrorKind> {
        match self {
            FetchOutcome::Network { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// Why no usable response arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetworkErrorKind {
    /// The name did not resolve.
    Dns,
    /// TCP connection refused or unreachable.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// The connect or total timeout ran out.
    Timeout,
    /// The connection was reset or closed before the response was complete.
    Reset,
    /// The response head could not be parsed, or the body could not be decoded.
    InvalidResponse,
    /// The body was interrupted: malformed chunked framing, or EOF before its end.
    BrokenChunking,
    /// Anything else.
    Other,
}

impl NetworkErrorKind {
    /// Every kind (every kind, for tests and label lists).
    pub const ALL: [NetworkErrorKind; 8] = [
        NetworkErrorKind::Dns,
        NetworkErrorKind::Connect,
        NetworkErrorKind::Tls,
        NetworkErrorKind::Timeout,
        NetworkErrorKind::Reset,
        NetworkErrorKind::InvalidResponse,
        NetworkErrorKind::BrokenChunking,
        NetworkErrorKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NetworkErrorKind::Dns => "dns",
            NetworkErrorKind::Connect => "connect",
            NetworkErrorKind::Tls => "tls",
            NetworkErrorKind::Timeout => "timeout",
            NetworkErrorKind::Reset => "reset",
            NetworkErrorKind::InvalidResponse => "invalid-response",
            NetworkErrorKind::BrokenChunking => "broken-chunking",
            NetworkErrorKind::Other => "other",
        }
    }
}

impl fmt::Display for NetworkErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The response's `Content-Encoding`, as far as the fetcher dealt with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentCoding {
    /// None, or `identity`.
    Identity,
    Gzip,
    /// zlib-wrapped or raw deflate (both are seen in the wild; sniffed).
    Deflate,
    Brotli,
    /// A coding (or chain of codings) we do not decode; the body is kept as received.
    Unsupported(String),
}

impl ContentCoding {
    /// Whether the fetcher decoded the body (so it differs from the wire bytes).
    pub fn is_decoded(&self) -> bool {
        matches!(
            self,
            ContentCoding::Gzip | ContentCoding::Deflate | ContentCoding::Brotli
        )
    }
}

/// When a fetch ran and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Wall-clock start (the WARC-Date).
    pub started_at: SystemTime,
    /// From start to the response head; None if no head arrived.
    pub time_to_headers: Option<Duration>,
    /// From start to the end of the body (or the failure).
    pub total: Duration,
}

/// The request as sent, for the WARC request record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: Method,
    pub url: Url,
    /// The version the exchange used (HTTP/1.1 until a response says otherwise).
    pub version: Version,
    /// Headers we set, Host included. Under HTTP/2, Host travels as `:authority`.
    pub headers: HeaderMap,
}

impl RequestRecord {
    /// Request line plus headers in HTTP/1.1 wire form, ending with the blank line.
    pub fn head_bytes(&self) -> Vec<u8> {
        let mut target = self.url.path().to_owned();
        if let Some(q) = self.url.query() {
            target.push('?');
            target.push_str(q);
        }
        let mut out = Vec::with_capacity(head_capacity(target.len(), &self.headers));
        out.extend_from_slice(self.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(target.as_bytes());
        out.push(b' ');
        out.extend_from_slice(version_str(self.version).as_bytes());
        out.extend_from_slice(b"\r\n");
        write_headers(&mut out, &self.headers, |_| true);
        out
    }
}

/// The response as received, for the WARC response record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseRecord {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    /// Decoded body when `content_coding.is_decoded()`, else the bytes as received.
    pub body: Bytes,
    /// The bytes as received when the body was decoded (what a WARC response record
    /// holds next to the unchanged headers); None when identical to `body`.
    pub wire_body: Option<Bytes>,
    pub content_coding: ContentCoding,
    pub truncated: bool,
    /// The body could not be read to its end (the outcome may still be classified by
    /// status, e.g. a 404 whose body broke off).
    pub body_error: Option<NetworkErrorKind>,
}

impl ResponseRecord {
    /// Status line plus headers in HTTP/1.1 wire form, ending with the blank line.
    pub fn head_bytes(&self) -> Vec<u8> {
        self.head_bytes_keeping(|_| true)
    }

    /// [`ResponseRecord::head_bytes`] with only the headers `keep` says yes to (what an
    /// archive rewrites, without a copy of the record).
    pub fn head_bytes_keeping(&self, keep: impl Fn(&HeaderName) -> bool) -> Vec<u8> {
        let reason = self.status.canonical_reason().unwrap_or("");
        let mut out = Vec::with_capacity(head_capacity(reason.len(), &self.headers));
        out.extend_from_slice(version_str(self.version).as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason.as_bytes());
        out.extend_from_slice(b"\r\n");
        write_headers(&mut out, &self.headers, keep);
        out
    }
}

/// Bytes of a head: its first line (about `line` plus the method or version and status)
/// and every header with its separators, so the head is written without a reallocation.
fn head_capacity(line: usize, headers: &HeaderMap) -> usize {
    let fields: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    line + 24 + fields + 2
}

fn version_str(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

fn write_headers(out: &mut Vec<u8>, headers: &HeaderMap, keep: impl Fn(&HeaderName) -> bool) {
    for (name, value) in headers.iter().filter(|(name, _)| keep(name)) {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A robots.txt fetch, redirect chain included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsFetch {
    /// `<origin>/robots.txt`.
    pub requested_url: Url,
    /// The last URL requested (differs from `requested_url` after redirects).
    pub final_url: Url,
    /// Redirects followed.
    pub hops: u32,
    pub outcome: FetchOutcome,
    /// Peer of the last request, if it connected.
    pub peer_addr: Option<SocketAddr>,
    /// Over the whole chain; `time_to_headers` is the last hop's, from the chain start.
    pub timings: Timings,
    /// Every request of the chain in order (the last is the final one), with its response
    /// when a head arrived: what a WARC writer records.
    pub exchanges: Vec<RobotsHop>,
}

/// One request of a robots.txt redirect chain, as sent and as answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsHop {
    pub request: RequestRecord,
    /// Present when a response head arrived.
    pub response: Option<ResponseRecord>,
    pub peer_addr: Option<SocketAddr>,
    /// When this hop's request started.
    pub started_at: SystemTime,
}

/// A page fetch: one request, no redirect following.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageFetch {
    pub url: Url,
    pub outcome: FetchOutcome,
    pub request: RequestRecord,
    /// Present when a response head arrived.
    pub response: Option<ResponseRecord>,
    /// From hyper-util's `HttpInfo`, present when a response arrived.
    pub peer_addr: Option<SocketAddr>,
    pub timings: Timings,
}
