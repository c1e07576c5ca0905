//! frontier-grpc: crawler-commons' url-frontier gRPC API (package `urlfrontier`, service
//! `URLFrontier`, API version 2.x) served from a [`frontier::Frontier`], plus frontierd's
//! own `frontierd.v1.FrontierdQueues` service for what url-frontier's API cannot tell.
//!
//! The daemon wires it (`[grpc]` in frontierd's config); this crate knows nothing of the
//! daemon beyond [`Hooks`]: robots.txt fetches the frontier asks for while serving GetURLs
//! go to the daemon's fetcher, and every observable event is reported for its metrics.

// tonic's generated rpc signatures return `Result<_, tonic::Status>` (176 bytes); the
// helpers return the same type rather than box it and unbox it at every call
#![allow(clippy::result_large_err)]

pub mod extras;
mod service;
mod transit;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use frontier::{Frontier, RobotsLease};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Status};

pub use service::UrlFrontierService;

/// Code generated from `proto/urlfrontier.proto` (url-frontier's API).
pub mod pb {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("urlfrontier");
}

/// Code generated from `proto/frontierd.proto` (frontierd's extras).
pub mod pb_frontierd {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("frontierd.v1");
}

/// url-frontier's default crawl (an empty crawlID means it too).
pub use frontier::DEFAULT_CRAWL;

/// Lease length when GetURLs leaves `delay_requestable` at 0 (as the reference service).
pub const DEFAULT_LEASE_SECS: u32 = 30;

/// What the service reports to, and asks of, the program that runs it.
pub trait Hooks: Send + Sync + 'static {
    /// The frontier handed out a robots.txt fetch while serving GetURLs: fetch it and
    /// report it with [`Frontier::complete_robots`].
    fn fetch_robots(&self, lease: RobotsLease);
    /// Something observable happened (to log and count).
    fn event(&self, event: GrpcEvent<'_>);
    /// The frontier may hold new events (drops, robots transitions) after a GetURLs or a
    /// PutURLs chunk: take them (the daemon writes the crawl log lines of drops).
    fn frontier_changed(&self) {}
    /// url-frontier's SetLogLevel: log `target` (a tracing target such as `frontier` or
    /// `frontier_grpc::service`; empty: everything) at `level` from now on. Returns the
    /// filter now in force, or why it cannot be done (the program owns its logging; one
    /// without a reloadable filter says so).
    fn set_log_level(&self, target: &str, level: LogLevel) -> Result<String, String> {
        let _ = (target, level);
        Err("this server's log filter cannot be changed at run time".to_string())
    }
    /// Why new URLs cannot be taken now (the program's disk is low), if so: PutURLs and
    /// PutDiscovered answer `RESOURCE_EXHAUSTED` with it, before storing anything of the
    /// chunk that carries new URLs. Reports of leased URLs are still taken.
    fn intake_refusal(&self) -> Option<String> {
        None
    }
}

/// A log level (url-frontier's `LogLevelParams.Level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// The name a tracing filter directive takes.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// Observable events of the service.
#[derive(Debug, Clone, Copy)]
pub enum GrpcEvent<'a> {
    /// GetURLs handed out `urls` URLs from `queues` queues.
    Served { urls: u64, queues: u64 },
    /// `count` PutURLs / PutDiscovered items were acknowledged with this status (one event
    /// per status and chunk: a counter update per item cost more than the item).
    Acked { status: &'a str, count: u64 },
    /// Leases not reported within their `delay_requestable` returned to their queues.
    LeasesExpired { count: u64 },
    /// An rpc answered an error status (code name), e.g. unimplemented or invalid.
    RpcFailed { rpc: &'a str, code: &'a str },
    /// A request was refused for lack of the bearer token.
    Unauthenticated,
    /// DeleteQueue, DeleteCrawl or PurgeURLs (`rpc`) removed `urls` queued URLs.
    Deleted { rpc: &'a str, urls: u64 },
    /// SetLogLevel changed the log filter.
    LogLevelSet,
}

/// Receive window of a stream, in bytes: HTTP/2's initial value, so the server's SETTINGS
/// never shrink the window of a stream a client has already opened (see [`serve`]).
const STREAM_RECEIVE_WINDOW: u32 = 65_535;
/// Receive window of a connection, in bytes; h2 sizes its small-DATA-frame budget to half
/// of it (see [`serve`]).
const CONNECTION_RECEIVE_WINDOW: u32 = 16 * 1024 * 1024;

/// How the service runs.
#[derive(Debug, Clone)]
pub struct GrpcSettings {
    /// Bearer token every request must carry (`authorization: Bearer <token>`), if any.
    pub token: Option<String>,
    /// Address reported by ListNodes.
    pub node_address: String,
    /// How often expired leases are looked for.
    pub expiry_tick: Duration,
    /// At most this many URLs per GetURLs call.
    pub max_urls_per_call: usize,
    /// TLS (rustls): the server's certificate chain and private key, PEM; None: plaintext.
    pub tls: Option<TlsPem>,
}

/// A server identity for TLS, PEM encoded.
#[derive(Clone)]
pub struct TlsPem {
    /// Certificate chain.
    pub cert: Vec<u8>,
    /// Private key.
    pub key: Vec<u8>,
}

impl std::fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // never print the key
        f.write_str("TlsPem { .. }")
    }
}

