//! What a sitemap fetch means for the crawl: its entries that may be queued (scope and the
//! sitemaps.org path rule), one level of index nesting, and the report that is logged and
//! counted.

use std::fmt::Write as _;

use fetcher::FetchOutcome;
use frontier::{EnqueueItem, EntryKind, PageOutcome, SitemapHints, SitemapSource};
use url::Url;

use super::{parse_sitemap, Cut, SitemapLimits, SitemapType};
use crate::crawl_log::Outcome;
use crate::discovery::{self, Hop};
use crate::page::{judge_page, FollowRules, Page, PageVerdict};
use crate::scope::Scope;

/// Why an entry of a sitemap was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dropped {
    /// No usable `loc`, or a `loc` that is not an absolute http(s) URL.
    InvalidUrl,
    /// Another host (or outside `[scope]` include/exclude) where scope does not allow it.
    OutOfScope,
    /// On the sitemap's own host but not under its directory (sitemaps.org: a sitemap
    /// lists URLs under its own path only, unless robots.txt names it).
    OutsideSitemapPath,
    /// An index listed by an index: nesting is followed one level only.
    NestedIndex,
}

impl Dropped {
    pub const ALL: [Dropped; 4] = [
        Dropped::InvalidUrl,
        Dropped::OutOfScope,
        Dropped::OutsideSitemapPath,
        Dropped::NestedIndex,
    ];

    /// Stable name: the `result` label of `frontierd_sitemap_urls_total`.
    pub fn code(self) -> &'static str {
        match self {
            Dropped::InvalidUrl => "invalid-url",
            Dropped::OutOfScope => "out-of-scope",
            Dropped::OutsideSitemapPath => "outside-sitemap-path",
            Dropped::NestedIndex => "nested-index",
        }
    }
}

/// What a fetched sitemap held and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapReport {
    pub kind: Option<SitemapType>,
    pub gzip: bool,
    /// Uncompressed XML bytes read.
    pub bytes: u64,
    /// Entries offered to the frontier (pages, or for an index its sitemaps).
    pub admitted: u64,
    /// Entries not offered, by reason (in [`Dropped::ALL`] order).
    pub dropped: [u64; 4],
    /// Entries past `max_urls`, counted and cut.
    pub over_limit: u64,
    /// Why the parse stopped early, if it did.
    pub cut: Option<Cut>,
    /// The fetcher cut the body at `fetch.page_body_cap` before parsing.
    pub body_truncated: bool,
}

impl SitemapReport {
    /// How many entries were dropped for `why`.
    pub fn dropped(&self, why: Dropped) -> u64 {
        Dropped::ALL
            .iter()
            .position(|d| *d == why)
            .map_or(0, |i| self.dropped[i])
    }

    /// The `result` label of `frontierd_sitemaps_total`: `parsed`, `nested-index`, or the
    /// cut's code.
    pub fn result(&self) -> &'static str {
        match &self.cut {
            Some(cut) => cut.code(),
            None if self.dropped(Dropped::NestedIndex) > 0 => "nested-index",
            None => "parsed",
        }
    }

    /// One line for the crawl log's `reason` and the daemon's log.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "sitemap {}{}: {} bytes, {} queued",
            self.kind.map_or("(no root element)", SitemapType::as_str),
            if self.gzip { " (gzip)" } else { "" },
            self.bytes,
            self.admitted,
        );
        for why in Dropped::ALL {
            let n = self.dropped(why);
            if n > 0 {
                let _ = write!(s, ", {n} {}", why.code());
            }
        }
        if self.over_limit > 0 {
            let _ = write!(s, ", {} over-limit", self.over_limit);
        }
        if self.dropped(Dropped::NestedIndex) > 0 {
            s.push_str("; an index listed by an index is not followed (one level of nesting)");
        }
        if let Some(cut) = &self.cut {
            let _ = write!(s, "; cut: {cut}");
        }
        if self.body_truncated {
            s.push_str("; body cut at fetch.page_body_cap");
        }
        s
    }
}

/// What a sitemap fetch means.
#[derive(Debug, Clone)]
pub struct SitemapVerdict {
    /// What the frontier is told, the crawl log line, what is queued (listed pages, an
    /// index's sitemaps, a redirect target fetched as the same kind of sitemap).
    pub page: PageVerdict,
    /// Set when a body was parsed.
    pub report: Option<SitemapReport>,
}

