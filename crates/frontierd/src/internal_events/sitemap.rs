//! Sitemaps: one parsed (or cut, or not a sitemap), one fetched without a 2xx to parse,
//! the URLs one listed offered to the frontier, robots.txt `Sitemap:` lines queued or out
//! of scope.

use crawl::sitemap::{Dropped, SitemapReport};

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// A sitemap body was parsed: what it held, what was dropped and why, where it was cut.
pub struct SitemapParsed<'a> {
    pub url: &'a str,
    pub report: &'a SitemapReport,
    /// Parse and judgement, on the blocking pool.
    pub elapsed: std::time::Duration,
}

impl InternalEvent for SitemapParsed<'_> {
    fn emit(self, m: &Metrics) {
        let r = self.report;
        let result = r.result();
        let summary = r.summary();
        let parse_ms = self.elapsed.as_millis() as u64;
        if r.cut.is_some() || r.dropped(Dropped::NestedIndex) > 0 {
            tracing::warn!(sitemap = %self.url, result, parse_ms, "sitemap cut: {summary}");
        } else {
            tracing::info!(sitemap = %self.url, result, parse_ms, "{summary}");
        }
        m.sitemaps.get_or_create(&label("result", result)).inc();
        for why in Dropped::ALL {
            let n = r.dropped(why);
            if n > 0 {
                m.sitemap_urls
                    .get_or_create(&label("result", why.code()))
                    .inc_by(n);
            }
        }
        if r.over_limit > 0 {
            m.sitemap_urls
                .get_or_create(&label("result", "over-limit"))
                .inc_by(r.over_limit);
        }
    }
}

/// A sitemap fetch ended without a body to parse (4xx, a redirect, a redirect past the
/// limit): its crawl log line says what it got.
pub struct SitemapNotParsed<'a> {
    pub url: &'a str,
    pub status: Option<u16>,
}

impl InternalEvent for SitemapNotParsed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(sitemap = %self.url, status = ?self.status, "sitemap not parsed: no 2xx answer");
        m.sitemaps.get_or_create(&label("result", "not-2xx")).inc();
    }
}

/// The URLs a sitemap listed (in scope) were offered to the frontier.
pub struct SitemapUrlsOffered<'a> {
    pub url: &'a str,
    pub queued: u64,
    pub duplicate: u64,
    pub rejected: u64,
}

impl InternalEvent for SitemapUrlsOffered<'_> {
    fn emit(self, m: &Metrics) {
        tracing::debug!(
            sitemap = %self.url, queued = self.queued, duplicate = self.duplicate,
            rejected = self.rejected, "sitemap URLs offered"
        );
        for (result, n) in [
            ("queued", self.queued),
            ("duplicate", self.duplicate),
            ("rejected", self.rejected),
        ] {
            if n > 0 {
                m.sitemap_urls
                    .get_or_create(&label("result", result))
                    .inc_by(n);
            }
        }
    }
}

/// A robots.txt `Sitemap:` line (or a `sitemaps.urls` entry) not queued: outside
/// `[scope]` of the robots.txt's host, or not a URL.
pub struct SitemapRefused<'a> {
    pub named_by: &'a str,
    pub sitemap: &'a str,
    pub why: Dropped,
}

impl InternalEvent for SitemapRefused<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            named_by = %self.named_by, sitemap = %self.sitemap, reason = self.why.code(),
            "sitemap not fetched"
        );
        m.sitemaps
            .get_or_create(&label("result", self.why.code()))
            .inc();
    }
}

/// The `lastmod` of a sitemap's entries already known, applied to their schedule.
pub struct SitemapLastmodApplied<'a> {
    pub url: &'a str,
    pub results: &'a [frontier::LastmodResult],
}

impl InternalEvent for SitemapLastmodApplied<'_> {
    fn emit(self, m: &Metrics) {
        let mut counts: std::collections::BTreeMap<&'static str, u64> = Default::default();
        for r in self.results {
            *counts.entry(r.as_str()).or_default() += 1;
        }
        let due = counts.get("due").copied().unwrap_or(0);
        if due > 0 {
            tracing::info!(sitemap = %self.url, due, "sitemap lastmod later than the last fetch: {due} known URL(s) due now");
        }
        tracing::debug!(sitemap = %self.url, ?counts, "sitemap lastmod applied");
        for (result, n) in counts {
            m.sitemap_lastmod
                .get_or_create(&label("result", result))
                .inc_by(n);
        }
    }
}