impl Default for GrpcSettings {
    fn default() -> Self {
        GrpcSettings {
            token: None,
            node_address: String::new(),
            expiry_tick: Duration::from_millis(250),
            max_urls_per_call: 10_000,
            tls: None,
        }
    }
}

/// Serve both services on `listener` until `shutdown` resolves. Expired leases return to
/// their queues every `expiry_tick` meanwhile.
pub async fn serve(
    listener: TcpListener,
    frontier: Arc<Frontier>,
    hooks: Arc<dyn Hooks>,
    settings: GrpcSettings,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let mut builder = tonic::transport::Server::builder();
    if let Some(pem) = &settings.tls {
        let identity = tonic::transport::Identity::from_pem(&pem.cert, &pem.key);
        builder =
            builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    let svc = UrlFrontierService::new(frontier.clone(), hooks.clone(), settings.clone());
    let expiry = tokio::spawn(svc.clone().expiry_loop(settings.expiry_tick));
    let check = auth_check(settings.token.clone(), hooks.clone());
    let extras = extras::QueuesService::new(frontier);
    let result = builder
        // h2 closes a connection (GOAWAY ENHANCE_YOUR_CALM "too_many_data_frames") when the
        // small DATA frames sitting unread cost more framing overhead (256 - payload each)
        // than its budget, half the connection window (at least 25 600 bytes; h2 0.4.20). A
        // PutURLs stream from some clients is one small frame per URL, and the reader falls
        // behind under load. The stream window bounds what one stream may send ahead: 64 KiB
        // of frames of at least 22 bytes (5 + an item with any http URL) cost at most 700 KB
        // of the 8 MiB budget, so a connection may carry a dozen such streams at once.
        // The stream window stays at HTTP/2's initial 65 535: a smaller one (2 KiB before)
        // shrinks, when the client acknowledges the SETTINGS, the window of a stream it
        // opened and filled before them, and h2 then sends no window update for the data
        // already read: the stream stalled for good (seen in CI).
        .initial_connection_window_size(CONNECTION_RECEIVE_WINDOW)
        .initial_stream_window_size(STREAM_RECEIVE_WINDOW)
        .add_service(
            pb::url_frontier_server::UrlFrontierServer::with_interceptor(svc, check.clone()),
        )
        .add_service(
            pb_frontierd::frontierd_queues_server::FrontierdQueuesServer::with_interceptor(
                extras, check,
            ),
        )
        .serve_with_incoming_shutdown(nodelay(TcpListenerStream::new(listener)), shutdown)
        .await;
    expiry.abort();
    result
}

/// Accepted connections with Nagle's algorithm off. tonic's own `tcp_nodelay` applies only
/// to the listener it binds, not to one handed in: with Nagle on, each small answer that
/// followed another waited for the client's delayed ACK, 40 ms per GetURLs call and per
/// PutURLs report (4.5k URLs/s leased and reported, 100k over 1k hosts; the CPU idle).
fn nodelay(
    incoming: TcpListenerStream,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    incoming.map(|accepted| {
        let stream = accepted?;
        // a socket that refuses the option still serves, only slower
        let _ = stream.set_nodelay(true);
        Ok(stream)
    })
}

/// Whether `pem` makes a TLS server identity (certificate chain and matching key), so that
/// a bad file is an error at start rather than at the first connection.
pub fn check_tls(pem: &TlsPem) -> Result<(), tonic::transport::Error> {
    let identity = tonic::transport::Identity::from_pem(&pem.cert, &pem.key);
    tonic::transport::Server::builder()
        .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
        .map(|_| ())
}

/// The interceptor: with a token configured, every request carries it as a bearer token.
fn auth_check(
    token: Option<String>,
    hooks: Arc<dyn Hooks>,
) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    let expected = token.map(|t| Arc::<str>::from(format!("Bearer {t}")));
    move |req: Request<()>| {
        let Some(expected) = &expected else {
            return Ok(req);
        };
        let given = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if given.is_some_and(|g| constant_time_eq(g.as_bytes(), expected.as_bytes())) {
            Ok(req)
        } else {
            hooks.event(GrpcEvent::Unauthenticated);
            Err(Status::unauthenticated(
                "missing or wrong bearer token (metadata `authorization: Bearer <grpc.token>`)",
            ))
        }
    }
}

/// Compare without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
