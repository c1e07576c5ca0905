//! The daemon's outputs: the crawl log file ([`CrawlLog`]: its lines, the last records kept
//! for the status page, the reopen after logrotate) and the WARC appends ([`WarcOutput`]:
//! encoded outside the lock, appended under it or handed to its holder by an async caller,
//! where the response record went), each with
//! its failing [`Episode`], so that a run of failed writes is reported once and its end
//! once.
//!
//! It owns the writes and what they report through return values; it never logs or counts
//! (the binary's internal events do), decides what is archived or logged, or publishes to
//! other nodes.

pub mod crawl_log;
mod warc_output;

use std::sync::atomic::{AtomicBool, Ordering};

pub use crawl_log::{CrawlLog, Flushed, OpenError, Reopened, Written, FLUSH_AT_BYTES};
pub use warc_output::{AppendFailed, Appended, WarcOutput, WriterGuard};

/// Whether an output's last write failed: a run of failures is one episode, reported when
/// it starts and when a write succeeds again.
#[derive(Debug, Default)]
pub struct Episode(AtomicBool);

impl Episode {
    /// A write succeeded: whether it ends a failing episode.
    pub fn succeeded(&self) -> bool {
        // a load first: the swap (a write) only in the rare failing episode
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::SeqCst)
    }

    /// A write failed: whether it is the first of its episode.
    pub fn failed(&self) -> bool {
        !self.0.swap(true, Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_starts_once_and_ends_once() {
        let e = Episode::default();
        assert!(!e.succeeded(), "nothing failed yet");
        assert!(e.failed(), "the first failure");
        assert!(!e.failed(), "the same episode");
        assert!(e.succeeded(), "its end");
        assert!(!e.succeeded());
        assert!(e.failed(), "a new episode");
    }
}
