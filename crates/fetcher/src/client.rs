//! The fetcher: one pooled hyper client for robots.txt and pages (and a second, not
//! gated, for robots.txt redirect hops to another origin).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{
    ACCEPT, ACCEPT_ENCODING, CONNECTION, HOST, IF_MODIFIED_SINCE, IF_NONE_MATCH, LOCATION,
    USER_AGENT,
};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, Version};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{HttpConnector, HttpInfo};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::time::timeout_at;
use tracing::debug;
use url::Url;

use crate::address::{GuardedConnector, SharedPolicy};
use crate::body::{content_coding, read_body, Caps, ReadBody};
use crate::config::{AcceptedCoding, FetcherConfig};
use crate::dns::{DnsCache, DnsResult, DnsStats};
use crate::error::{
    classify_body_error, classify_request_error, describe, find_refusal, find_withheld, FetchError,
    FetcherError,
};
use crate::gate::{SendGate, SharedGate};
use crate::headers::{max_age_from_headers, retry_after_from_headers};
use crate::outcome::{
    ContentCoding, FetchOutcome, NetworkErrorKind, PageFetch, RequestRecord, ResponseRecord,
    RobotsFetch, RobotsHop, Timings,
};
use crate::pool_cap::{CappedConnector, PoolCap};
use crate::resolve::TableResolver;

type HttpClient = Client<
    CappedConnector<HttpsConnector<GuardedConnector<HttpConnector<TableResolver>>>>,
    Empty<Bytes>,
>;

/// Validators of the last answer, sent back on a revisit (RFC 9110 section 13.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditional {
    /// The last `ETag`, sent as `If-None-Match`.
    pub if_none_match: Option<String>,
    /// The last `Last-Modified`, sent as `If-Modified-Since`.
    pub if_modified_since: Option<String>,
}

/// What a page request carries beyond its URL.
#[derive(Debug, Clone, Default)]
pub struct PageOptions {
    /// The last answer's validators: a conditional GET.
    pub conditional: Conditional,
    /// Nothing else is queued for the host: ask for the connection to close after this
    /// answer (`Connection: close`) instead of keeping it idle in the pool, where it would
    /// hold one of the capped slots until its idle timeout and a server socket with it.
    pub last_for_host: bool,
}

/// The `Accept-Encoding` value asking for `codings`: `identity` when there are none, since
/// a request without the header accepts any coding (RFC 9110, section 12.5.3).
fn accept_encoding_header(codings: &[AcceptedCoding]) -> HeaderValue {
    if codings.is_empty() {
        return HeaderValue::from_static("identity");
    }
    let tokens: Vec<&str> = codings.iter().map(|c| c.token()).collect();
    HeaderValue::from_str(&tokens.join(", ")).unwrap_or(HeaderValue::from_static("identity"))
}

/// Fetches robots.txt files and pages. Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct Fetcher {
    /// Asks the send gate: every request to the fetch's own host.
    client: HttpClient,
    /// Asks no gate: robots.txt redirect hops to another origin (the gate answers for the
    /// origin a fetch is for, not for where its robots.txt moved).
    hop_client: HttpClient,
    gate: SharedGate,
    pool_cap: PoolCap,
    user_agent: HeaderValue,
    /// `config.accept_encoding` as sent.
    accept_encoding: HeaderValue,
    config: FetcherConfig,
    dns: DnsCache,
    /// `config.addresses`, plus the own listeners added once bound.
    policy: SharedPolicy,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("config", &self.config)
            .finish()
    }
}

/// Which kind of fetch one request serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// `own_origin`: to the origin whose robots.txt it is (not a redirect hop elsewhere).
    Robots {
        own_origin: bool,
    },
    Page,
}

/// One request and what came back.
struct Exchange {
    request: RequestRecord,
    response: Option<ResponseRecord>,
    outcome: FetchOutcome,
    peer_addr: Option<SocketAddr>,
    time_to_headers: Option<Duration>,
}

