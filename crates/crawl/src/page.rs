//! What a page fetch means for the crawl: whether the frontier counts it done, retries it
//! or backs the host off ([`PageOutcome`]), which crawl log outcome it gets, and which URLs
//! it leads to (links within scope and depth, a redirect target within
//! `scope.max_redirect_hops`).

use fetcher::{FetchOutcome, HeaderMap, NetworkErrorKind};
use frontier::{EnqueueItem, NetworkFailure, PageOutcome};
use url::Url;

use crate::crawl_log::Outcome;
use crate::discovery::{self, Hop};
use crate::links::{extract_links, LinkConfig};
use crate::scope::Scope;

/// The `[scope]` rules a page's answer is judged by.
#[derive(Debug, Clone)]
pub struct FollowRules {
    /// `scope.follow_links`: links of HTML pages are queued at all.
    pub follow_links: bool,
    /// `scope.max_depth`: links are followed from pages above this depth only.
    pub max_depth: u32,
    /// `scope.max_redirect_hops`: redirects in a row followed before a chain is cut.
    pub max_redirect_hops: u32,
    /// Which links are followed.
    pub scope: Scope,
    /// How links are extracted.
    pub links: LinkConfig,
}

/// The page that was fetched, as the frontier leased it.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The URL as stored in the frontier (the `via` of what it leads to).
    pub url: &'a str,
    /// The same, parsed (links resolve against it).
    pub parsed: &'a Url,
    /// Link depth.
    pub depth: u32,
    /// Hop path from its seed.
    pub hops: &'a str,
}

/// A redirect not followed because the chain that led to the page is already
/// `scope.max_redirect_hops` long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectStopped {
    pub location: Url,
    /// Redirects in a row that led to the page.
    pub chain: u32,
    pub limit: u32,
}

/// What a page fetch means.
#[derive(Debug, Clone, PartialEq)]
pub struct PageVerdict {
    /// What the frontier is told.
    pub outcome: PageOutcome,
    /// The crawl log line's outcome and reason; None when the URL is retried (its line is
    /// written when it is final).
    pub log: Option<(Outcome, String)>,
    /// URLs it leads to, to be queued.
    pub discovered: Vec<EnqueueItem>,
    /// Set when a redirect was not followed for the chain limit.
    pub redirect_stopped: Option<RedirectStopped>,
}

impl PageVerdict {
    /// A page that could not be fetched at all (its URL does not parse, the fetcher refused
    /// it): retried like a network failure.
    pub fn not_fetched(reason: String) -> PageVerdict {
        PageVerdict::retried(PageOutcome::Failed { reason })
    }

    /// A page the address policy refused (nothing was sent): final, logged
    /// `blocked-address` with the refusal as its reason. Not a failure of the host: it is
    /// not retried and backs nothing off.
    pub fn address_refused(refused: &fetcher::AddressRefused) -> PageVerdict {
        PageVerdict::done(0, Outcome::BlockedAddress, refused.to_string())
    }

    fn done(response_ms: u64, outcome: Outcome, reason: String) -> PageVerdict {
        PageVerdict {
            outcome: PageOutcome::Done { response_ms },
            log: Some((outcome, reason)),
            discovered: Vec::new(),
            redirect_stopped: None,
        }
    }

    fn retried(outcome: PageOutcome) -> PageVerdict {
        PageVerdict {
            outcome,
            log: None,
            discovered: Vec::new(),
            redirect_stopped: None,
        }
    }

    /// Whether the frontier counts the page done (not retried).
    pub fn is_done(&self) -> bool {
        matches!(self.outcome, PageOutcome::Done { .. })
    }
}

