//! The admin API's routes on axum, each answer a type from `answers.rs`. Requests that read
//! or change the frontier run on the blocking pool with a time limit: a store write that
//! does not return must not stop `/healthz`, `/metrics` and the other requests.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, Request, Response, StatusCode, Uri};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Serialize;

use crate::answers::{ErrorAnswer, PauseAnswer, RejectedLine, SubmitAnswer};
use crate::backend::{Backend, IntakeRefusal, PauseChange, ServerEvent};
use crate::request::{self, BadRequest};
use crate::{json_list, status_page, url_list, views, MAX_BODY};

/// How long /metrics waits for the frontier's gauges before answering without them.
const METRICS_REFRESH_WAIT: Duration = Duration::from_secs(2);
/// How long a request that reads the frontier waits for it.
const FRONTIER_WAIT: Duration = Duration::from_secs(10);

type Shared = Arc<dyn Backend>;

/// The routes; every one but `/healthz` needs the bearer token when one is set.
pub(crate) fn routes(backend: Shared, token: Option<String>) -> Router {
    let token = token.map(Arc::new);
    Router::new()
        .route(
            "/",
            get(|| async {
                status_page::asset("text/html; charset=utf-8", status_page::INDEX_HTML)
            }),
        )
        .route(
            "/status.js",
            get(|| async {
                status_page::asset("text/javascript; charset=utf-8", status_page::STATUS_JS)
            }),
        )
        .route(
            "/status.css",
            get(|| async {
                status_page::asset("text/css; charset=utf-8", status_page::STATUS_CSS)
            }),
        )
        // browsers ask for it by themselves: no icon, and no error in their console
        .route(
            "/favicon.ico",
            get(|| async { reply(StatusCode::NO_CONTENT, "image/x-icon", "") }),
        )
        .route("/v1/recent", get(recent))
        .route("/metrics", get(metrics))
        .route("/v1/urls", post(post_urls))
        .route("/v1/stats", get(stats))
        .route("/v1/hosts", get(hosts))
        .route("/v1/hosts/:host", get(host))
        .route("/v1/hosts/:host/:action", post(pause_or_resume))
        .route("/v1/ip-groups", get(ip_groups))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint") })
        .layer(axum::middleware::from_fn(move |req, next| {
            let token = token.clone();
            authorize(token, req, next)
        }))
        // after the layer: health checks carry no token
        .route("/healthz", get(healthz))
        .with_state(backend)
}

async fn authorize(
    token: Option<Arc<String>>,
    req: Request<Body>,
    next: axum::middleware::Next,
) -> Response<Body> {
    if let Some(token) = token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if !request::token_matches(given, &token) {
            return error(StatusCode::UNAUTHORIZED, "bearer token required");
        }
    }
    next.run(req).await
}

/// An answer of `content_type`.
pub(crate) fn reply(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Body>,
) -> Response<Body> {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// A typed answer as indented JSON.
pub(crate) fn json<T: Serialize>(status: StatusCode, answer: &T) -> Response<Body> {
    let mut s = serde_json::to_string_pretty(answer).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    reply(status, "application/json", s)
}

/// `{"error": msg}` with `status`.
pub(crate) fn error(status: StatusCode, msg: &str) -> Response<Body> {
    json(
        status,
        &ErrorAnswer {
            error: msg.to_string(),
        },
    )
}

fn bad_request(e: BadRequest) -> Response<Body> {
    error(StatusCode::BAD_REQUEST, &e.0)
}

async fn healthz(State(b): State<Shared>) -> Response<Body> {
    match b.unhealthy() {
        None => reply(StatusCode::OK, "text/plain", "ok\n"),
        Some(reason) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!("paused: {reason}; new URLs are refused until space is freed\n"),
        ),
    }
}

async fn metrics(State(b): State<Shared>, headers: HeaderMap) -> Response<Body> {
    // the gauges read from the frontier are refreshed if it answers in time; the counters
    // answer whatever the frontier is doing (a stuck store write included)
    let b2 = b.clone();
    let refresh = tokio::task::spawn_blocking(move || b2.refresh_gauges());
    let _ = tokio::time::timeout(METRICS_REFRESH_WAIT, refresh).await;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, body) = b.metrics(accept);
    reply(StatusCode::OK, &content_type, body)
}

