//! Fetch workers: each takes the next leased item from the frontier (a robots.txt fetch or
//! a page), fetches it, archives it, logs it to the crawl log, queues what it found (links,
//! a redirect target within `scope.max_redirect_hops`) and reports the outcome back.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crawl::revisit;
use crawl::{
    address_refused_result, judge_page, refused_fetch_result, robots_exchanges,
    robots_fetch_result, FetchClass, Found, LogLine, Page, PageVerdict,
};
use fetcher::Url;
use frontier::{EntryKind, PageLease, PageOutcome, RobotsLease, Visit, WorkItem};
use frontierd_pipeline::Connected;

use crate::daemon::shared::Shared;
use crate::internal_events::cluster::{FetchWithheld, QueuedUrlFetchedElsewhere};
use crate::internal_events::daemon::FrontierCall;
use crate::internal_events::fetch::{
    PageFetchRefused, PageFetched, PageLeased, PageRetried, PageVisited, RedirectChainStopped,
    RobotsFetchRefused, RobotsFetched, RobotsRefusal,
};
use crate::internal_events::network::{AddressRefused, DnsLookupFailed, FetchKind};
use crate::internal_events::InternalEvent;

/// One fetch worker, until the daemon stops.
pub async fn worker(sh: Arc<Shared>, _id: u32) {
    // items come from the dispatcher (the pipeline crate), leased for all idle workers in one
    // call off the runtime threads; `None` once the daemon stops
    while let Some(item) = sh.pipeline.next_item().await {
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
    }
}

fn response_ms(t: &fetcher::Timings) -> u64 {
    t.time_to_headers.unwrap_or(t.total).as_millis() as u64
}

fn ip_of(a: Option<std::net::SocketAddr>) -> Option<std::net::IpAddr> {
    a.map(|a| a.ip())
}

fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fetch failed on DNS: log and count it (the frontier backs the host off).
fn dns_failure(sh: &Shared, url: &str, fetch: FetchKind, outcome: &fetcher::FetchOutcome) {
    if let fetcher::FetchOutcome::Network {
        kind: fetcher::NetworkErrorKind::Dns,
        detail,
    } = outcome
    {
        DnsLookupFailed { url, fetch, detail }.emit(&sh.metrics);
    }
}

pub(crate) async fn robots_item(sh: &Arc<Shared>, lease: RobotsLease) {
    let m = &sh.metrics;
    if shard_closed(sh, &lease.url) {
        give_back_robots(sh, lease).await;
        return;
    }
    // a 2xx body, for its Sitemap lines once the outcome is in
    let mut robots_body = None;
    // the first request went to the host itself (later hops may be elsewhere)
    let mut connected = None;
    let (result, ms) = match Url::parse(&lease.url) {
        Err(e) => {
            RobotsFetchRefused {
                url: &lease.url,
                refusal: RobotsRefusal::DoesNotParse(&e),
            }
            .emit(m);
            (refused_fetch_result(), 0)
        }
        Ok(url) => match sh.fetcher.fetch_robots(&url).await {
            // the shard closed between the check above and the request's write
            Err(fetcher::FetchError::Withheld { .. }) => {
                give_back_robots(sh, lease).await;
                return;
            }
            // nothing was sent: not a failure of the origin
            Err(e) if e.address_refused().is_some() => {
                if let Some(refused) = e.address_refused() {
                    AddressRefused {
                        url: &lease.url,
                        fetch: FetchKind::Robots,
                        refused,
                    }
                    .emit(m);
                }
                (address_refused_result(), 0)
            }
            Err(e) => {
                RobotsFetchRefused {
                    url: &lease.url,
                    refusal: RobotsRefusal::Fetcher(&e),
                }
                .emit(m);
                (refused_fetch_result(), 0)
            }
            Ok(f) => {
                if let fetcher::FetchOutcome::Success { body, .. } = &f.outcome {
                    robots_body = Some((lease.url.clone(), body.clone()));
                }
                dns_failure(sh, &lease.url, FetchKind::Robots, &f.outcome);
                connected = f.exchanges.first().and_then(|hop| {
                    hop.peer_addr.map(|a| Connected {
                        ip: a.ip(),
                        started_ms: unix_ms(hop.started_at),
                    })
                });
                // a robots.txt answer not archived is still applied (it is read again at its
                // expiry)
                let bytes = robots_exchanges(&f.exchanges, |ex| {
                    let _ = sh.write_warc(ex);
                });
                RobotsFetched {
                    origin: &lease.origin,
                    class: FetchClass::of(&f.outcome),
                    bytes,
                    elapsed: f.timings.total,
                }
                .emit(m);
                (robots_fetch_result(&f), response_ms(&f.timings))
            }
        },
    };
    // for the shard's log: its next holder obeys this answer instead of asking again
    if let Some(j) = sh.cluster.as_ref().and_then(|n| n.journal.as_ref()) {
        j.robots(&lease.origin, &result, crate::daemon::shared::now_ms());
    }
    // applied with other outcomes in one batch (one flush); the completer wakes the
    // dispatcher then: the host's pages may go
    sh.pipeline
        .complete_robots(lease, result, ms, connected)
        .await;
    if let Some((url, body)) = robots_body {
        crate::daemon::sitemaps::from_robots(sh, &url, &body).await;
    }
}

