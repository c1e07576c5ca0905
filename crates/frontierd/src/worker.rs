//! Fetch workers: each takes the next leased item from the frontier (a robots.txt fetch or
//! a page), fetches it, archives it, logs it to the crawl log, queues what it found (links,
//! a redirect target within `scope.max_redirect_hops`) and reports the outcome back.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fetcher::{FetchOutcome, Url};
use frontier::{EnqueueItem, NetworkFailure, PageLease, PageOutcome, RobotsLease, WorkItem};

use crate::crawl_log::{media_type, Found, LogLine};
use crate::daemon::{now_ms, Shared};
use crate::discovery::{self, Hop};
use crate::links::extract_links;
use crate::robots_fetch::{refused_fetch_result, robots_fetch_result};
use warc::{Exchange, Truncated};

/// One fetch worker, until the daemon stops.
pub async fn worker(sh: Arc<Shared>, _id: u32) {
    loop {
        if sh.stopping.load(Ordering::SeqCst) {
            return;
        }
        let now = now_ms();
        let item = match sh.frontier.next(now) {
            Ok(i) => i,
            Err(e) => {
                tracing::error!(error = %e, "frontier next failed");
                None
            }
        };
        sh.drain_events();
        let Some(item) = item else {
            let wait_ms = match sh.frontier.next_ready_at() {
                Some(t) => t.saturating_sub(now).clamp(20, 1000),
                None => 1000,
            };
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait_ms)) => {}
                _ = sh.wake.notified() => {}
                _ = sh.shutdown.notified() => {}
            }
            continue;
        };
        sh.in_flight.fetch_add(1, Ordering::SeqCst);
        sh.metrics
            .in_flight
            .set(sh.in_flight.load(Ordering::Relaxed) as i64);
        match item {
            WorkItem::Robots(lease) => robots_item(&sh, lease).await,
            WorkItem::Page(lease) => page_item(&sh, lease).await,
        }
        sh.in_flight.fetch_sub(1, Ordering::SeqCst);
        sh.metrics
            .in_flight
            .set(sh.in_flight.load(Ordering::Relaxed) as i64);
        sh.drain_events();
    }
}

fn response_ms(t: &fetcher::Timings) -> u64 {
    t.time_to_headers.unwrap_or(t.total).as_millis() as u64
}

fn ip_of(a: Option<std::net::SocketAddr>) -> Option<std::net::IpAddr> {
    a.map(|a| a.ip())
}

/// Head as it should be archived: the body handed to WARC is de-chunked, so
/// Transfer-Encoding must not be announced.
fn archive_response(resp: &fetcher::ResponseRecord) -> (Vec<u8>, &[u8], Option<Truncated>) {
    let mut r = resp.clone();
    r.headers.remove("transfer-encoding");
    let body: &[u8] = match &resp.wire_body {
        Some(w) => w,
        None => {
            if resp.content_coding.is_decoded() {
                r.headers.remove("content-encoding");
            }
            &resp.body
        }
    };
    let truncated = if resp.truncated {
        Some(Truncated::Length)
    } else if resp.body_error.is_some() {
        Some(Truncated::Disconnect)
    } else {
        None
    };
    (r.head_bytes(), body, truncated)
}

fn outcome_label(o: &FetchOutcome) -> &'static str {
    match o {
        FetchOutcome::Success { .. } => "2xx",
        FetchOutcome::Redirect { .. } | FetchOutcome::RedirectLimitExceeded { .. } => "3xx",
        FetchOutcome::ClientError { .. } | FetchOutcome::TooManyRequests { .. } => "4xx",
        FetchOutcome::ServerError { .. } => "5xx",
        FetchOutcome::Network { .. } => "network",
    }
}

