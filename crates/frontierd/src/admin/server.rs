//! The admin HTTP API server (hyper 1, HTTP/1.1): endpoints, limits, authentication.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::admin::hosts::{host_arg, host_detail, list_hosts, pause_or_resume, unknown_host};
use crate::admin::request::{self as admin_request, BadRequest};
use crate::admin::MAX_BODY;
use crate::daemon::intake;
use crate::daemon::shared::Shared;
use crate::internal_events::admin::{
    AdminAcceptFailed, AdminConnectionClosed, AdminConnectionOpened, AdminConnectionRefused,
    AdminTimedOut, AdminTimeout,
};
use crate::internal_events::InternalEvent;
use crate::url_list::{self, Batch};

/// Refusals of connections over `admin.max_connections` are logged at most this often
/// (each one is counted).
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// The admin API on a thread and runtime of its own. On the daemon's runtime a request's
/// tasks waited in the run queue behind every ready fetch task, so submits and scrapes
/// slowed with the number of workers. Its own thread gets the kernel's share beside the
/// runtime's threads, however many fetches are ready (docs/benchmarks.md, issue 13
/// session 17).
pub struct AdminServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AdminServer {
    /// Serve `listener` (bound, any blocking mode) until [`AdminServer::stop`].
    pub fn start(listener: std::net::TcpListener, sh: Arc<Shared>) -> Result<AdminServer> {
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("frontierd-admin")
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (registered, outcome) = std::sync::mpsc::sync_channel::<std::io::Result<()>>(1);
        let thread = std::thread::Builder::new()
            .name("frontierd-admin".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = registered.send(Err(e));
                            return;
                        }
                    };
                    let _ = registered.send(Ok(()));
                    // dropping `serve` at the stop drops every connection with it
                    tokio::select! {
                        _ = serve(listener, sh) => {}
                        _ = stopped => {}
                    }
                });
                // a submit's enqueue still on the blocking pool finishes (it is durable
                // when it returns); nothing waits longer than that
                runtime.shutdown_timeout(Duration::from_secs(5));
            })?;
        // the daemon does not start without its API: the listener's registration is
        // waited for (a moment, once)
        match outcome.recv() {
            Ok(Ok(())) => Ok(AdminServer {
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => anyhow::bail!("the admin API's thread ended before it listened"),
        }
    }

    /// Close the listener and every connection, and wait for the thread.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for AdminServer {
    /// Left without [`AdminServer::stop`] (a start-up step after it failed): the thread is
    /// told to stop, not waited for.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serve the admin API. Every connection must send a whole request head within
/// `admin.header_read_timeout` (also between requests on a kept-alive connection) and
/// finish each request, body and answer, within `admin.request_timeout`; at most
/// `admin.max_connections` are open at once, further ones get a 503 and are closed.
async fn serve(listener: TcpListener, sh: Arc<Shared>) {
    let limits = &sh.settings.raw.admin;
    let max_connections = limits.max_connections as usize;
    let header_read_timeout = limits.header_read_timeout.0;
    let request_timeout = limits.request_timeout.0;
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut last_refusal_log: Option<Instant> = None;
    // aborting `serve` (at the stop) drops every connection with it
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                AdminAcceptFailed { error: &e }.emit(&sh.metrics);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            let log = last_refusal_log.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY);
            if log {
                last_refusal_log = Some(Instant::now());
            }
            AdminConnectionRefused {
                peer,
                max_connections,
                log,
            }
            .emit(&sh.metrics);
            refuse_busy(stream);
            continue;
        };
        let sh = sh.clone();
        connections.spawn(async move {
            let _slot = slot;
            AdminConnectionOpened { peer }.emit(&sh.metrics);
            let served = Arc::new(AtomicU32::new(0));
            let svc = {
                let (sh, served) = (sh.clone(), served.clone());
                service_fn(move |req| {
                    let (sh, served) = (sh.clone(), served.clone());
                    async move {
                        let method = req.method().clone();
                        let path = req.uri().path().to_string();
                        let answer = tokio::time::timeout(request_timeout, handle(sh.clone(), req));
                        let response = match answer.await {
                            Ok(r) => r,
                            Err(_) => {
                                AdminTimedOut {
                                    peer,
                                    timeout: &AdminTimeout::Request { method },
                                    path: &path,
                                    limit: request_timeout,
                                }
                                .emit(&sh.metrics);
                                let mut r = error(
                                    StatusCode::REQUEST_TIMEOUT,
                                    &format!(
                                        "request not complete within admin.request_timeout ({})",
                                        humantime::format_duration(request_timeout)
                                    ),
                                );
                                r.headers_mut().insert(
                                    hyper::header::CONNECTION,
                                    hyper::header::HeaderValue::from_static("close"),
                                );
                                r
                            }
                        };
                        served.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, Infallible>(response)
                    }
                })
            };
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(TokioIo::new(stream), svc);
            let ended = conn.await;
            match &ended {
                // a kept-alive connection that goes quiet after its requests is closed the
                // same way: only a connection that never completed a request head counts
                Err(e) if e.is_timeout() && served.load(Ordering::Relaxed) == 0 => {
                    AdminTimedOut {
                        peer,
                        timeout: &AdminTimeout::Header,
                        path: "",
                        limit: header_read_timeout,
                    }
                    .emit(&sh.metrics);
                    AdminConnectionClosed { peer, error: None }.emit(&sh.metrics);
                }
                Err(e) => AdminConnectionClosed {
                    peer,
                    error: Some(e),
                }
                .emit(&sh.metrics),
                Ok(()) => AdminConnectionClosed { peer, error: None }.emit(&sh.metrics),
            }
        });
    }
}

