//! Sitemaps in the daemon: where they come from (robots.txt `Sitemap:` lines,
//! `sitemaps.urls`, a submitted sitemap) and what a worker does with a leased one (parse it
//! off the runtime threads, log and count what it held, offer its URLs). Every decision is
//! crawl::sitemap's (which sitemaps are queued, what a listed page's priority does); sitemaps are queue entries like pages, so they wait in the same host
//! queue, obey the same gap and the same robots.txt (docs/sitemaps.md).

use std::sync::Arc;

use crawl::sitemap::{apply_priority, judge_sitemap, listed_in_config, named_by_robots, Lastmods};
use crawl::{Page, PageVerdict};
use fetcher::{FetchOutcome, Url};
use frontier::{EnqueueItem, PageLease, SitemapSource};

use crate::daemon::offer::Offer;
use crate::daemon::shared::Shared;
use crate::internal_events::daemon::FrontierCall;
use crate::internal_events::sitemap::{
    SitemapLastmodApplied, SitemapNotParsed, SitemapParsed, SitemapRefused, SitemapUrlsOffered,
};
use crate::internal_events::InternalEvent;

/// Judge a leased sitemap's answer: parsed on the blocking pool (50 MiB of XML is not for
/// a runtime thread), its report logged and counted.
pub async fn judge(
    sh: &Arc<Shared>,
    lease: &PageLease,
    source: SitemapSource,
    outcome: &FetchOutcome,
    response_ms: u64,
) -> PageVerdict {
    let url = match Url::parse(&lease.url) {
        Ok(u) => u,
        Err(e) => return PageVerdict::not_fetched(format!("URL does not parse: {e}")),
    };
    let (shared, outcome_owned) = (sh.clone(), outcome.clone());
    let (url_s, hops, depth) = (lease.url.clone(), lease.hops.clone(), lease.depth);
    let started = std::time::Instant::now();
    let judged = tokio::task::spawn_blocking(move || {
        let page = Page {
            url: &url_s,
            parsed: &url,
            depth,
            hops: &hops,
        };
        judge_sitemap(
            &shared.follow,
            &shared.settings.sitemaps.limits,
            &page,
            source,
            &outcome_owned,
            response_ms,
        )
    })
    .await;
    let verdict = match judged {
        Ok(v) => v,
        Err(e) => {
            sh.frontier_failed(FrontierCall::Task, &e, 1);
            return PageVerdict::not_fetched(format!("sitemap parse task failed: {e}"));
        }
    };
    match &verdict.report {
        Some(report) => SitemapParsed {
            url: &lease.url,
            report,
            elapsed: started.elapsed(),
        }
        .emit(&sh.metrics),
        None if verdict.page.is_done() => SitemapNotParsed {
            url: &lease.url,
            status: outcome.status().map(|s| s.as_u16()),
        }
        .emit(&sh.metrics),
        None => {}
    }
    verdict.page
}

/// Offer what a sitemap listed (or a redirect target) to the frontier, counted: listed
/// pages get their `priority` applied to their revisit interval, and the `lastmod` of
/// those already known may make them due now.
pub async fn offer(sh: &Arc<Shared>, sitemap: &str, mut items: Vec<EnqueueItem>) {
    apply_priority(&sh.frontier.config().recrawl, &mut items);
    let lastmods = Lastmods::of(&items);
    let summary = match sh.offer(Offer::found(items)).await {
        Ok(summary) => summary,
        Err(e) => {
            let what = format!("{sitemap}: {e:#}");
            sh.frontier_failed(FrontierCall::EnqueueSitemap, &what, 0);
            return;
        }
    };
    SitemapUrlsOffered {
        url: sitemap,
        queued: summary.accepted,
        duplicate: summary.duplicate,
        rejected: summary.rejected.len() as u64,
    }
    .emit(&sh.metrics);
    let known = lastmods.known(&summary.duplicate_at);
    if known.is_empty() {
        return;
    }
    let fr = sh.frontier.clone();
    let applied = tokio::task::spawn_blocking(move || {
        fr.apply_lastmod(&known, crate::daemon::shared::now_ms())
    })
    .await;
    match applied {
        Ok(Ok(results)) => {
            SitemapLastmodApplied {
                url: sitemap,
                results: &results,
            }
            .emit(&sh.metrics);
            if results.contains(&frontier::LastmodResult::Due) {
                sh.pipeline.kick();
            }
        }
        Ok(Err(e)) => {
            let what = format!("{sitemap}: {e}");
            sh.frontier_failed(FrontierCall::SitemapLastmod, &what, 0)
        }
        Err(e) => sh.frontier_failed(FrontierCall::Task, &e, 0),
    }
}

/// The sitemaps a robots.txt names, queued when `sitemaps.enabled` (which ones is
/// `crawl::sitemap::named_by_robots`'s). Queued once: a robots.txt refresh naming them
/// again finds them already seen.
pub async fn from_robots(sh: &Arc<Shared>, robots_url: &str, body: &[u8]) {
    if !sh.settings.sitemaps.enabled {
        return;
    }
    let robots = robots_policy::RobotsTxt::parse(body);
    if robots.sitemaps().is_empty() {
        return;
    }
    let named = named_by_robots(robots_url, robots.sitemaps(), &sh.follow.scope);
    for (sitemap, why) in named.refused {
        SitemapRefused {
            named_by: robots_url,
            sitemap,
            why,
        }
        .emit(&sh.metrics);
    }
    if !named.items.is_empty() {
        offer(sh, robots_url, named.items).await;
    }
}

/// `sitemaps.urls`, queued at start when `sitemaps.enabled` (a sitemap already seen is not
/// queued again).
pub async fn from_config(sh: &Arc<Shared>) {
    let s = &sh.settings.sitemaps;
    if !s.enabled || s.urls.is_empty() {
        return;
    }
    offer(sh, "sitemaps.urls", listed_in_config(&s.urls)).await;
}