impl Fetcher {
    /// Builds the client: rustls with the ring provider and webpki roots, HTTP/1.1 and
    /// HTTP/2 offered by ALPN, plain HTTP allowed, the resolve table in front of the DNS
    /// cache. Building needs no runtime; fetching must run on a tokio runtime.
    pub fn new(config: FetcherConfig) -> Result<Self, FetcherError> {
        let user_agent = HeaderValue::from_str(&config.user_agent)
            .map_err(|_| FetcherError::InvalidUserAgent(config.user_agent.clone()))?;
        let accept_encoding = accept_encoding_header(&config.accept_encoding);
        let dns = DnsCache::new(config.dns.clone());
        let policy: SharedPolicy = Arc::new(std::sync::RwLock::new(config.addresses.clone()));
        let mut http = HttpConnector::new_with_resolver(TableResolver::new(
            config.resolve.clone(),
            dns.clone(),
            policy.clone(),
        ));
        http.enforce_http(false); // the TLS layer hands https URLs down too
        http.set_connect_timeout(Some(config.connect_timeout));
        http.set_nodelay(true);
        let offers_http1 = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(
                &config.extra_root_certificates,
                config.tls_sessions,
            )?)
            .https_or_http()
            .enable_http1();
        let guarded = GuardedConnector::new(http, policy.clone());
        let https = match config.http2 {
            true => offers_http1.enable_http2().wrap_connector(guarded),
            false => offers_http1.wrap_connector(guarded),
        };
        let pool_cap = PoolCap::new(config.max_pooled_connections);
        let gate = SharedGate::default();
        let build = |gate: Option<SharedGate>| {
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(config.pool_idle_timeout)
                .build(CappedConnector::new(https.clone(), pool_cap.clone(), gate))
        };
        let client = build(Some(gate.clone()));
        let hop_client = build(None);
        Ok(Fetcher {
            client,
            hop_client,
            gate,
            pool_cap,
            user_agent,
            accept_encoding,
            config,
            dns,
            policy,
        })
    }

    pub fn config(&self) -> &FetcherConfig {
        &self.config
    }

    /// Adds one of the daemon's own listening addresses (once bound, so with its real
    /// port): never connected to, whatever `allow` says. Clones share it.
    pub fn add_own_listener(&self, addr: SocketAddr) {
        let mut policy = self.policy.write().unwrap_or_else(|e| e.into_inner());
        if !policy.own_listeners.contains(&addr) {
            policy.own_listeners.push(addr);
        }
    }

    /// Sets the send gate (once; false if one was set already): from now on no connection
    /// to an origin is opened, and no request written on one, while `gate` says no for
    /// that origin; the fetch fails with [`FetchError::Withheld`]. Robots.txt redirect hops
    /// to another origin do not ask it. Clones share it.
    pub fn set_send_gate(&self, gate: Arc<dyn SendGate>) -> bool {
        self.gate.set(gate).is_ok()
    }

    /// Connections open now: kept for reuse, in use, or closing.
    pub fn open_connections(&self) -> usize {
        self.pool_cap.open()
    }

    /// DNS counters and the cache's size now.
    pub fn dns_stats(&self) -> DnsStats {
        self.dns.stats()
    }

    /// The addresses of `host` as a fetch would find them: the resolve table, else the
    /// DNS cache, else the resolver (and the answer is cached). Counted like a fetch's
    /// lookup. On failure: how it failed ([`DnsResult::NxDomain`] or
    /// [`DnsResult::Failed`]) and the resolver's words.
    pub async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, (DnsResult, String)> {
        if let Some(ips) = self.config.resolve.lookup(host) {
            self.dns.count(DnsResult::Table);
            return Ok(ips.to_vec());
        }
        self.dns
            .lookup(host)
            .await
            .map(|ips| ips.to_vec())
            .map_err(|f| (f.result, f.detail.to_string()))
    }

    /// Fetches `<origin>/robots.txt` for the origin of `origin_url` (any URL of the
    /// origin will do): an unconditional GET, redirects followed across origins up to
    /// `robots_max_redirects` hops, body kept up to `robots_body_cap`. The total timeout
    /// covers the whole chain.
    pub async fn fetch_robots(&self, origin_url: &Url) -> Result<RobotsFetch, FetchError> {
        check_url(origin_url)?;
        let mut requested_url = origin_url.clone();
        requested_url.set_path("/robots.txt");
        requested_url.set_query(None);
        requested_url.set_fragment(None);
        let _ = requested_url.set_username("");
        let _ = requested_url.set_password(None);

        let started = Instant::now();
        let started_at = SystemTime::now();
        let deadline = tokio::time::Instant::from_std(started + self.config.total_timeout);
        let mut url = requested_url.clone();
        let mut hops = 0u32;
        let mut exchanges = Vec::new();
        let exchange = loop {
            let hop_started_at = SystemTime::now();
            let own_origin = url.origin() == requested_url.origin();
            let exchange = self
                .exchange(
                    &url,
                    Purpose::Robots { own_origin },
                    deadline,
                    started,
                    &PageOptions::default(),
                )
                .await?;
            exchanges.push(RobotsHop {
                request: exchange.request.clone(),
                response: exchange.response.clone(),
                peer_addr: exchange.peer_addr,
                started_at: hop_started_at,
            });
            let next = match &exchange.outcome {
                FetchOutcome::Redirect {
                    location: Some(location),
                    ..
                } if check_url(location).is_ok() => location.clone(),
                _ => break exchange,
            };
            if hops >= self.config.robots_max_redirects {
                debug!(%requested_url, hops, %next, "robots.txt redirect limit exceeded");
                break Exchange {
                    outcome: FetchOutcome::RedirectLimitExceeded {
                        hops,
                        location: next,
                    },
                    ..exchange
                };
            }
            debug!(from = %url, to = %next, "following robots.txt redirect");
            hops += 1;
            url = next;
        };
        let fetch = RobotsFetch {
            requested_url,
            final_url: url,
            hops,
            outcome: exchange.outcome,
            peer_addr: exchange.peer_addr,
            timings: Timings {
                started_at,
                time_to_headers: exchange.time_to_headers,
                total: started.elapsed(),
            },
            exchanges,
        };
        debug!(url = %fetch.requested_url, final_url = %fetch.final_url, hops, outcome = ?OutcomeSummary(&fetch.outcome), "robots.txt fetched");
        Ok(fetch)
    }

    /// Fetches one page: no redirect following (a 3xx comes back with its Location
    /// resolved), body kept up to `page_body_cap`, request and response recorded.
    pub async fn fetch_page(&self, url: &Url) -> Result<PageFetch, FetchError> {
        self.fetch_page_with(url, &PageOptions::default()).await
    }

    /// [`Fetcher::fetch_page`] with [`PageOptions`]: as a conditional GET
    /// (`If-None-Match` and `If-Modified-Since` carry the validators of the last answer; a
    /// value that is not a valid header value is not sent), and with `Connection: close`
    /// when nothing else is queued for the host.
    pub async fn fetch_page_with(
        &self,
        url: &Url,
        options: &PageOptions,
    ) -> Result<PageFetch, FetchError> {
        check_url(url)?;
        let started = Instant::now();
        let started_at = SystemTime::now();
        let deadline = tokio::time::Instant::from_std(started + self.config.total_timeout);
        let exchange = self
            .exchange(url, Purpose::Page, deadline, started, options)
            .await?;
        let fetch = PageFetch {
            url: url.clone(),
            outcome: exchange.outcome,
            request: exchange.request,
            response: exchange.response,
            peer_addr: exchange.peer_addr,
            timings: Timings {
                started_at,
                time_to_headers: exchange.time_to_headers,
                total: started.elapsed(),
            },
        };
        debug!(%url, outcome = ?OutcomeSummary(&fetch.outcome), "page fetched");
        Ok(fetch)
    }

    async fn exchange(
        &self,
        url: &Url,
        purpose: Purpose,
        deadline: tokio::time::Instant,
        started: Instant,
        options: &PageOptions,
    ) -> Result<Exchange, FetchError> {
        // busy connections do not count against the cap on kept ones
        let _in_flight = self.pool_cap.fetch_started();
        let mut target = url.clone();
        target.set_fragment(None);
        let uri: Uri = target
            .as_str()
            .parse()
            .map_err(|source| FetchError::InvalidUri {
                url: url.clone(),
                source,
            })?;
        let mut request = self.request_record(target, options);
        let req = http_request(url, uri, &request)?;

        let client = match purpose {
            Purpose::Robots { own_origin: false } => &self.hop_client,
            _ => &self.client,
        };
        let response = match timeout_at(deadline, client.request(req)).await {
            Err(_) => {
                return Ok(network_failure(
                    url,
                    request,
                    NetworkErrorKind::Timeout,
                    "no response head before the total timeout".into(),
                    None,
                ))
            }
            Ok(Err(e)) => {
                if let Some(withheld) = find_withheld(&e) {
                    debug!(%url, %withheld, "request withheld");
                    return Err(FetchError::Withheld {
                        url: url.clone(),
                        withheld,
                    });
                }
                if let Some(refused) = find_refusal(&e) {
                    debug!(%url, %refused, "address refused");
                    return Err(FetchError::AddressRefused {
                        url: url.clone(),
                        refused,
                    });
                }
                let kind = classify_request_error(&e);
                return Ok(network_failure(url, request, kind, describe(&e), None));
            }
            Ok(Ok(response)) => response,
        };
        let time_to_headers = started.elapsed();
        let received_at = SystemTime::now();
        let (parts, incoming) = response.into_parts();
        request.version = parts.version;
        let peer_addr = parts
            .extensions
            .get::<HttpInfo>()
            .map(|info| info.remote_addr());
        let status = parts.status;
        let coding = content_coding(&parts.headers);

        let caps = self.body_caps(purpose);
        // robots.txt needs only a 2xx body; skipping the others avoids waiting on them.
        let want_body = purpose == Purpose::Page || status.is_success();
        let body = if want_body {
            read_body_by(deadline, incoming, &coding, caps).await
        } else {
            Ok(no_body())
        };

        let (read, body_error) = match body {
            Ok(read) => (read, None),
            Err((kind, detail)) => {
                if status.is_success() {
                    let mut ex = network_failure(url, request, kind, detail, Some(time_to_headers));
                    ex.peer_addr = peer_addr;
                    ex.response = Some(response_record(parts, coding, no_body(), Some(kind)));
                    return Ok(ex);
                }
                // The status alone classifies a non-2xx response; note the broken body.
                debug!(%url, %status, %kind, %detail, "error response body broke off");
                (no_body(), Some(kind))
            }
        };
        if read.truncated {
            debug!(%url, cap = caps.wire, "body cut at its cap");
        }

        let outcome = classify_status(url, status, &parts.headers, received_at, &read, &coding);
        Ok(Exchange {
            request,
            response: Some(response_record(parts, coding, read, body_error)),
            outcome,
            peer_addr,
            time_to_headers: Some(time_to_headers),
        })
    }

    /// The request as recorded: its headers (Host included), the validators that are
    /// valid header values, and `Connection: close` for the host's last request.
    fn request_record(&self, target: Url, options: &PageOptions) -> RequestRecord {
        let mut headers = HeaderMap::new();
        if let Some(host) = host_header(&target) {
            headers.insert(HOST, host);
        }
        headers.insert(USER_AGENT, self.user_agent.clone());
        headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        headers.insert(ACCEPT_ENCODING, self.accept_encoding.clone());
        for (name, value) in [
            (IF_NONE_MATCH, &options.conditional.if_none_match),
            (IF_MODIFIED_SINCE, &options.conditional.if_modified_since),
        ] {
            if let Some(v) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(name, v);
            }
        }
        if options.last_for_host {
            // hyper then does not return the connection to the pool either
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        RequestRecord {
            method: Method::GET,
            url: target,
            version: Version::HTTP_11,
            headers,
        }
    }

    /// The body caps for this kind of fetch: its own wire cap, and the decoded output
    /// held to the smaller of that and `max_decoded_bytes`.
    fn body_caps(&self, purpose: Purpose) -> Caps {
        let cap = match purpose {
            Purpose::Robots { .. } => self.config.robots_body_cap,
            Purpose::Page => self.config.page_body_cap,
        };
        Caps {
            wire: cap,
            decoded: cap.min(self.config.max_decoded_bytes),
        }
    }
}