/// A 503 for a connection over the cap, written without waiting (the socket's send buffer
/// is empty), then the connection is closed.
fn refuse_busy(stream: TcpStream) {
    let body = "{\"error\": \"too many admin connections (admin.max_connections); retry later\"}\n";
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

fn reply(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = ctype.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

pub(super) fn json(status: StatusCode, v: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    reply(status, "application/json", s)
}

pub(super) fn error(status: StatusCode, msg: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": msg }))
}

pub(super) fn bad_request(e: BadRequest) -> Response<Full<Bytes>> {
    error(StatusCode::BAD_REQUEST, &e.0)
}

async fn handle(sh: Arc<Shared>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let query = query.as_deref();
    let method = req.method().clone();
    if method == Method::GET && path == "/healthz" {
        return match sh.disk.refusal() {
            None => reply(StatusCode::OK, "text/plain", "ok\n"),
            Some(reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("paused: {reason}; new URLs are refused until space is freed\n"),
            ),
        };
    }
    if let Some(token) = &sh.token {
        let given = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if !admin_request::token_matches(given, token) {
            return error(StatusCode::UNAUTHORIZED, "bearer token required");
        }
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (&method, segs.as_slice()) {
        (&Method::GET, ["metrics"]) => {
            // the gauges read from the frontier are refreshed if it answers in time; the
            // counters answer whatever the frontier is doing (a stuck store write included)
            let sh2 = sh.clone();
            let refresh = tokio::task::spawn_blocking(move || {
                sh2.snapshot();
            });
            let _ = tokio::time::timeout(METRICS_REFRESH_WAIT, refresh).await;
            let accept = req
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = crate::metrics::Format::negotiate(accept);
            reply(
                StatusCode::OK,
                format.content_type(),
                sh.metrics.encode(format),
            )
        }
        (&Method::POST, ["v1", "urls"]) => post_urls(sh, req).await,
        _ => {
            let (path, query) = (path.clone(), query.map(str::to_string));
            off_thread(&sh, move |sh| route(sh, &method, &path, query.as_deref())).await
        }
    }
}

/// How long /metrics waits for the frontier's gauges before answering without them.
const METRICS_REFRESH_WAIT: Duration = Duration::from_secs(2);
/// How long a request that reads the frontier waits for it.
const FRONTIER_WAIT: Duration = Duration::from_secs(10);

/// Run `f` on the blocking pool, not on the admin thread: a request that waits for the
/// frontier (its lock held by a store write that does not return) must not stop /healthz,
/// /metrics and the other requests from being answered.
async fn off_thread(
    sh: &Arc<Shared>,
    f: impl FnOnce(&Shared) -> Response<Full<Bytes>> + Send + 'static,
) -> Response<Full<Bytes>> {
    let sh = sh.clone();
    match tokio::time::timeout(FRONTIER_WAIT, tokio::task::spawn_blocking(move || f(&sh))).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("request failed: {e}"),
        ),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the frontier did not answer within {} s (a store write may be stuck: see the daemon's log); /healthz and /metrics still answer",
                FRONTIER_WAIT.as_secs()
            ),
        ),
    }
}