async fn page_item(sh: &Arc<Shared>, lease: PageLease) {
    // waiting for a free worker or for robots.txt is not in it
    PageLeased {
        url: &lease.url,
        politeness_wait: Duration::from_millis(lease.politeness_wait_ms),
    }
    .emit(&sh.metrics);
    // stored with the URL in the frontier, so they survive restarts
    let found = Found {
        depth: lease.depth,
        via: lease.via.as_deref(),
        hops: &lease.hops,
    };
    if fetched_elsewhere(sh, &lease.url) {
        // its shard's log says the last holder fetched it (this node had it queued from
        // before, or its done entry came late): completed without a request (the last holder
        // wrote its crawl log line and WARC record)
        QueuedUrlFetchedElsewhere { url: &lease.url }.emit(&sh.metrics);
        complete(sh, &lease, PageOutcome::Done { response_ms: 0 }, None, None).await;
        return;
    }
    if shard_closed(sh, &lease.url) {
        give_back(sh, &lease).await;
        return;
    }
    let url = match Url::parse(&lease.url) {
        Ok(u) => u,
        Err(e) => {
            let verdict = PageVerdict::not_fetched(format!("URL does not parse: {e}"));
            complete(sh, &lease, verdict.outcome, None, None).await;
            return;
        }
    };
    let Some(fetch) = fetch_leased(sh, &lease, &url, found).await else {
        return;
    };
    dns_failure(sh, &lease.url, FetchKind::Page, &fetch.outcome);
    let kept = archive_answer(sh, &lease, &fetch).await;
    PageFetched {
        url: &lease.url,
        class: FetchClass::of(&fetch.outcome),
        bytes: kept.bytes,
        elapsed: fetch.timings.total,
    }
    .emit(&sh.metrics);
    let verdict = judge_answer(sh, &lease, &url, &fetch, kept.warc_failed.as_deref()).await;
    act_on(sh, &lease, found, &fetch, kept, verdict).await;
}

/// A robots.txt lease not sent because its shard closed: given back, asked again after
/// the gap (by whichever node holds the shard then).
async fn give_back_robots(sh: &Arc<Shared>, lease: RobotsLease) {
    FetchWithheld {
        url: &lease.url,
        fetch: FetchKind::Robots,
    }
    .emit(&sh.metrics);
    let f = sh.frontier.clone();
    let now = crate::daemon::shared::now_ms();
    // (false: the lease is no longer out, nothing more to do)
    if let Err(e) = tokio::task::spawn_blocking(move || f.give_back_robots(&lease, now)).await {
        sh.frontier_failed(FrontierCall::Task, &e, 1);
    }
}

/// In a cluster: whether the shard of `url` has closed to this node since its lease was
/// handed out. Dispatch asks too, but a node frozen (SIGSTOP, a stalled VM) with the item in
/// hand wakes after the others took the shard, and its request must not go then. The
/// fetcher's send gate asks again on the connection, right before the request is written
/// (`cluster::ShardSendGate`).
fn shard_closed(sh: &Shared, url: &str) -> bool {
    sh.cluster.as_ref().is_some_and(|n| !n.may_send_now(url))
}