/// Whether a sitemap at `sitemap`, named by `source`, may list `listed`. Another host (or
/// scheme or port) only when `[scope]` admits it; the sitemap's own host only under its
/// directory, unless robots.txt named it (robots.txt speaks for the whole host); and
/// `[scope]` include/exclude always.
pub fn listed_in_scope(
    scope: &Scope,
    sitemap: &Url,
    source: SitemapSource,
    listed: &Url,
) -> Result<(), Dropped> {
    if !matches!(listed.scheme(), "http" | "https") || listed.host_str().is_none() {
        return Err(Dropped::InvalidUrl);
    }
    if !scope.admits(sitemap, listed) {
        return Err(Dropped::OutOfScope);
    }
    let same_origin = listed.origin() == sitemap.origin();
    if same_origin && source != SitemapSource::Robots {
        let path = sitemap.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        if !listed.path().starts_with(dir) {
            return Err(Dropped::OutsideSitemapPath);
        }
    }
    Ok(())
}

/// Judges the answer to a sitemap fetch: a 2xx body is parsed within `limits` and its
/// entries in scope are queued (pages with the sitemap's hints, or the sitemaps of an
/// index); other answers are judged as a page's are (retries, redirects, back-off), a
/// redirect target being fetched as the same kind of sitemap.
pub fn judge_sitemap(
    rules: &FollowRules,
    limits: &SitemapLimits,
    sitemap: &Page<'_>,
    source: SitemapSource,
    fetched: &FetchOutcome,
    response_ms: u64,
) -> SitemapVerdict {
    let FetchOutcome::Success {
        body, truncated, ..
    } = fetched
    else {
        let mut page = judge_page(rules, sitemap, fetched, response_ms);
        for item in &mut page.discovered {
            item.kind = EntryKind::Sitemap(source);
        }
        return SitemapVerdict { page, report: None };
    };
    let parsed = parse_sitemap(body, limits);
    let mut report = SitemapReport {
        kind: parsed.kind,
        gzip: parsed.gzip,
        bytes: parsed.bytes,
        admitted: 0,
        dropped: [0; 4],
        over_limit: match parsed.cut {
            Some(Cut::TooManyUrls { over, .. }) => over,
            _ => 0,
        },
        cut: parsed.cut,
        body_truncated: *truncated,
    };
    let mut drop = |why: Dropped, n: u64| {
        if let Some(i) = Dropped::ALL.iter().position(|d| *d == why) {
            report.dropped[i] += n;
        }
    };
    drop(Dropped::InvalidUrl, parsed.invalid);
    let mut discovered = Vec::new();
    let nested = parsed.kind == Some(SitemapType::Index) && source == SitemapSource::IndexChild;
    if nested {
        drop(Dropped::NestedIndex, parsed.entries.len() as u64);
    } else {
        let hops = discovery::extend(sitemap.hops, Hop::Sitemap);
        for entry in parsed.entries {
            let listed = match Url::parse(&entry.loc) {
                Ok(u) => u,
                Err(_) => {
                    drop(Dropped::InvalidUrl, 1);
                    continue;
                }
            };
            if let Err(why) = listed_in_scope(&rules.scope, sitemap.parsed, source, &listed) {
                drop(why, 1);
                continue;
            }
            let (kind, hints) = match parsed.kind {
                // a child sitemap's lastmod can make it read again at once; its own
                // interval is `[sitemaps] refetch_interval` (set by the daemon)
                Some(SitemapType::Index) => (
                    EntryKind::Sitemap(SitemapSource::IndexChild),
                    Some(SitemapHints {
                        lastmod_ms: entry.hints.lastmod_ms,
                        ..SitemapHints::default()
                    }),
                ),
                _ => (EntryKind::Page, Some(entry.hints)),
            };
            discovered.push(EnqueueItem {
                url: listed.into(),
                // a sitemap entry is not a link: the link depth stays the sitemap's
                depth: sitemap.depth,
                via: Some(sitemap.url.to_string()),
                hops: hops.clone(),
                kind,
                // changefreq as the URL's own revisit interval (docs/sitemaps.md); the
                // `[recrawl]` configuration decides without one
                revisit_interval_ms: hints.as_ref().and_then(super::revisit_interval_ms),
                refetch_at_ms: None,
                hints,
            });
        }
    }
    report.admitted = discovered.len() as u64;
    let page = PageVerdict {
        outcome: PageOutcome::Done { response_ms },
        log: Some((Outcome::Fetched, report.summary())),
        discovered,
        redirect_stopped: None,
    };
    SitemapVerdict {
        page,
        report: Some(report),
    }
}
