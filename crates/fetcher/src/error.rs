//! Errors the API returns, and the mapping of transport failures onto
//! [`NetworkErrorKind`].

use std::error::Error as StdError;
use std::io;

use url::Url;

use crate::address::AddressRefused;
use crate::body::BodyError;
use crate::gate::Withheld;
use crate::outcome::NetworkErrorKind;
use crate::resolve::ResolveError;

/// The fetcher could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FetcherError {
    #[error("building the TLS client configuration")]
    Tls(#[source] rustls::Error),
    #[error("extra root certificate #{index} is not usable")]
    InvalidRootCertificate {
        index: usize,
        #[source]
        source: rustls::Error,
    },
    #[error("user agent {0:?} is not a valid header value")]
    InvalidUserAgent(String),
    #[error("not a PEM file of certificates")]
    Pem(#[source] rustls::pki_types::pem::Error),
    #[error("no certificate in the PEM file")]
    NoCertificateInPem,
}

/// A URL the fetcher refuses before sending anything (a caller bug, not a site's fault).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("unsupported scheme {scheme:?} in {url} (http and https only)")]
    UnsupportedScheme { url: Url, scheme: String },
    #[error("{url} has no host")]
    NoHost { url: Url },
    #[error("{url} is not a valid HTTP request target")]
    InvalidUri {
        url: Url,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("building the request for {url}")]
    InvalidRequest {
        url: Url,
        #[source]
        source: http::Error,
    },
    /// The address policy refused every address of the URL's host (after `[resolve]` and
    /// DNS), or its IP literal: no connection was attempted.
    #[error("{url}: {refused}")]
    AddressRefused { url: Url, refused: AddressRefused },
    /// The send gate ([`crate::Fetcher::set_send_gate`]) was closed for the URL's host
    /// when the connection was to be opened or the request written: nothing of the request
    /// was sent.
    #[error("{url}: {withheld}")]
    Withheld { url: Url, withheld: Withheld },
}

impl FetchError {
    /// The refusal, when the address policy is why nothing was sent.
    pub fn address_refused(&self) -> Option<&AddressRefused> {
        match self {
            FetchError::AddressRefused { refused, .. } => Some(refused),
            _ => None,
        }
    }
}

/// The address policy's refusal, if it is why a request failed.
pub(crate) fn find_refusal(err: &hyper_util::client::legacy::Error) -> Option<AddressRefused> {
    causes(err)
        .iter()
        .find_map(|e| e.downcast_ref::<AddressRefused>().copied())
}

/// The send gate's refusal, if that is why a request failed.
pub(crate) fn find_withheld(err: &hyper_util::client::legacy::Error) -> Option<Withheld> {
    causes(err)
        .iter()
        .find_map(|e| e.downcast_ref::<Withheld>().cloned())
}

/// Walks an error and its causes, looking inside `io::Error` wrappers too (their
/// `source()` skips the wrapped error itself).
fn causes<'a>(err: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out: Vec<&'a (dyn StdError + 'static)> = Vec::new();
    let mut stack = vec![err];
    while let Some(e) = stack.pop() {
        if out.len() > 32 {
            break; // a cycle would be a bug elsewhere; do not spin on it
        }
        out.push(e);
        if let Some(inner) = e.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            stack.push(inner);
        }
        if let Some(src) = e.source() {
            stack.push(src);
        }
    }
    out
}

fn io_kind(kind: io::ErrorKind) -> Option<NetworkErrorKind> {
    use io::ErrorKind as K;
    match kind {
        K::TimedOut => Some(NetworkErrorKind::Timeout),
        K::ConnectionRefused | K::AddrNotAvailable | K::HostUnreachable | K::NetworkUnreachable => {
            Some(NetworkErrorKind::Connect)
        }
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => Some(NetworkErrorKind::Reset),
        _ => None,
    }
}

/// Classifies a failure before the response head (connect, TLS, request, head parsing).
pub(crate) fn classify_request_error(err: &hyper_util::client::legacy::Error) -> NetworkErrorKind {
    let chain = causes(err);
    // Most specific first: a DNS or TLS failure is also a "connect" failure.
    if chain.iter().any(|e| e.is::<ResolveError>()) {
        return NetworkErrorKind::Dns;
    }
    if chain.iter().any(|e| e.is::<rustls::Error>()) {
        return NetworkErrorKind::Tls;
    }
    for e in &chain {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_parse() || h.is_parse_status() {
                return NetworkErrorKind::InvalidResponse;
            }
            if h.is_incomplete_message() {
                return NetworkErrorKind::Reset;
            }
            if h.is_timeout() {
                return NetworkErrorKind::Timeout;
            }
        }
        if let Some(kind) = e
            .downcast_ref::<io::Error>()
            .and_then(|io| io_kind(io.kind()))
        {
            return kind;
        }
    }
    if err.is_connect() {
        NetworkErrorKind::Connect
    } else {
        NetworkErrorKind::Other
    }
}

/// Classifies a failure while the body streams.
pub(crate) fn classify_body_error(err: &BodyError) -> NetworkErrorKind {
    let transport = match err {
        BodyError::Decode(_) => return NetworkErrorKind::InvalidResponse,
        BodyError::Transport(e) => e,
    };
    for e in causes(transport) {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if let Some(kind) = io_kind(io.kind()) {
                return kind;
            }
            // hyper's decoder: InvalidInput/InvalidData for bad chunk framing,
            // UnexpectedEof for a body that stopped before its length or last chunk.
            if matches!(
                io.kind(),
                io::ErrorKind::InvalidInput
                    | io::ErrorKind::InvalidData
                    | io::ErrorKind::UnexpectedEof
            ) {
                return NetworkErrorKind::BrokenChunking;
            }
        }
    }
    if transport.is_incomplete_message() {
        return NetworkErrorKind::BrokenChunking;
    }
    // HTTP/2 stream resets and the like.
    NetworkErrorKind::Reset
}

/// One line of cause chain for logs and `FetchOutcome::Network::detail`.
pub(crate) fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in causes(err) {
        let s = e.to_string();
        if !parts.contains(&s) {
            parts.push(s);
        }
    }
    parts.join(": ")
}