/// The GET that goes to hyper for `request`'s record.
fn http_request(
    url: &Url,
    uri: Uri,
    request: &RequestRecord,
) -> Result<Request<Empty<Bytes>>, FetchError> {
    // the recorded headers as they are (one copy of the map, not one insert a header)
    let mut headers = request.headers.clone();
    if url.scheme() != "http" {
        // Host is set by the client from the URI: under HTTP/2 (only over TLS, by ALPN)
        // it must travel as :authority, not as a header. Plain http is always HTTP/1.1,
        // where the recorded Host is the one the client would write.
        headers.remove(HOST);
    }
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Empty::new())
        .map_err(|source| FetchError::InvalidRequest {
            url: url.clone(),
            source,
        })?;
    *req.headers_mut() = headers;
    Ok(req)
}

/// An exchange that failed on the network (logged): no response unless the caller adds
/// the head that came before the failure.
fn network_failure(
    url: &Url,
    request: RequestRecord,
    kind: NetworkErrorKind,
    detail: String,
    time_to_headers: Option<Duration>,
) -> Exchange {
    debug!(%url, %kind, %detail, "fetch failed");
    Exchange {
        request,
        response: None,
        outcome: FetchOutcome::Network { kind, detail },
        peer_addr: None,
        time_to_headers,
    }
}

