//! How a page fetch ended, as the scheduler needs it: which failures slow the whole host
//! and which only the URL (the rule and its examples: `docs/politeness.md`).
//!
//! A server-wide signal (429, 503, any `Retry-After`, a refused or reset connection, a name
//! that does not resolve, a TLS failure, timeouts on several different URLs in a row) backs
//! the host off and puts the URL back at the front of its queue. A per-URL failure (another
//! 5xx, a malformed answer, one page that stalls until the timeout) retries that URL later,
//! behind the queue, with its own back-off; the host goes on at its normal gap.

use std::time::Duration;

use crate::config::FrontierConfig;

/// How a page fetch ended (the caller maps its fetch outcome with [`PageOutcome::from_status`]
/// and [`PageOutcome::from_network`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageOutcome {
    /// A final answer (any status the crawler does not retry).
    Done {
        /// Response time in ms.
        response_ms: u64,
    },
    /// 429, 503, or any status with `Retry-After`: the host backs off, the URL is retried
    /// behind the host's queued URLs.
    Throttled {
        /// Status code.
        status: u16,
        /// `Retry-After`, if given.
        retry_after: Option<Duration>,
        /// Response time in ms.
        response_ms: u64,
    },
    /// The host could not be reached (connection refused or reset, name resolution, TLS):
    /// the host backs off, the URL is retried behind the host's queued URLs.
    Unreachable {
        /// What went wrong.
        reason: String,
    },
    /// The fetch ran out of time. One URL that stalls is its own problem (retried behind
    /// the queue); timeouts on different URLs in a row slow the host.
    TimedOut {
        /// What went wrong.
        reason: String,
    },
    /// A failure of this URL only (another 5xx, a malformed answer): retried later, behind
    /// the queue, with its own back-off; the host is not slowed.
    Failed {
        /// What went wrong.
        reason: String,
    },
}

/// Whom a failure is blamed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureScope {
    /// The host: it backs off; the URL is retried behind the host's queued URLs, so the
    /// first request after the back-off is one that has not just failed.
    Host,
    /// The URL: it is retried behind the queue with its own back-off.
    Url,
}

/// Why no usable response arrived (the fetcher's network error kinds, as the scheduler
/// sees them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkFailure {
    /// The name did not resolve.
    Dns,
    /// Connection refused or unreachable.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// The connect or total timeout ran out.
    Timeout,
    /// The connection was reset or closed early.
    Reset,
    /// The answer could not be parsed or decoded (head, framing, coding).
    Malformed,
    /// Anything else.
    Other,
}

/// Distinct URLs of one host that time out in a row (no answer from the host in between)
/// before the timeouts count as a server-wide signal: one stalling page is that page's
/// problem, a second one on another URL says the server is in trouble.
pub const HOST_TIMEOUT_URLS: usize = 2;

impl PageOutcome {
    /// Classify an HTTP answer: 429, 503 and any status carrying `Retry-After` throttle the
    /// host; another 5xx fails the URL; everything else (2xx, 3xx, 4xx) is final.
    pub fn from_status(status: u16, retry_after: Option<Duration>, response_ms: u64) -> Self {
        match status {
            429 | 503 => PageOutcome::Throttled {
                status,
                retry_after,
                response_ms,
            },
            500..=599 if retry_after.is_some() => PageOutcome::Throttled {
                status,
                retry_after,
                response_ms,
            },
            500..=599 => PageOutcome::Failed {
                reason: format!("status {status}"),
            },
            _ => PageOutcome::Done { response_ms },
        }
    }

    /// Classify a fetch that got no usable answer.
    pub fn from_network(kind: NetworkFailure, detail: &str) -> Self {
        let reason = format!("{}: {detail}", kind.as_str());
        match kind {
            NetworkFailure::Dns
            | NetworkFailure::Connect
            | NetworkFailure::Tls
            | NetworkFailure::Reset => PageOutcome::Unreachable { reason },
            NetworkFailure::Timeout => PageOutcome::TimedOut { reason },
            NetworkFailure::Malformed | NetworkFailure::Other => PageOutcome::Failed { reason },
        }
    }

    /// Whom the failure is blamed on (None for [`PageOutcome::Done`]). `distinct_timeouts`
    /// is how many different URLs of the host, this one included, timed out since the
    /// host last answered.
    pub fn scope(&self, distinct_timeouts: usize) -> Option<FailureScope> {
        match self {
            PageOutcome::Done { .. } => None,
            PageOutcome::Throttled { .. } | PageOutcome::Unreachable { .. } => {
                Some(FailureScope::Host)
            }
            PageOutcome::TimedOut { .. } if distinct_timeouts >= HOST_TIMEOUT_URLS => {
                Some(FailureScope::Host)
            }
            PageOutcome::TimedOut { .. } | PageOutcome::Failed { .. } => Some(FailureScope::Url),
        }
    }

    /// Whether the host answered (any HTTP status): its run of timeouts is over.
    pub fn host_answered(&self) -> bool {
        match self {
            PageOutcome::Done { .. } | PageOutcome::Throttled { .. } => true,
            PageOutcome::Failed { reason } => reason.starts_with("status "),
            PageOutcome::Unreachable { .. } | PageOutcome::TimedOut { .. } => false,
        }
    }

    /// What went wrong, for logs and give-up records.
    pub fn reason(&self) -> String {
        match self {
            PageOutcome::Done { .. } => "done".into(),
            PageOutcome::Throttled { status, .. } => format!("status {status}"),
            PageOutcome::Unreachable { reason }
            | PageOutcome::TimedOut { reason }
            | PageOutcome::Failed { reason } => reason.clone(),
        }
    }
}

