//! Fetching: a page leased, a page or robots.txt fetched or refused, a page to be retried,
//! a redirect chain cut.

use std::time::Duration;

use crawl::FetchClass;
use frontier::{PageOutcome, VisitOutcome};

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// The `class` label of `page_fetches`: 429 counts with 4xx, a redirect past the limit with
/// 3xx.
fn page_class(class: FetchClass) -> &'static str {
    match class {
        FetchClass::Success => "2xx",
        FetchClass::Redirect | FetchClass::RedirectLimit => "3xx",
        FetchClass::ClientError | FetchClass::TooManyRequests => "4xx",
        FetchClass::ServerError => "5xx",
        FetchClass::Network => "network",
        FetchClass::Refused => "refused",
    }
}

/// The `outcome` label of `robots_fetches`.
fn robots_class(class: FetchClass) -> &'static str {
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

/// A page was handed to a worker; `politeness_wait` is what politeness (gap, back-off,
/// robots hold) cost it once its host had a free slot.
pub struct PageLeased<'a> {
    pub url: &'a str,
    pub politeness_wait: Duration,
}

impl InternalEvent for PageLeased<'_> {
    fn emit(self, m: &Metrics) {
        tracing::trace!(
            url = %self.url,
            politeness_wait_ms = self.politeness_wait.as_millis() as u64,
            "page leased"
        );
        m.politeness_wait
            .observe(self.politeness_wait.as_secs_f64());
    }
}

/// A page fetch got an answer (or a network failure).
pub struct PageFetched<'a> {
    pub url: &'a str,
    pub class: FetchClass,
    /// Body bytes received.
    pub bytes: u64,
    pub elapsed: Duration,
}

impl InternalEvent for PageFetched<'_> {
    fn emit(self, m: &Metrics) {
        let class = page_class(self.class);
        tracing::debug!(
            url = %self.url,
            class,
            bytes = self.bytes,
            elapsed_ms = self.elapsed.as_millis() as u64,
            "page fetched"
        );
        m.page_fetches.get_or_create(&label("class", class)).inc();
        m.fetched_bytes.inc_by(self.bytes);
        m.fetch_latency.observe(self.elapsed.as_secs_f64());
    }
}

/// The fetcher refused a page URL before any network activity (bad scheme, no host).
pub struct PageFetchRefused<'a> {
    pub url: &'a str,
    pub error: &'a fetcher::FetchError,
}

impl InternalEvent for PageFetchRefused<'_> {
    fn emit(self, m: &Metrics) {
        tracing::debug!(url = %self.url, error = %self.error, "page fetch refused");
        m.page_fetches
            .get_or_create(&label("class", page_class(FetchClass::Refused)))
            .inc();
    }
}

/// A page fetch failed and goes back to the frontier to be retried.
pub struct PageRetried<'a> {
    pub url: &'a str,
    pub attempt: u32,
    pub status: Option<u16>,
    pub outcome: &'a PageOutcome,
}

impl InternalEvent for PageRetried<'_> {
    fn emit(self, m: &Metrics) {
        let kind = match self.outcome {
            // not a failure: nothing to count
            PageOutcome::Done { .. } => return,
            PageOutcome::Throttled { .. } => "throttled",
            PageOutcome::Unreachable { .. } => "unreachable",
            PageOutcome::TimedOut { .. } => "timed-out",
            PageOutcome::Failed { .. } => "failed",
        };
        tracing::debug!(
            url = %self.url, attempt = self.attempt, status = ?self.status, kind,
            "fetch to be retried"
        );
        m.page_failures.get_or_create(&label("kind", kind)).inc();
    }
}

/// A redirect not followed: the chain that led to the page already had
/// `scope.max_redirect_hops` redirects.
pub struct RedirectChainStopped<'a> {
    pub url: &'a str,
    pub stopped: &'a crawl::RedirectStopped,
}

impl InternalEvent for RedirectChainStopped<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            url = %self.url, location = %self.stopped.location, redirects = self.stopped.chain,
            limit = self.stopped.limit, "redirect chain stopped at scope.max_redirect_hops"
        );
        m.redirect_chains_stopped.inc();
    }
}

/// A robots.txt fetch ended (every redirect hop included).
pub struct RobotsFetched<'a> {
    pub origin: &'a str,
    pub class: FetchClass,
    /// Body bytes received over all hops.
    pub bytes: u64,
    pub elapsed: Duration,
}

impl InternalEvent for RobotsFetched<'_> {
    fn emit(self, m: &Metrics) {
        let outcome = robots_class(self.class);
        tracing::debug!(
            origin = %self.origin,
            outcome,
            elapsed_ms = self.elapsed.as_millis() as u64,
            "robots.txt done"
        );
        m.robots_fetches
            .get_or_create(&label("outcome", outcome))
            .inc();
        m.fetched_bytes.inc_by(self.bytes);
        m.fetch_latency.observe(self.elapsed.as_secs_f64());
    }
}

/// Why a robots.txt URL was not fetched.
pub enum RobotsRefusal<'a> {
    /// The URL the frontier handed out does not parse.
    DoesNotParse(&'a url::ParseError),
    /// The fetcher refused it before any network activity.
    Fetcher(&'a fetcher::FetchError),
}

/// A robots.txt URL was not fetched; its origin is held as after a network failure.
pub struct RobotsFetchRefused<'a> {
    pub url: &'a str,
    pub refusal: RobotsRefusal<'a>,
}

impl InternalEvent for RobotsFetchRefused<'_> {
    fn emit(self, m: &Metrics) {
        match self.refusal {
            RobotsRefusal::DoesNotParse(e) => {
                tracing::warn!(url = %self.url, error = %e, "robots URL does not parse")
            }
            RobotsRefusal::Fetcher(e) => {
                tracing::warn!(url = %self.url, error = %e, "robots.txt fetch refused")
            }
        }
        m.robots_fetches
            .get_or_create(&label("outcome", robots_class(FetchClass::Refused)))
            .inc();
    }
}

/// A batch of page outcomes was applied to the frontier (one `complete_batch`, one flush).
pub struct CompletionsApplied {
    pub size: usize,
}

impl InternalEvent for CompletionsApplied {
    fn emit(self, m: &Metrics) {
        tracing::trace!(size = self.size, "page outcomes applied");
        m.completion_batches.inc();
        m.completion_batch_size.observe(self.size as f64);
    }
}

/// A page answered: a first visit, or a revisit and what it found (`docs/recrawl.md`).
pub struct PageVisited<'a> {
    pub url: &'a str,
    pub outcome: VisitOutcome,
    /// Archived as a WARC `revisit` record (headers only).
    pub archived_as_revisit: bool,
}

impl InternalEvent for PageVisited<'_> {
    fn emit(self, m: &Metrics) {
        if self.outcome == VisitOutcome::First {
            return;
        }
        tracing::debug!(
            url = %self.url,
            outcome = self.outcome.as_str(),
            warc_revisit_record = self.archived_as_revisit,
            "page revisited"
        );
        m.revisits
            .get_or_create(&label("outcome", self.outcome.as_str()))
            .inc();
    }
}