/// Reads the body up to its caps, giving up at `deadline`; on failure, how it failed and
/// in what words.
async fn read_body_by(
    deadline: tokio::time::Instant,
    incoming: Incoming,
    coding: &ContentCoding,
    caps: Caps,
) -> Result<ReadBody, (NetworkErrorKind, String)> {
    match timeout_at(deadline, read_body(incoming, coding, caps)).await {
        Err(_) => Err((
            NetworkErrorKind::Timeout,
            "body stalled past the total timeout".to_owned(),
        )),
        Ok(Err(e)) => Err((
            classify_body_error(&e),
            match &e {
                crate::body::BodyError::Transport(t) => describe(t),
                crate::body::BodyError::Decode(d) => {
                    format!("decoding {coding:?} body: {d}")
                }
            },
        )),
        Ok(Ok(read)) => Ok(read),
    }
}

/// The body recorded when it was not read, or broke off.
fn no_body() -> ReadBody {
    ReadBody {
        body: Bytes::new(),
        wire_body: None,
        truncated: false,
    }
}

/// The response as recorded: its head and what was read of its body.
fn response_record(
    parts: http::response::Parts,
    coding: ContentCoding,
    read: ReadBody,
    body_error: Option<NetworkErrorKind>,
) -> ResponseRecord {
    ResponseRecord {
        status: parts.status,
        version: parts.version,
        headers: parts.headers,
        body: read.body,
        wire_body: read.wire_body,
        content_coding: coding,
        truncated: read.truncated,
        body_error,
    }
}