impl NetworkFailure {
    /// Short name, for reasons.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkFailure::Dns => "dns",
            NetworkFailure::Connect => "connect",
            NetworkFailure::Tls => "tls",
            NetworkFailure::Timeout => "timeout",
            NetworkFailure::Reset => "reset",
            NetworkFailure::Malformed => "malformed",
            NetworkFailure::Other => "other",
        }
    }
}

/// The most a back-off step's jitter adds, as a share of the step.
const MAX_JITTER: f64 = 0.25;

/// Back-off step number `level` (1 = first): `base x 2^(level-1)`, capped at `max`, plus
/// `jitter` (0 to [`MAX_JITTER`]) of it.
pub fn backoff_step_ms(base_ms: u64, max_ms: u64, level: u64, jitter: f64) -> u64 {
    let shift = level.saturating_sub(1).min(32) as u32;
    let step = base_ms.saturating_mul(1u64 << shift).min(max_ms);
    step + (step as f64 * jitter.clamp(0.0, MAX_JITTER)) as u64
}

/// The longest a host can back off ([`host_backoff_ms`] at any level and jitter).
pub(crate) fn longest_host_backoff_ms(cfg: &FrontierConfig) -> u64 {
    let step = backoff_step_ms(
        cfg.backoff_base_ms,
        cfg.backoff_max_ms,
        u64::MAX,
        MAX_JITTER,
    );
    cfg.retry_after_cap_ms.max(step)
}

/// How long a host backs off after a server-wide failure, at back-off `level`: the
/// server's `Retry-After` (capped), or else the exponential step with `jitter`.
pub(crate) fn host_backoff_ms(
    outcome: &PageOutcome,
    cfg: &FrontierConfig,
    level: u64,
    jitter: f64,
) -> u64 {
    match outcome {
        PageOutcome::Throttled {
            retry_after: Some(d),
            ..
        } => (d.as_millis() as u64).min(cfg.retry_after_cap_ms),
        _ => backoff_step_ms(cfg.backoff_base_ms, cfg.backoff_max_ms, level, jitter),
    }
}

/// How long a failed URL with attempts left waits, behind the URLs queued before it
/// failed. A server-wide failure: no wait of its own (the host backs off; when it may go
/// again, its first request is a URL that has not just failed: a probe that can succeed).
/// A per-URL failure: the URL's own back-off, by its attempts.
pub(crate) fn retry_wait_ms(
    scope: FailureScope,
    cfg: &FrontierConfig,
    attempts: u32,
    jitter: f64,
) -> u64 {
    match scope {
        FailureScope::Host => 0,
        FailureScope::Url => backoff_step_ms(
            cfg.backoff_base_ms,
            cfg.backoff_max_ms,
            u64::from(attempts),
            jitter,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(o: &PageOutcome) -> Option<FailureScope> {
        o.scope(1)
    }

    #[test]
    fn server_wide_signals_slow_the_host() {
        for o in [
            PageOutcome::from_status(429, None, 5),
            PageOutcome::from_status(503, None, 5),
            PageOutcome::from_status(500, Some(Duration::from_secs(30)), 5),
            PageOutcome::from_network(NetworkFailure::Connect, "refused"),
            PageOutcome::from_network(NetworkFailure::Reset, "reset by peer"),
            PageOutcome::from_network(NetworkFailure::Dns, "no such name"),
            PageOutcome::from_network(NetworkFailure::Tls, "bad certificate"),
        ] {
            assert_eq!(scope(&o), Some(FailureScope::Host), "{o:?}");
        }
        assert_eq!(
            PageOutcome::from_status(503, Some(Duration::from_secs(7)), 5),
            PageOutcome::Throttled {
                status: 503,
                retry_after: Some(Duration::from_secs(7)),
                response_ms: 5
            }
        );
    }

    #[test]
    fn a_broken_url_fails_alone() {
        for o in [
            PageOutcome::from_status(500, None, 5),
            PageOutcome::from_status(502, None, 5),
            PageOutcome::from_network(NetworkFailure::Malformed, "bad chunk"),
            PageOutcome::from_network(NetworkFailure::Timeout, "30 s"),
            PageOutcome::from_network(NetworkFailure::Other, "?"),
        ] {
            assert_eq!(scope(&o), Some(FailureScope::Url), "{o:?}");
        }
        assert_eq!(
            PageOutcome::from_status(500, None, 5).reason(),
            "status 500"
        );
    }

    #[test]
    fn final_answers_are_not_failures() {
        for s in [200, 204, 301, 304, 404, 410, 451] {
            assert_eq!(
                PageOutcome::from_status(s, None, 9),
                PageOutcome::Done { response_ms: 9 }
            );
        }
    }

    #[test]
    fn timeouts_on_different_urls_become_a_host_signal() {
        let t = PageOutcome::from_network(NetworkFailure::Timeout, "total timeout");
        assert_eq!(t.scope(1), Some(FailureScope::Url));
        assert_eq!(t.scope(HOST_TIMEOUT_URLS), Some(FailureScope::Host));
        assert!(!t.host_answered());
        assert!(PageOutcome::from_status(500, None, 1).host_answered());
        assert!(!PageOutcome::from_network(NetworkFailure::Malformed, "x").host_answered());
    }

    #[test]
    fn backoff_steps_double_and_cap() {
        assert_eq!(backoff_step_ms(60_000, 3_600_000, 1, 0.0), 60_000);
        assert_eq!(backoff_step_ms(60_000, 3_600_000, 3, 0.0), 240_000);
        assert_eq!(backoff_step_ms(60_000, 3_600_000, 40, 0.0), 3_600_000);
        assert_eq!(backoff_step_ms(1_000, 10_000, 1, 0.25), 1_250);
        assert_eq!(backoff_step_ms(1_000, 10_000, 0, 0.0), 1_000);
    }
}