/// The requests that read or change the frontier (answered by [`off_thread`]).
fn route(sh: &Shared, method: &Method, path: &str, query: Option<&str>) -> Response<Full<Bytes>> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segs.as_slice()) {
        (&Method::GET, ["v1", "stats"]) => json(StatusCode::OK, &sh.snapshot().to_json()),
        (&Method::GET, ["v1", "hosts"]) => {
            let q = match admin_request::hosts_query(query) {
                Ok(q) => q,
                Err(e) => return bad_request(e),
            };
            match list_hosts(sh, q.state.as_deref(), q.limit) {
                Ok(v) => json(StatusCode::OK, &v),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e:#}")),
            }
        }
        (&Method::GET, ["v1", "hosts", arg]) => {
            let h = match admin_request::no_query(query).and_then(|()| host_arg(sh, arg)) {
                Ok(h) => h,
                Err(e) => return bad_request(e),
            };
            match host_detail(sh, &h) {
                Ok(Some(v)) => json(StatusCode::OK, &v),
                Ok(None) => error(StatusCode::NOT_FOUND, &unknown_host(&h)),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e:#}")),
            }
        }
        (&Method::GET, ["v1", "ip-groups"]) => match admin_request::no_query(query) {
            Ok(()) => json(StatusCode::OK, &crate::admin::ip_groups::ip_groups_json(sh)),
            Err(e) => bad_request(e),
        },
        (&Method::POST, ["v1", "hosts", arg, action @ ("pause" | "resume")]) => {
            pause_or_resume(sh, arg, action, query)
        }
        _ => error(StatusCode::NOT_FOUND, "no such endpoint"),
    }
}

async fn post_urls(sh: Arc<Shared>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if sh.stopping.load(std::sync::atomic::Ordering::SeqCst) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "stopping");
    }
    if let Some(reason) = crate::daemon::disk::refuse_intake(&sh, "api") {
        return error(
            StatusCode::INSUFFICIENT_STORAGE,
            &format!("{reason}: nothing was queued; send the list again once space is freed"),
        );
    }
    let too_large = |size: String| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "request body of {size} is over the {} MiB limit of POST /v1/urls: send the list \
                 in parts (frontierd submit does)",
                MAX_BODY >> 20
            ),
        )
    };
    // answered before reading: the client learns at once, not after sending 64 MiB
    let announced = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = announced.filter(|n| *n > MAX_BODY as u64) {
        return too_large(format!("{n} bytes"));
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return too_large("more than that".into())
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("reading the body: {e}")),
    };
    let batch = if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        match json_urls(&body) {
            Ok(b) => b,
            Err(msg) => return error(StatusCode::BAD_REQUEST, &msg),
        }
    } else {
        url_list::parse_list(&body)
    };
    if !sh.settings.sitemaps.enabled && !batch.kinds.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "an element has \"kind\": \"sitemap\" but sitemaps.enabled = false: nothing was queued",
        );
    }
    match intake::submit_batch(&sh, batch).await {
        Ok(t) => {
            let rejections: Vec<serde_json::Value> = t
                .rejected
                .iter()
                .map(|r| serde_json::json!({ "line": r.line, "url": r.input, "reason": r.reason }))
                .collect();
            json(
                StatusCode::OK,
                &serde_json::json!({
                    "accepted": t.accepted,
                    "duplicate": t.duplicate,
                    "rejected": t.rejected.len(),
                    "rejections": rejections,
                }),
            )
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e:#}")),
    }
}