/// rustls with the ring provider, the webpki roots plus any extra ones. ALPN protocols
/// are filled in by the connector builder (http/1.1, and h2 with `config.http2`).
fn tls_config(
    extra_roots: &[Vec<u8>],
    tls_sessions: usize,
) -> Result<rustls::ClientConfig, FetcherError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for (index, der) in extra_roots.iter().enumerate() {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .map_err(|source| FetcherError::InvalidRootCertificate { index, source })?;
    }
    let mut provider = rustls::crypto::ring::default_provider();
    // X25519 first, whatever the provider's default order: the first group is the key share
    // every ClientHello computes, and ring's P-384, first in rustls 0.23.48's order, is
    // far dearer (docs/benchmarks.md, "TLS handshakes")
    provider.kx_groups = KEY_EXCHANGE_GROUPS.to_vec();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(FetcherError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // rustls's store keeps up to 8 TLS 1.3 tickets a server and counts tickets, so that
    // many tickets a server remembers `tls_sessions` servers
    config.resumption = rustls::client::Resumption::in_memory_sessions(
        tls_sessions.saturating_mul(TLS13_TICKETS_A_SERVER),
    );
    Ok(config)
}

/// The key exchange groups offered, the first one's key share sent with every ClientHello.
const KEY_EXCHANGE_GROUPS: &[&dyn rustls::crypto::SupportedKxGroup] = &[
    rustls::crypto::ring::kx_group::X25519,
    rustls::crypto::ring::kx_group::SECP256R1,
    rustls::crypto::ring::kx_group::SECP384R1,
];

/// rustls's `ClientSessionMemoryCache` keeps this many TLS 1.3 tickets a server.
const TLS13_TICKETS_A_SERVER: usize = 8;

