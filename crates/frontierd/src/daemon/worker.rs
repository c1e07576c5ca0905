//! Fetch workers: each takes the next leased item from the frontier (a robots.txt fetch or
//! a page), fetches it, archives it, logs it to the crawl log, queues what it found (links,
//! a redirect target within `scope.max_redirect_hops`) and reports the outcome back.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawl::{
    archive_response, judge_page, media_type, refused_fetch_result, robots_fetch_result,
    FetchClass, Found, LogLine, Page, PageVerdict,
};
use fetcher::Url;
use frontier::{PageLease, PageOutcome, RobotsLease, WorkItem};
use warc::Exchange;

use crate::daemon::shared::{now_ms, Shared};

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

/// The `page_fetches` metric's label: 429 counts with 4xx, a redirect past the limit with 3xx.
fn page_class_label(class: FetchClass) -> &'static str {
    match class {
        FetchClass::Success => "2xx",
        FetchClass::Redirect | FetchClass::RedirectLimit => "3xx",
        FetchClass::ClientError | FetchClass::TooManyRequests => "4xx",
        FetchClass::ServerError => "5xx",
        FetchClass::Network => "network",
        FetchClass::Refused => "refused",
    }
}

/// The `robots_fetches` metric's label.
fn robots_class_label(class: FetchClass) -> &'static str {
    match class {
        FetchClass::Success => "2xx",
        FetchClass::Redirect => "3xx",
        FetchClass::RedirectLimit => "redirect-limit",
        FetchClass::ClientError => "4xx",
        FetchClass::TooManyRequests => "429",
        FetchClass::ServerError => "5xx",
        FetchClass::Network => "network",
        FetchClass::Refused => "refused",
    }
}

async fn robots_item(sh: &Arc<Shared>, lease: RobotsLease) {
    let started = Instant::now();
    let (result, ms) = match Url::parse(&lease.url) {
        Err(e) => {
            tracing::warn!(url = %lease.url, error = %e, "robots URL does not parse");
            sh.metrics
                .robots_fetch(robots_class_label(FetchClass::Refused));
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
                sh.metrics
                    .robots_fetch(robots_class_label(FetchClass::Refused));
                (refused_fetch_result(&e), 0)
            }
            Ok(f) => {
                sh.metrics
                    .robots_fetch(robots_class_label(FetchClass::of(&f.outcome)));
                sh.metrics
                    .fetch_latency
                    .observe(f.timings.total.as_secs_f64());
                for hop in &f.exchanges {
                    if let Some(resp) = &hop.response {
                        sh.metrics.fetched_bytes.inc_by(resp.body.len() as u64);
                        let req_head = hop.request.head_bytes();
                        let archived = archive_response(resp);
                        sh.write_warc(&Exchange {
                            target_uri: hop.request.url.as_str(),
                            ip: ip_of(hop.peer_addr),
                            date: hop.started_at,
                            request_head: &req_head,
                            response_head: &archived.head,
                            response_body: archived.body,
                            truncated: archived.truncated,
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
    let found = Found {
        depth: lease.depth,
        via: lease.via.as_deref(),
        hops: &lease.hops,
    };
    let url = match Url::parse(&lease.url) {
        Ok(u) => u,
        Err(e) => {
            let verdict = PageVerdict::not_fetched(format!("URL does not parse: {e}"));
            complete(sh, &lease, verdict.outcome).await;
            return;
        }
    };
    let fetch = match sh.fetcher.fetch_page(&url).await {
        Ok(f) => f,
        Err(e) => {
            sh.metrics.page_fetch(page_class_label(FetchClass::Refused));
            complete(sh, &lease, PageVerdict::not_fetched(e.to_string()).outcome).await;
            return;
        }
    };
    sh.metrics
        .page_fetch(page_class_label(FetchClass::of(&fetch.outcome)));
    sh.metrics
        .fetch_latency
        .observe(fetch.timings.total.as_secs_f64());
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
        let response = archive_response(resp);
        archived = sh.write_warc(&Exchange {
            target_uri: fetch.url.as_str(),
            ip: ip_of(fetch.peer_addr),
            date: fetch.timings.started_at,
            request_head: &req_head,
            response_head: &response.head,
            response_body: response.body,
            truncated: response.truncated,
        });
    }
    let status = fetch.outcome.status().map(|s| s.as_u16());
    let page = Page {
        url: &lease.url,
        parsed: &url,
        depth: lease.depth,
        hops: &lease.hops,
    };
    let verdict = judge_page(
        &sh.follow,
        &page,
        &fetch.outcome,
        response_ms(&fetch.timings),
    );
    if let Some(stopped) = &verdict.redirect_stopped {
        sh.metrics.redirect_chains_stopped.inc();
        tracing::info!(
            url = %lease.url, location = %stopped.location, redirects = stopped.chain,
            limit = stopped.limit, "redirect chain stopped at scope.max_redirect_hops"
        );
    }
    let done = verdict.is_done();
    match &verdict.outcome {
        PageOutcome::Done { .. } => {}
        PageOutcome::Throttled { .. } => sh.metrics.page_failure("throttled"),
        PageOutcome::Unreachable { .. } => sh.metrics.page_failure("unreachable"),
        PageOutcome::TimedOut { .. } => sh.metrics.page_failure("timed-out"),
        PageOutcome::Failed { .. } => sh.metrics.page_failure("failed"),
    }
    if !verdict.discovered.is_empty() {
        if let Err(e) = sh.submit_items(verdict.discovered, false).await {
            tracing::error!(error = %e, "enqueue of discovered links failed");
        }
    }
    complete(sh, &lease, verdict.outcome).await;
    if done {
        sh.pages_done.fetch_add(1, Ordering::Relaxed);
    } else {
        tracing::debug!(url = %lease.url, attempt = lease.attempt, ?status, "fetch to be retried");
    }
    if let Some((outcome, reason)) = verdict.log {
        sh.log_line(&LogLine {
            url: &lease.url,
            outcome,
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