/// A page lease not sent because its shard closed: its URL returns to the front of its
/// host's queue.
async fn give_back(sh: &Arc<Shared>, lease: &PageLease) {
    FetchWithheld {
        url: &lease.url,
        fetch: FetchKind::Page,
    }
    .emit(&sh.metrics);
    let f = sh.frontier.clone();
    let (id, now) = (lease.id, crate::daemon::shared::now_ms());
    match tokio::task::spawn_blocking(move || f.give_back(id, now)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => sh.frontier_failed(FrontierCall::GiveBack, &format!("{e:#}"), 1),
        Err(e) => sh.frontier_failed(FrontierCall::Task, &e, 1),
    }
}

/// In a cluster with shard logs: whether the shard's last holder fetched `url` (a late
/// done entry of its log).
fn fetched_elsewhere(sh: &Shared, url: &str) -> bool {
    sh.cluster
        .as_ref()
        .and_then(|n| n.journal.as_ref())
        .is_some_and(|j| j.fetched_elsewhere(url))
}

/// Fetch a leased page; None when it was not fetched (the lease is then completed here).
async fn fetch_leased(
    sh: &Arc<Shared>,
    lease: &PageLease,
    url: &Url,
    found: Found<'_>,
) -> Option<fetcher::PageFetch> {
    // a URL answered before is asked conditionally (its last validators)
    let previous = revisit::previous(lease.revisit.as_ref());
    let options = fetcher::PageOptions {
        conditional: revisit::conditional(previous),
        // nothing else queued for the host: its socket is not kept idle for a next fetch
        last_for_host: lease.last_queued,
    };
    match sh.fetcher.fetch_page_with(url, &options).await {
        Ok(f) => Some(f),
        Err(fetcher::FetchError::AddressRefused { refused, .. }) => {
            address_refused(sh, lease, found, &refused).await;
            None
        }
        // the shard closed between the check in `page_item` and the request's write
        Err(fetcher::FetchError::Withheld { .. }) => {
            give_back(sh, lease).await;
            None
        }
        Err(e) => {
            PageFetchRefused {
                url: &lease.url,
                error: &e,
            }
            .emit(&sh.metrics);
            let outcome = PageVerdict::not_fetched(e.to_string()).outcome;
            complete(sh, lease, outcome, None, None).await;
            None
        }
    }
}

/// What was kept of an answer: its WARC record (or why not) and what the visit found.
#[derive(Default)]
struct Kept {
    bytes: u64,
    archived: Option<crawl::Archived>,
    warc_failed: Option<String>,
    content_type: Option<String>,
    visit: Option<Visit>,
}

/// Archive an answer: a response record, or a revisit record when it is unchanged since a
/// capture we archived; and judge the visit for the recrawl schedule (`crawl::revisit`).
async fn archive_answer(sh: &Shared, lease: &PageLease, fetch: &fetcher::PageFetch) -> Kept {
    let schedules_any = sh.frontier.config().recrawl.schedules_any();
    let Some(answer) = revisit::answer(lease.revisit.as_ref(), schedules_any, fetch) else {
        return Kept::default();
    };
    let written = sh
        .write_warc_as(&answer.exchange(), answer.as_revisit.as_ref())
        .await;
    let (archived, warc_failed) = match written {
        Ok(archived) => (archived, None),
        Err(why) => (None, Some(why)),
    };
    PageVisited {
        url: &lease.url,
        outcome: answer.outcome,
        archived_as_revisit: answer.as_revisit.is_some() && archived.is_some(),
    }
    .emit(&sh.metrics);
    Kept {
        bytes: answer.bytes,
        content_type: answer.content_type,
        visit: Some(answer.visit),
        archived,
        warc_failed,
    }
}

/// What the answer means for the crawl: a page's links and outcome, or a sitemap's entries.
async fn judge_answer(
    sh: &Arc<Shared>,
    lease: &PageLease,
    url: &Url,
    fetch: &fetcher::PageFetch,
    warc_failed: Option<&str>,
) -> PageVerdict {
    // fetched but not archived (disk full, the WARC directory gone): fetched again later,
    // not completed without its record; its links come with the next fetch
    if let Some(why) = warc_failed {
        return PageVerdict::not_fetched(format!("WARC write failed: {why}"));
    }
    let page = Page {
        url: &lease.url,
        parsed: url,
        depth: lease.depth,
        hops: &lease.hops,
    };
    let response_ms = response_ms(&fetch.timings);
    match lease.kind {
        EntryKind::Page => judge_page(&sh.follow, &page, &fetch.outcome, response_ms),
        EntryKind::Sitemap(source) => {
            crate::daemon::sitemaps::judge(sh, lease, source, &fetch.outcome, response_ms).await
        }
    }
}

