//! What the crawl writes: crawl log lines (and reopening the file), WARC exchanges.

use std::path::Path;

use crawl::Outcome;

use super::{chain, label, InternalEvent};
use crate::metrics::Metrics;

/// A crawl log line was written.
pub struct CrawlLogLineWritten<'a> {
    pub url: &'a str,
    pub outcome: Outcome,
}

impl InternalEvent for CrawlLogLineWritten<'_> {
    fn emit(self, m: &Metrics) {
        let outcome = self.outcome.as_str();
        tracing::trace!(url = %self.url, outcome, "crawl log line");
        m.crawl_outcomes
            .get_or_create(&label("outcome", outcome))
            .inc();
    }
}

/// A crawl log line could not be written (disk full, ...).
pub struct CrawlLogWriteFailed<'a> {
    pub url: &'a str,
    pub error: &'a std::io::Error,
}

impl InternalEvent for CrawlLogWriteFailed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::error!(url = %self.url, error = %self.error, "crawl log write failed");
        m.crawl_log_write_failures.inc();
    }
}

/// SIGHUP: the crawl log continues in a new file at the configured path.
pub struct CrawlLogReopened<'a> {
    pub path: &'a Path,
}

impl InternalEvent for CrawlLogReopened<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(path = %self.path.display(), "SIGHUP: crawl log reopened");
        m.crawl_log_reopens.inc();
    }
}

/// An exchange was archived.
pub struct ExchangeArchived<'a> {
    pub url: &'a str,
    /// Compressed bytes written (a new file's warcinfo record included).
    pub bytes: u64,
}

impl InternalEvent for ExchangeArchived<'_> {
    fn emit(self, m: &Metrics) {
        tracing::trace!(url = %self.url, bytes = self.bytes, "exchange archived");
        m.warc_bytes.inc_by(self.bytes);
    }
}

/// An exchange could not be archived; the crawl goes on without it.
pub struct WarcWriteFailed<'a> {
    pub url: &'a str,
    pub error: &'a warc::WarcError,
}

impl InternalEvent for WarcWriteFailed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::error!(error = chain(self.error), url = %self.url, "WARC write failed");
        m.warc_write_failures.inc();
    }
}