/// Run `f` on the blocking pool, not on the admin thread, within [`FRONTIER_WAIT`].
async fn off_thread(
    b: Shared,
    f: impl FnOnce(&dyn Backend) -> Response<Body> + Send + 'static,
) -> Response<Body> {
    match tokio::time::timeout(FRONTIER_WAIT, tokio::task::spawn_blocking(move || f(&*b))).await
    {
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

async fn recent(State(b): State<Shared>) -> Response<Body> {
    json(StatusCode::OK, &b.recent())
}

async fn stats(State(b): State<Shared>) -> Response<Body> {
    off_thread(b, |b| json(StatusCode::OK, &b.stats())).await
}

async fn hosts(State(b): State<Shared>, RawQuery(query): RawQuery) -> Response<Body> {
    let q = match request::hosts_query(query.as_deref()) {
        Ok(q) => q,
        Err(e) => return bad_request(e),
    };
    off_thread(b, move |b| {
        match views::hosts(
            b.frontier(),
            q.state.as_deref(),
            q.limit,
            q.sort,
            b.now_ms(),
        ) {
            Ok(v) => json(StatusCode::OK, &v),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    })
    .await
}

/// The host argument as sent (still percent-encoded: a whole origin may be one segment).
fn raw_host_segment(uri: &Uri) -> &str {
    uri.path().split('/').nth(3).unwrap_or("")
}

/// A host argument and the politeness key it names.
struct HostArg {
    requested: String,
    key: String,
}

impl HostArg {
    fn parse(b: &dyn Backend, segment: &str) -> Result<HostArg, BadRequest> {
        let requested = request::path_segment(segment)?;
        let key = request::host_key(&requested, b.frontier().config().key_mode)?;
        Ok(HostArg { requested, key })
    }

    fn unknown(&self) -> String {
        if self.requested == self.key {
            format!(
                "unknown host {:?}: the frontier has no record of it",
                self.key
            )
        } else {
            format!(
                "unknown host {:?} (politeness key {:?}): the frontier has no record of it",
                self.requested, self.key
            )
        }
    }
}

async fn host(State(b): State<Shared>, uri: Uri, RawQuery(query): RawQuery) -> Response<Body> {
    let segment = raw_host_segment(&uri).to_string();
    off_thread(b, move |b| {
        let h = match request::no_query(query.as_deref()).and_then(|()| HostArg::parse(b, &segment))
        {
            Ok(h) => h,
            Err(e) => return bad_request(e),
        };
        match views::host(b.frontier(), &h.key, &h.requested, b.now_ms()) {
            Ok(Some(v)) => json(StatusCode::OK, &v),
            Ok(None) => error(StatusCode::NOT_FOUND, &h.unknown()),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }
    })
    .await
}

async fn ip_groups(State(b): State<Shared>, RawQuery(query): RawQuery) -> Response<Body> {
    if let Err(e) = request::no_query(query.as_deref()) {
        return bad_request(e);
    }
    off_thread(b, |b| {
        json(StatusCode::OK, &views::ip_groups(b.frontier(), b.now_ms()))
    })
    .await
}

/// `POST /v1/hosts/{host}/pause|resume`. A host the frontier has no record of (never
/// submitted, or a typo) is a 404, unless `?create=true` asks to pause it ahead of its
/// first URL; resuming a host that is not paused and has no record is a 404 too.
async fn pause_or_resume(
    State(b): State<Shared>,
    uri: Uri,
    RawQuery(query): RawQuery,
) -> Response<Body> {
    let action = match uri.path().split('/').nth(4) {
        Some("pause") => "pause",
        Some("resume") => "resume",
        _ => return error(StatusCode::NOT_FOUND, "no such endpoint"),
    };
    let segment = raw_host_segment(&uri).to_string();
    off_thread(b, move |b| {
        pause_or_resume_now(b, &segment, action, query.as_deref())
    })
    .await
}

fn pause_or_resume_now(
    b: &dyn Backend,
    segment: &str,
    action: &'static str,
    query: Option<&str>,
) -> Response<Body> {
    let create = if action == "pause" {
        request::pause_query(query)
    } else {
        request::no_query(query).map(|()| false)
    };
    let (create, h) = match create.and_then(|c| Ok((c, HostArg::parse(b, segment)?))) {
        Ok(x) => x,
        Err(e) => return bad_request(e),
    };
    let frontier = b.frontier();
    let internal = |e: &dyn std::fmt::Display| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("{action} {}: {e}", h.key),
        )
    };
    let known = match frontier.host_record(&h.key) {
        Ok(rec) => rec.is_some() || frontier.is_paused(&h.key),
        Err(e) => return internal(&e),
    };
    if !known && !create {
        let hint = if action == "pause" {
            "; add ?create=true to pause it before its first URL arrives"
        } else {
            ""
        };
        return error(StatusCode::NOT_FOUND, &format!("{}{hint}", h.unknown()));
    }
    let changed = if action == "pause" {
        frontier.pause(&h.key)
    } else {
        let r = frontier.resume(&h.key);
        b.wake();
        r
    };
    let changed = match changed {
        Ok(changed) => changed,
        Err(e) => return internal(&e),
    };
    b.event(ServerEvent::PauseChanged(PauseChange {
        host: &h.key,
        requested: &h.requested,
        action,
        changed,
        created: !known,
    }));
    json(
        StatusCode::OK,
        &PauseAnswer {
            host: h.key.clone(),
            key: h.key.clone(),
            requested: h.requested.clone(),
            paused: frontier.is_paused(&h.key),
            changed,
            created: !known,
        },
    )
}

async fn post_urls(State(b): State<Shared>, headers: HeaderMap, body: Body) -> Response<Body> {
    match b.intake_refusal() {
        Some(IntakeRefusal::Stopping) => return error(StatusCode::SERVICE_UNAVAILABLE, "stopping"),
        Some(IntakeRefusal::Storage(reason)) => {
            return error(
                StatusCode::INSUFFICIENT_STORAGE,
                &format!("{reason}: nothing was queued; send the list again once space is freed"),
            )
        }
        None => {}
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
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = announced.filter(|n| *n > MAX_BODY as u64) {
        return too_large(format!("{n} bytes"));
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return too_large("more than that".into())
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("reading the body: {e}")),
    };
    let batch = if json_list::is_json(&body) {
        match json_list::parse(&body) {
            Ok(b) => b,
            Err(msg) => return error(StatusCode::BAD_REQUEST, &msg),
        }
    } else {
        url_list::parse_list(&body)
    };
    if !b.sitemaps_enabled() && !batch.kinds.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "an element has \"kind\": \"sitemap\" but sitemaps.enabled = false: nothing was queued",
        );
    }
    match b.submit(batch).await {
        Ok(t) => json(
            StatusCode::OK,
            &SubmitAnswer {
                accepted: t.accepted,
                duplicate: t.duplicate,
                rejected: t.rejected.len(),
                rejections: t
                    .rejected
                    .into_iter()
                    .map(|r| RejectedLine {
                        line: r.line,
                        url: r.input,
                        reason: r.reason,
                    })
                    .collect(),
            },
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e),
    }
}
