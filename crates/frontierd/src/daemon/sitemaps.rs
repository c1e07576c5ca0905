//! Sitemaps in the daemon: where they come from (robots.txt `Sitemap:` lines,
//! `sitemaps.urls`, a submitted sitemap) and what a worker does with a leased one (parse it
//! off the runtime threads, log and count what it held, offer its URLs). Every decision is
//! crawl::sitemap's; sitemaps are queue entries like pages, so they wait in the same host
//! queue, obey the same gap and the same robots.txt (docs/sitemaps.md).

use std::sync::Arc;

use crawl::sitemap::{judge_sitemap, mean_priority_permille, priority_scaled_interval, Dropped};
use crawl::{Page, PageVerdict};
use fetcher::{FetchOutcome, Url};
use frontier::{EnqueueItem, EntryKind, PageLease, SitemapSource};

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
    // (index, url, lastmod) of the entries with a lastmod, for those found already known
    let lastmods: Vec<(usize, String, u64)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, it)| {
            let m = it.hints.as_ref()?.lastmod_ms?;
            Some((i, it.url.clone(), u64::try_from(m).ok()?))
        })
        .collect();
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
    let known: Vec<(String, u64)> = lastmods
        .into_iter()
        .filter(|(i, _, _)| summary.duplicate_at.binary_search(i).is_ok())
        .map(|(_, url, m)| (url, m))
        .collect();
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

/// Listed pages' `priority`, relative to their sitemap's mean, scales their revisit
/// interval (their `changefreq`'s, else the `[recrawl]` one) within
/// `min_interval..=max_interval` (`crawl::sitemap::priority_scaled_interval`). A URL the
/// configuration does not revisit stays so.
fn apply_priority(recrawl: &frontier::RecrawlConfig, items: &mut [EnqueueItem]) {
    let mean = mean_priority_permille(items.iter().map(|it| it.hints.as_ref()));
    for item in items.iter_mut() {
        if item.kind != EntryKind::Page {
            continue;
        }
        let Some(priority) = item.hints.as_ref().and_then(|h| h.priority_permille) else {
            continue;
        };
        let host = Url::parse(&item.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let Some(base) = recrawl.base_interval(&item.url, &host, item.revisit_interval_ms) else {
            continue;
        };
        item.revisit_interval_ms = Some(priority_scaled_interval(
            base,
            priority,
            mean,
            recrawl.min_interval_ms,
            recrawl.max_interval_ms,
        ));
    }
}

/// The sitemaps a robots.txt names, queued as sitemaps of its host when `sitemaps.enabled`
/// and `[scope]` admits them (robots.txt as the page they are found on). Queued once: a
/// robots.txt refresh naming them again finds them already seen.
pub async fn from_robots(sh: &Arc<Shared>, robots_url: &str, body: &[u8]) {
    if !sh.settings.sitemaps.enabled {
        return;
    }
    let robots = robots_policy::RobotsTxt::parse(body);
    if robots.sitemaps().is_empty() {
        return;
    }
    let Ok(parsed) = Url::parse(robots_url) else {
        return;
    };
    let mut items = Vec::new();
    for line in robots.sitemaps() {
        let refused = |why| {
            SitemapRefused {
                named_by: robots_url,
                sitemap: line,
                why,
            }
            .emit(&sh.metrics)
        };
        // absolute, as the protocol asks; a relative one is read against robots.txt
        let Ok(sitemap) = parsed.join(line.trim()) else {
            refused(Dropped::InvalidUrl);
            continue;
        };
        if !sh.follow.scope.admits(&parsed, &sitemap) {
            refused(Dropped::OutOfScope);
            continue;
        }
        items.push(EnqueueItem {
            url: sitemap.into(),
            depth: 0,
            via: Some(robots_url.to_string()),
            hops: crawl::discovery::extend("", crawl::discovery::Hop::Sitemap),
            kind: EntryKind::Sitemap(SitemapSource::Robots),
            ..EnqueueItem::default()
        });
    }
    if !items.is_empty() {
        offer(sh, robots_url, items).await;
    }
}

/// `sitemaps.urls`, queued at start when `sitemaps.enabled` (a sitemap already seen is not
/// queued again).
pub async fn from_config(sh: &Arc<Shared>) {
    let s = &sh.settings.sitemaps;
    if !s.enabled || s.urls.is_empty() {
        return;
    }
    let items = s
        .urls
        .iter()
        .map(|u| EnqueueItem {
            kind: EntryKind::Sitemap(SitemapSource::Listed),
            ..EnqueueItem::seed(u.as_str())
        })
        .collect();
    offer(sh, "sitemaps.urls", items).await;
}