async fn robots_item(sh: &Arc<Shared>, lease: RobotsLease) {
    let started = Instant::now();
    let (result, ms) = match Url::parse(&lease.url) {
        Err(e) => {
            tracing::warn!(url = %lease.url, error = %e, "robots URL does not parse");
            sh.metrics.robots_fetch("refused");
            (
                robots_policy::state::RobotsFetchResult::Network {
                    kind: robots_policy::state::NetworkErrorKind::Other,
                },
                0,
            )
        }
        Ok(url) => match sh.fetcher.fetch_robots(&url).await {
            Err(e) => {
                tracing::warn!(url = %lease.url, error = %e, "robots.txt fetch refused");
                sh.metrics.robots_fetch("refused");
                (refused_fetch_result(&e), 0)
            }
            Ok(f) => {
                sh.metrics.robots_fetch(match &f.outcome {
                    FetchOutcome::Success { .. } => "2xx",
                    FetchOutcome::Redirect { .. } => "3xx",
                    FetchOutcome::RedirectLimitExceeded { .. } => "redirect-limit",
                    FetchOutcome::ClientError { .. } => "4xx",
                    FetchOutcome::TooManyRequests { .. } => "429",
                    FetchOutcome::ServerError { .. } => "5xx",
                    FetchOutcome::Network { .. } => "network",
                });
                sh.metrics
                    .fetch_latency
                    .observe(f.timings.total.as_secs_f64());
                for hop in &f.exchanges {
                    if let Some(resp) = &hop.response {
                        sh.metrics.fetched_bytes.inc_by(resp.body.len() as u64);
                        let req_head = hop.request.head_bytes();
                        let (head, body, truncated) = archive_response(resp);
                        let target = hop.request.url.to_string();
                        sh.write_warc(&Exchange {
                            target_uri: &target,
                            ip: ip_of(hop.peer_addr),
                            date: hop.started_at,
                            request_head: &req_head,
                            response_head: &head,
                            response_body: body,
                            truncated,
                        });
                    }
                }
                (robots_fetch_result(&f), response_ms(&f.timings))
            }
        },
    };
    tracing::debug!(origin = %lease.origin, elapsed_ms = started.elapsed().as_millis() as u64, "robots.txt done");
    let fr = sh.frontier.clone();
    let res =
        tokio::task::spawn_blocking(move || fr.complete_robots(&lease, &result, ms, now_ms()))
            .await;
    match res {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "complete_robots failed"),
        Err(e) => tracing::error!(error = %e, "complete_robots task failed"),
    }
}

async fn page_item(sh: &Arc<Shared>, lease: PageLease) {
    // what politeness (gap, back-off, robots hold) cost this URL once its host had a free
    // slot; waiting for a free worker or for robots.txt is not in it
    sh.metrics
        .politeness_wait
        .observe(lease.politeness_wait_ms as f64 / 1000.0);
    // stored with the URL in the frontier, so they survive restarts
    let depth = lease.depth;
    let found = Found {
        depth,
        via: lease.via.as_deref(),
        hops: &lease.hops,
    };
    let url = match Url::parse(&lease.url) {
        Ok(u) => u,
        Err(e) => {
            complete(
                sh,
                &lease,
                PageOutcome::Failed {
                    reason: format!("URL does not parse: {e}"),
                },
            )
            .await;
            return;
        }
    };
    let fetch = match sh.fetcher.fetch_page(&url).await {
        Ok(f) => f,
        Err(e) => {
            sh.metrics.page_fetch("refused");
            complete(
                sh,
                &lease,
                PageOutcome::Failed {
                    reason: e.to_string(),
                },
            )
            .await;
            return;
        }
    };
    let class = outcome_label(&fetch.outcome);
    sh.metrics.page_fetch(class);
    sh.metrics
        .fetch_latency
        .observe(fetch.timings.total.as_secs_f64());
    let ms = response_ms(&fetch.timings);
    let total_ms = fetch.timings.total.as_millis() as u64;
    let mut bytes = 0u64;
    let mut archived = None;
    let mut content_type = None;
    if let Some(resp) = &fetch.response {
        bytes = resp.body.len() as u64;
        sh.metrics.fetched_bytes.inc_by(bytes);
        content_type = resp
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .and_then(media_type);
        let req_head = fetch.request.head_bytes();
        let (head, body, truncated) = archive_response(resp);
        archived = sh.write_warc(&Exchange {
            target_uri: fetch.url.as_str(),
            ip: ip_of(fetch.peer_addr),
            date: fetch.timings.started_at,
            request_head: &req_head,
            response_head: &head,
            response_body: body,
            truncated,
        });
    }
    let status = fetch.outcome.status().map(|s| s.as_u16());
    let mut discovered: Vec<EnqueueItem> = Vec::new();
    let (outcome, final_log) = match &fetch.outcome {
        FetchOutcome::Success { headers, body, .. } => {
            let is_html = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(|v| {
                    let v = v.to_ascii_lowercase();
                    v.contains("text/html") || v.contains("application/xhtml")
                })
                .unwrap_or(false);
            let scope = &sh.settings.raw.scope;
            if is_html && scope.follow_links && depth < scope.max_depth {
                let xrt: Vec<&str> = headers
                    .get_all("x-robots-tag")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .collect();
                let links = extract_links(&url, body, &xrt, &sh.link_cfg);
                if links.robots.follow {
                    let hops = discovery::extend(&lease.hops, Hop::Link);
                    for l in links.links {
                        if let Ok(lu) = Url::parse(&l) {
                            if sh.in_scope(&url, &lu) {
                                discovered.push(EnqueueItem {
                                    url: l,
                                    depth: depth.saturating_add(1),
                                    via: Some(lease.url.clone()),
                                    hops: hops.clone(),
                                });
                            }
                        }
                    }
                }
            }
            (
                PageOutcome::Done { response_ms: ms },
                Some(("fetched", String::new())),
            )
        }
        FetchOutcome::Redirect { location, .. } => {
            let (o, reason, target) = redirect_step(sh, &lease, location.as_ref());
            discovered.extend(target);
            (PageOutcome::Done { response_ms: ms }, Some((o, reason)))
        }
        FetchOutcome::RedirectLimitExceeded { .. } | FetchOutcome::ClientError { .. } => (
            PageOutcome::Done { response_ms: ms },
            Some(("fetched", String::new())),
        ),
        // failures: the frontier's rule tells a server-wide signal (the host slows) from
        // a failure of this URL (retried behind the queue)
        FetchOutcome::TooManyRequests { retry_after } => {
            (PageOutcome::from_status(429, *retry_after, ms), None)
        }
        FetchOutcome::ServerError {
            status,
            retry_after,
        } => (
            PageOutcome::from_status(status.as_u16(), *retry_after, ms),
            None,
        ),
        FetchOutcome::Network { kind, detail } => (
            PageOutcome::from_network(network_failure(*kind), detail),
            None,
        ),
    };
    let done = matches!(outcome, PageOutcome::Done { .. });
    match &outcome {
        PageOutcome::Done { .. } => {}
        PageOutcome::Throttled { .. } => sh.metrics.page_failure("throttled"),
        PageOutcome::Unreachable { .. } => sh.metrics.page_failure("unreachable"),
        PageOutcome::TimedOut { .. } => sh.metrics.page_failure("timed-out"),
        PageOutcome::Failed { .. } => sh.metrics.page_failure("failed"),
    }
    if !discovered.is_empty() {
        if let Err(e) = sh.submit_items(discovered, false).await {
            tracing::error!(error = %e, "enqueue of discovered links failed");
        }
    }
    complete(sh, &lease, outcome).await;
    if done {
        sh.pages_done.fetch_add(1, Ordering::Relaxed);
    } else {
        tracing::debug!(url = %lease.url, attempt = lease.attempt, ?status, "fetch to be retried");
    }
    if let Some((o, reason)) = final_log {
        sh.log_line(&LogLine {
            url: &lease.url,
            outcome: o,
            status,
            bytes,
            duration_ms: total_ms,
            reason: &reason,
            found,
            content_type,
            ip: ip_of(fetch.peer_addr),
            archived: archived.as_ref(),
        });
    }
}