fn classify_status(
    url: &Url,
    status: StatusCode,
    headers: &HeaderMap,
    now: SystemTime,
    read: &ReadBody,
    coding: &crate::outcome::ContentCoding,
) -> FetchOutcome {
    match status.as_u16() {
        200..=299 => FetchOutcome::Success {
            status,
            headers: headers.clone(),
            body: read.body.clone(),
            truncated: read.truncated,
            content_coding: coding.clone(),
            max_age: max_age_from_headers(headers),
        },
        300..=399 => FetchOutcome::Redirect {
            status,
            location: resolve_location(url, headers),
        },
        429 => FetchOutcome::TooManyRequests {
            retry_after: retry_after_from_headers(headers, now),
        },
        400..=499 => FetchOutcome::ClientError { status },
        500..=599 => FetchOutcome::ServerError {
            status,
            retry_after: retry_after_from_headers(headers, now),
        },
        // 1xx as a final status, or 600 and up: not HTTP we can act on.
        _ => FetchOutcome::Network {
            kind: NetworkErrorKind::InvalidResponse,
            detail: format!("unexpected final status {status}"),
        },
    }
}

/// `Location` resolved against the request URL (relative references are common).
fn resolve_location(base: &Url, headers: &HeaderMap) -> Option<Url> {
    let raw = headers.get(LOCATION)?;
    // Non-ASCII bytes are seen in the wild; the URL parser percent-encodes them.
    let text = String::from_utf8_lossy(raw.as_bytes());
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut location = base.join(text).ok()?;
    if location.fragment().is_none() {
        // RFC 9110 10.2.2: a Location without a fragment inherits the request's.
        location.set_fragment(base.fragment());
    }
    Some(location)
}

/// `host[:port]`, the port only when not the scheme default (as hyper sends it).
fn host_header(url: &Url) -> Option<HeaderValue> {
    let host = url.host_str()?;
    let value = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    HeaderValue::from_str(&value).ok()
}

fn check_url(url: &Url) -> Result<(), FetchError> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(FetchError::UnsupportedScheme {
                url: url.clone(),
                scheme: other.to_owned(),
            })
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FetchError::NoHost { url: url.clone() });
    }
    Ok(())
}

/// Outcome without the body, for logs.
struct OutcomeSummary<'a>(&'a FetchOutcome);

impl std::fmt::Debug for OutcomeSummary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            FetchOutcome::Success {
                status,
                body,
                truncated,
                ..
            } => write!(
                f,
                "success {status} {} bytes{}",
                body.len(),
                if *truncated { " (truncated)" } else { "" }
            ),
            other => write!(f, "{other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(base: &str, location: &'static str) -> Option<String> {
        let mut h = HeaderMap::new();
        h.insert(LOCATION, HeaderValue::from_static(location));
        resolve_location(&Url::parse(base).unwrap(), &h).map(|u| u.to_string())
    }

    #[test]
    fn location_is_resolved_against_the_request_url() {
        assert_eq!(
            loc("http://a.test/x/y", "z").as_deref(),
            Some("http://a.test/x/z")
        );
        assert_eq!(
            loc("http://a.test/x/y", "/z?q=1").as_deref(),
            Some("http://a.test/z?q=1")
        );
        assert_eq!(
            loc("http://a.test/x", "//b.test/").as_deref(),
            Some("http://b.test/")
        );
        assert_eq!(
            loc("https://a.test/", "http://c.test:8080/r").as_deref(),
            Some("http://c.test:8080/r")
        );
        assert_eq!(
            loc("http://a.test/#frag", "/n").as_deref(),
            Some("http://a.test/n#frag")
        );
        assert_eq!(loc("http://a.test/", "  ").as_deref(), None);
    }

    #[test]
    fn host_header_omits_default_ports() {
        let h = |u: &str| host_header(&Url::parse(u).unwrap()).unwrap();
        assert_eq!(h("http://a.test/"), "a.test");
        assert_eq!(h("https://a.test:443/"), "a.test");
        assert_eq!(h("http://a.test:8080/"), "a.test:8080");
    }

    #[test]
    fn only_http_urls_are_fetched() {
        assert!(check_url(&Url::parse("ftp://a.test/").unwrap()).is_err());
        assert!(check_url(&Url::parse("file:///etc/passwd").unwrap()).is_err());
        assert!(check_url(&Url::parse("https://a.test/").unwrap()).is_ok());
    }
}