/// Judges the answer to a page fetch. `response_ms` is the response time the frontier
/// keeps for the host.
pub fn judge_page(
    rules: &FollowRules,
    page: &Page<'_>,
    fetched: &FetchOutcome,
    response_ms: u64,
) -> PageVerdict {
    match fetched {
        FetchOutcome::Success { headers, body, .. } => {
            let mut verdict = PageVerdict::done(response_ms, Outcome::Fetched, String::new());
            if is_html(headers) && rules.follow_links && page.depth < rules.max_depth {
                let (links, cut) = links_to_follow(rules, page, headers, body);
                verdict.discovered = links;
                if cut > 0 {
                    verdict.log = Some((
                        Outcome::Fetched,
                        format!(
                            "links past the first {} not taken: {cut} (scope.max_links_per_page)",
                            rules.links.max_links
                        ),
                    ));
                }
            }
            verdict
        }
        FetchOutcome::Redirect { location, .. } => {
            redirect(rules, page, location.as_ref(), response_ms)
        }
        FetchOutcome::RedirectLimitExceeded { .. } | FetchOutcome::ClientError { .. } => {
            PageVerdict::done(response_ms, Outcome::Fetched, String::new())
        }
        // failures: the frontier's rule tells a server-wide signal (the host slows) from a
        // failure of this URL (retried behind the queue)
        FetchOutcome::TooManyRequests { retry_after } => {
            PageVerdict::retried(PageOutcome::from_status(429, *retry_after, response_ms))
        }
        FetchOutcome::ServerError {
            status,
            retry_after,
        } => PageVerdict::retried(PageOutcome::from_status(
            status.as_u16(),
            *retry_after,
            response_ms,
        )),
        FetchOutcome::Network { kind, detail } => {
            PageVerdict::retried(PageOutcome::from_network(network_failure(*kind), detail))
        }
    }
}

/// The fetcher's network error kinds in the frontier's terms (one to one; the frontier
/// decides what each means for the host).
pub fn network_failure(kind: NetworkErrorKind) -> NetworkFailure {
    use NetworkErrorKind as K;
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

/// Whether a response is HTML (`text/html` or XHTML), by its `Content-Type`.
pub fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("text/html") || v.contains("application/xhtml")
        })
        .unwrap_or(false)
}

/// The page's links that are followed: none when its robots directives say `nofollow`,
/// else those within scope, one level deeper; and how many were past the cap.
fn links_to_follow(
    rules: &FollowRules,
    page: &Page<'_>,
    headers: &HeaderMap,
    body: &[u8],
) -> (Vec<EnqueueItem>, u64) {
    let x_robots_tag: Vec<&str> = headers
        .get_all("x-robots-tag")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let found = extract_links(page.parsed, body, &x_robots_tag, &rules.links);
    if !found.robots.follow {
        return (Vec::new(), 0);
    }
    let hops = discovery::extend(page.hops, Hop::Link);
    let items = found
        .links
        .into_iter()
        .filter(|link| rules.scope.admits(page.parsed, link))
        .map(|link| EnqueueItem {
            url: link.into(),
            depth: page.depth.saturating_add(1),
            via: Some(page.url.to_string()),
            hops: hops.clone(),
            ..EnqueueItem::default()
        })
        .collect();
    (items, found.links_cut)
}

/// A page answered with a redirect: its target enters the frontier like a discovered URL,
/// at the same depth (see docs/crawl-log.md, "Redirects"), unless the chain that led here
/// already has `scope.max_redirect_hops` redirects.
fn redirect(
    rules: &FollowRules,
    page: &Page<'_>,
    location: Option<&Url>,
    response_ms: u64,
) -> PageVerdict {
    let Some(location) = location else {
        return PageVerdict::done(
            response_ms,
            Outcome::Redirected,
            "no usable Location".into(),
        );
    };
    let chain = discovery::trailing_redirects(page.hops);
    let limit = rules.max_redirect_hops;
    if chain >= limit {
        let reason = format!(
            "scope.max_redirect_hops = {limit} reached ({chain} redirects led here): location {location} not followed"
        );
        let mut verdict = PageVerdict::done(response_ms, Outcome::RedirectLimit, reason);
        verdict.redirect_stopped = Some(RedirectStopped {
            location: location.clone(),
            chain,
            limit,
        });
        return verdict;
    }
    let mut verdict = PageVerdict::done(
        response_ms,
        Outcome::Redirected,
        format!("location {location}"),
    );
    verdict.discovered.push(EnqueueItem {
        url: location.to_string(),
        depth: page.depth,
        via: Some(page.url.to_string()),
        hops: discovery::extend(page.hops, Hop::Redirect),
        ..EnqueueItem::default()
    });
    verdict
}

#[cfg(test)]
mod tests;