/// Queue what the page led to, hand in its log line, report the outcome to the frontier.
async fn act_on(
    sh: &Arc<Shared>,
    lease: &PageLease,
    found: Found<'_>,
    fetch: &fetcher::PageFetch,
    kept: Kept,
    verdict: PageVerdict,
) {
    let m = &sh.metrics;
    let status = fetch.outcome.status().map(|s| s.as_u16());
    if let Some(stopped) = &verdict.redirect_stopped {
        RedirectChainStopped {
            url: &lease.url,
            stopped,
        }
        .emit(m);
    }
    let done = verdict.is_done();
    if !verdict.discovered.is_empty() {
        if lease.kind != EntryKind::Page {
            crate::daemon::sitemaps::offer(sh, &lease.url, verdict.discovered).await;
        // (in a cluster, links of hosts other nodes own go to the outbox instead)
        } else if let Err(e) = sh.queue_discovered(verdict.discovered).await {
            sh.frontier_failed(FrontierCall::EnqueueDiscovered, &format!("{e:#}"), 0);
        }
    }
    if !done {
        PageRetried {
            url: &lease.url,
            attempt: lease.attempt,
            status,
            outcome: &verdict.outcome,
        }
        .emit(m);
    }
    let connected = fetch.peer_addr.map(|a| Connected {
        ip: a.ip(),
        started_ms: unix_ms(fetch.timings.started_at),
    });
    let visit_outcome = kept.visit.as_ref().map(|v| v.outcome);
    // the line before the outcome: the completer flushes the lines before it stores the
    // batch, so a stored outcome's line is in the file
    if let Some((outcome, reason)) = verdict.log {
        sh.log_line(&LogLine {
            url: &lease.url,
            outcome,
            status,
            bytes: kept.bytes,
            duration_ms: fetch.timings.total.as_millis() as u64,
            reason: &reason,
            found,
            content_type: kept.content_type,
            ip: ip_of(fetch.peer_addr),
            archived: kept.archived.as_ref(),
            visit: visit_outcome,
        });
    }
    complete(sh, lease, verdict.outcome, kept.visit, connected).await;
    if done {
        m.pages_completed.inc();
        // for the shard's log: its next holder does not fetch it again (under a recrawl
        // schedule: not before its next visit), after the links it found for other nodes
        // (in the outbox now)
        if let Some(node) = &sh.cluster {
            if let Some(j) = &node.journal {
                let outbox_next = node.outbox.next_sequence();
                if sh.frontier.config().recrawl.schedules_any() {
                    j.visited(&lease.url, outbox_next, unix_ms(fetch.timings.started_at));
                } else {
                    j.done(&lease.url, outbox_next);
                }
            }
        }
    }
}

/// A page the address policy refused: final (no retry, no back-off), one crawl log line.
async fn address_refused(
    sh: &Arc<Shared>,
    lease: &PageLease,
    found: Found<'_>,
    refused: &fetcher::AddressRefused,
) {
    AddressRefused {
        url: &lease.url,
        fetch: FetchKind::Page,
        refused,
    }
    .emit(&sh.metrics);
    let verdict = PageVerdict::address_refused(refused);
    if let Some((outcome, reason)) = verdict.log {
        sh.log_line(&LogLine::unfetched(&lease.url, outcome, &reason, found));
    }
    complete(sh, lease, verdict.outcome, None, None).await;
    sh.metrics.pages_completed.inc();
}

/// Hand the outcome (and the visit, for the recrawl schedule, and where the fetch
/// connected) to the completer: applied with others in one batch (one flush).
async fn complete(
    sh: &Arc<Shared>,
    lease: &PageLease,
    outcome: PageOutcome,
    visit: Option<Visit>,
    connected: Option<Connected>,
) {
    sh.pipeline
        .complete(lease.id, outcome, visit, connected)
        .await;
}