/// A page answered with a redirect: its target enters the frontier like a discovered URL,
/// at the same depth (see docs/crawl-log.md, "Redirects"), unless the chain that led here
/// already has `scope.max_redirect_hops` redirects. Returns the crawl log outcome and
/// reason, and the target to queue.
fn redirect_step(
    sh: &Shared,
    lease: &PageLease,
    location: Option<&Url>,
) -> (&'static str, String, Option<EnqueueItem>) {
    let Some(loc) = location else {
        return ("redirected", "no usable Location".into(), None);
    };
    let chain = discovery::trailing_redirects(&lease.hops);
    let limit = sh.settings.raw.scope.max_redirect_hops;
    if chain >= limit {
        sh.metrics.redirect_chains_stopped.inc();
        tracing::info!(
            url = %lease.url, location = %loc, redirects = chain, limit,
            "redirect chain stopped at scope.max_redirect_hops"
        );
        let reason = format!(
            "scope.max_redirect_hops = {limit} reached ({chain} redirects led here): location {loc} not followed"
        );
        return ("redirect-limit", reason, None);
    }
    let target = EnqueueItem {
        url: loc.to_string(),
        depth: lease.depth,
        via: Some(lease.url.clone()),
        hops: discovery::extend(&lease.hops, Hop::Redirect),
    };
    ("redirected", format!("location {loc}"), Some(target))
}

/// The fetcher's network error kinds in the frontier's terms (one to one; the frontier
/// decides what each means for the host).
fn network_failure(kind: fetcher::NetworkErrorKind) -> NetworkFailure {
    use fetcher::NetworkErrorKind as K;
    match kind {
        K::Dns => NetworkFailure::Dns,
        K::Connect => NetworkFailure::Connect,
        K::Tls => NetworkFailure::Tls,
        K::Timeout => NetworkFailure::Timeout,
        K::Reset => NetworkFailure::Reset,
        K::InvalidResponse | K::BrokenChunking => NetworkFailure::Malformed,
        K::Other => NetworkFailure::Other,
    }
}

async fn complete(sh: &Arc<Shared>, lease: &PageLease, outcome: PageOutcome) {
    let fr = sh.frontier.clone();
    let id = lease.id;
    let res = tokio::task::spawn_blocking(move || fr.complete(id, outcome, now_ms())).await;
    match res {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(url = %lease.url, error = %e, "complete failed"),
        Err(e) => tracing::error!(error = %e, "complete task failed"),
    }
}