/// `kind` of a JSON element: `page` (the default) or `sitemap`.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
enum JsonKind {
    #[default]
    Page,
    Sitemap,
}

/// A JSON array of URL strings or `{"url", "kind"}` objects; the error names the position
/// of what is wrong.
fn json_urls(body: &[u8]) -> std::result::Result<Batch, String> {
    let text = std::str::from_utf8(body).map_err(|e| {
        let at = e.valid_up_to();
        let line = body[..at].iter().filter(|b| **b == b'\n').count() + 1;
        let column = at
            - body[..at]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        format!(
            "body is not UTF-8: byte 0x{:02X} at offset {at} (line {line}, column {column})",
            body.get(at).copied().unwrap_or(0)
        )
    })?;
    let elements = serde_json::from_str::<Vec<JsonUrl>>(text).map_err(|e| {
        format!("expected a JSON array of URL strings or {{\"url\", \"revisit_interval\", \"refetch_at\", \"kind\": \"page\" | \"sitemap\"}} objects: {e}")
    })?;
    let mut urls = Vec::with_capacity(elements.len());
    let mut recrawl = std::collections::BTreeMap::new();
    let mut kinds = std::collections::BTreeMap::new();
    for (i, e) in elements.into_iter().enumerate() {
        match e {
            JsonUrl::Plain(u) => urls.push(u),
            JsonUrl::WithFields {
                url,
                revisit_interval,
                refetch_at,
                kind,
            } => {
                if let JsonKind::Sitemap = kind {
                    kinds.insert(
                        i,
                        frontier::EntryKind::Sitemap(frontier::SitemapSource::Listed),
                    );
                }
                let fields = url_list::UrlRecrawl {
                    revisit_interval_ms: revisit_interval
                        .map(|s| interval_ms(&s))
                        .transpose()
                        .map_err(|why| format!("element {}: revisit_interval: {why}", i + 1))?,
                    refetch_at_ms: refetch_at
                        .map(|s| rfc3339_ms(&s))
                        .transpose()
                        .map_err(|why| format!("element {}: refetch_at: {why}", i + 1))?,
                };
                recrawl.insert(i, fields);
                urls.push(url);
            }
        }
    }
    let mut batch = Batch::from_urls(urls);
    batch.recrawl = recrawl;
    batch.kinds = kinds;
    Ok(batch)
}

/// One element of a JSON URL list: a URL, or a URL with its own recrawl fields.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum JsonUrl {
    Plain(String),
    WithFields {
        url: String,
        revisit_interval: Option<String>,
        refetch_at: Option<String>,
        #[serde(default)]
        kind: JsonKind,
    },
}

/// `"off"` (0: never revisit) or a duration such as `"6h"`, in ms.
fn interval_ms(s: &str) -> std::result::Result<u64, String> {
    if s.trim() == "off" {
        return Ok(0);
    }
    humantime::parse_duration(s.trim())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| format!("{s:?} is not \"off\" or a duration such as \"6h\" ({e})"))
}

/// An RFC 3339 instant such as `"2026-12-01T00:00:00Z"`, in unix ms.
fn rfc3339_ms(s: &str) -> std::result::Result<u64, String> {
    humantime::parse_rfc3339_weak(s.trim())
        .map_err(|e| {
            format!("{s:?} is not an RFC 3339 time such as \"2026-12-01T00:00:00Z\" ({e})")
        })
        .map(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        })
}
