//! The state machine's inputs and outputs: time and jitter, the configuration, a robots.txt
//! fetch's result, the states and what they say (directives, hold reasons, transitions,
//! the status shown to operators). Plain data; the machine is `OriginRobots` (state.rs).

use std::fmt;
use std::time::Duration;

/// An instant: milliseconds since the Unix epoch (UTC). Arithmetic saturates, never panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UnixMillis(pub u64);

impl UnixMillis {
    /// The instant `d` after `self` (saturating at `u64::MAX` ms).
    pub fn saturating_add(self, d: Duration) -> UnixMillis {
        UnixMillis(self.0.saturating_add(duration_to_millis(d)))
    }

    /// How long after `earlier` this instant is (zero if it is not after it).
    pub fn saturating_duration_since(self, earlier: UnixMillis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

pub(super) fn duration_to_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A uniformly random `u64` supplied by the caller, used to spread retries (0 = no jitter).
///
/// The jitter only ever *lengthens* a retry delay: with `retry_jitter_percent = 20`, a delay
/// `d` becomes a value in `[d, d * 1.2)`, `Jitter(0)` giving exactly `d` and `Jitter(u64::MAX)`
/// the top of the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Jitter(pub u64);

impl Jitter {
    /// No jitter: delays are exactly the nominal ones.
    pub const NONE: Jitter = Jitter(0);
}

/// Timing of the machine. [`StateConfig::default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// Lifetime of a fetched robots.txt when the response has no `Cache-Control: max-age`,
    /// and for allow-all results (4xx, redirect overflow). Default 24 h.
    pub freshness_default: Duration,
    /// Shortest lifetime a `max-age` can give. Default 1 h.
    pub freshness_min: Duration,
    /// Longest lifetime a `max-age` can give. Default 24 h.
    pub freshness_max: Duration,
    /// First retry delay in 5xx-disallow; also the lower bound for `Retry-After`. Default 1 min.
    pub retry_initial: Duration,
    /// Cap of the doubling retry delay; also the upper bound for `Retry-After`. Default 1 h.
    pub retry_max: Duration,
    /// How much jitter may lengthen a retry delay, in percent of it. Default 20.
    pub retry_jitter_percent: u32,
    /// How long an unbroken run of server-class failures lasts before fallback. Default 30 days.
    pub fallback_after: Duration,
    /// Retry cadence in fallback. Default 24 h (the freshness lifetime).
    pub fallback_retry_interval: Duration,
}

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            freshness_default: DAY,
            freshness_min: HOUR,
            freshness_max: DAY,
            retry_initial: Duration::from_secs(60),
            retry_max: HOUR,
            retry_jitter_percent: 20,
            fallback_after: 30 * DAY,
            fallback_retry_interval: DAY,
        }
    }
}

impl StateConfig {
    /// Lifetime of a 2xx robots.txt: `max_age` (or the default) clamped to
    /// `[freshness_min, freshness_max]`. Never panics, even if min > max (max wins).
    pub fn freshness_for(&self, max_age: Option<Duration>) -> Duration {
        max_age
            .unwrap_or(self.freshness_default)
            .max(self.freshness_min)
            .min(self.freshness_max)
    }

    /// Nominal retry delay after the `attempt`-th consecutive failure (1-based), before jitter:
    /// `retry_initial * 2^(attempt-1)` capped at `retry_max`; or, when the server sent a
    /// `Retry-After`, that value clamped to `[retry_initial, retry_max]`.
    pub fn nominal_retry_delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(ra) => ra.max(self.retry_initial).min(self.retry_max),
            None => {
                let shift = attempt.saturating_sub(1).min(63);
                let initial = duration_to_millis(self.retry_initial);
                let doubled = initial.saturating_mul(1u64 << shift);
                Duration::from_millis(doubled).min(self.retry_max)
            }
        }
    }

    /// The retry delay actually used: [`Self::nominal_retry_delay`] lengthened by the jitter,
    /// a value in `[nominal, nominal * (1 + retry_jitter_percent / 100))`.
    pub fn retry_delay(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        jitter: Jitter,
    ) -> Duration {
        let nominal = duration_to_millis(self.nominal_retry_delay(attempt, retry_after));
        // nominal * (jitter / 2^64) * percent / 100, in u128 so it cannot overflow.
        let fraction = (u128::from(nominal) * u128::from(jitter.0)) >> 64;
        let extra = fraction * u128::from(self.retry_jitter_percent) / 100;
        let extra = u64::try_from(extra).unwrap_or(u64::MAX);
        Duration::from_millis(nominal.saturating_add(extra))
    }
}

/// Why a network-class failure happened. All of them count as a server error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetworkErrorKind {
    /// Name resolution failed.
    Dns,
    /// TCP connect failed or was refused.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// Connect or total timeout.
    Timeout,
    /// Connection reset or interrupted mid-response.
    Reset,
    /// The response could not be parsed as HTTP.
    InvalidResponse,
    /// Broken chunked transfer encoding.
    BrokenChunking,
    /// Any other transport failure (also what an unknown stored kind decodes to).
    Other,
}

impl NetworkErrorKind {
    /// Every kind (every kind, for tests and label lists).
    pub const ALL: [NetworkErrorKind; 8] = [
        NetworkErrorKind::Dns,
        NetworkErrorKind::Connect,
        NetworkErrorKind::Tls,
        NetworkErrorKind::Timeout,
        NetworkErrorKind::Reset,
        NetworkErrorKind::InvalidResponse,
        NetworkErrorKind::BrokenChunking,
        NetworkErrorKind::Other,
    ];

    /// Stable name for logs and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkErrorKind::Dns => "dns",
            NetworkErrorKind::Connect => "connect",
            NetworkErrorKind::Tls => "tls",
            NetworkErrorKind::Timeout => "timeout",
            NetworkErrorKind::Reset => "reset",
            NetworkErrorKind::InvalidResponse => "invalid-response",
            NetworkErrorKind::BrokenChunking => "broken-chunking",
            NetworkErrorKind::Other => "other",
        }
    }
}

/// The outcome of one robots.txt fetch (after redirects), as the caller maps it from its HTTP
/// client. Plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotsFetchResult {
    /// A 2xx response: the body (already capped and decoded by the fetcher) is the rules.
    Success {
        status: u16,
        body: Vec<u8>,
        /// `Cache-Control: max-age`, if the response had one.
        max_age: Option<Duration>,
    },
    /// A 4xx other than 429: there is no robots.txt, everything is allowed.
    /// (A 429 passed here is treated as [`RobotsFetchResult::TooManyRequests`].)
    ClientError { status: u16 },
    /// Redirects went past the hop limit: treated like a 404 (allow-all).
    RedirectLimitExceeded,
    /// 429 Too Many Requests: the site is disallowed for now.
    TooManyRequests { retry_after: Option<Duration> },
    /// A 5xx: the site is disallowed for now.
    ServerError {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// A network-class failure: treated as a server error.
    Network { kind: NetworkErrorKind },
    /// Nothing was sent: the crawler's own address policy refuses the address robots.txt
    /// (or a redirect hop of it) is on. Every URL of the origin on that address will be
    /// refused the same way, so its rules cannot matter; it allows all for
    /// [`ADDRESS_REFUSED_FRESHNESS`] only (so the pages reach their own refusal and are
    /// logged), after which robots.txt is asked again: a name that now points elsewhere
    /// gets its real rules read before any page.
    AddressRefused,
}

/// How long an [`RobotsFetchResult::AddressRefused`] answer allows all (at most
/// `freshness_default`).
pub const ADDRESS_REFUSED_FRESHNESS: Duration = Duration::from_secs(10 * 60);

/// Why a fresh copy allows everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllowAllCause {
    /// robots.txt answered this 4xx (not 429): the site has no robots.txt.
    ClientError { status: u16 },
    /// Redirects went past the hop limit (treated as a 404).
    RedirectLimitExceeded,
    /// Not fetched: the address policy refuses its address (see
    /// [`RobotsFetchResult::AddressRefused`]).
    AddressRefused,
}

impl fmt::Display for AllowAllCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowAllCause::ClientError { status } => write!(f, "robots.txt answered {status}"),
            AllowAllCause::RedirectLimitExceeded => {
                f.write_str("robots.txt redirects exceeded the hop limit")
            }
            AllowAllCause::AddressRefused => {
                f.write_str("robots.txt not fetched: its address is refused by the address policy")
            }
        }
    }
}

/// What a good robots.txt fetch said: a body to obey, or "no robots.txt" (allow-all).
///
/// "Allow-all because 404" is a good copy like any body: the site said it has no robots.txt,
/// so in fallback it keeps allowing everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyContent {
    /// The robots.txt body of a 2xx response, to be compiled and matched by the caller.
    Body(Vec<u8>),
    /// No robots.txt (4xx or redirect overflow): no restrictions.
    AllowAll(AllowAllCause),
}

/// A good robots.txt result and when it was fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsCopy {
    pub content: CopyContent,
    pub fetched_at: UnixMillis,
}

impl RobotsCopy {
    pub(super) fn gate(&self, source: RulesSource) -> Directive<'_> {
        match &self.content {
            CopyContent::Body(body) => Directive::ObeyRules { body, source },
            CopyContent::AllowAll(cause) => Directive::AllowAll {
                source,
                cause: Some(*cause),
            },
        }
    }
}

/// The state of one origin's robots.txt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RobotsState {
    /// Never fetched: hold every URL, fetch robots.txt now.
    #[default]
    Unknown,
    /// A good copy, valid until `expires_at` (exclusive).
    Fresh {
        copy: RobotsCopy,
        expires_at: UnixMillis,
    },
    /// The copy expired at `expires_at`: hold every URL until the refresh resolves.
    Stale {
        copy: RobotsCopy,
        expires_at: UnixMillis,
    },
    /// An unbroken run of server-class failures started at `since`: hold every URL.
    ServerErrorDisallow {
        /// The first failure of the unbroken run.
        since: UnixMillis,
        /// The copy in effect when the run started, if there was one.
        last_good: Option<RobotsCopy>,
        /// Consecutive failures in the run (>= 1).
        attempt: u32,
        /// When to fetch robots.txt again.
        next_retry_at: UnixMillis,
    },
    /// The run of failures has lasted `fallback_after`: obey the last good copy, or allow all.
    Fallback {
        since: UnixMillis,
        last_good: Option<RobotsCopy>,
        attempt: u32,
        next_retry_at: UnixMillis,
    },
}

/// The fieldless kind of a [`RobotsState`], for logs, metrics and the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RobotsStateKind {
    Unknown,
    Fresh,
    Stale,
    ServerErrorDisallow,
    Fallback,
}

impl RobotsStateKind {
    /// Stable name: "unknown", "fresh", "stale", "5xx-disallow", "fallback".
    pub fn as_str(self) -> &'static str {
        match self {
            RobotsStateKind::Unknown => "unknown",
            RobotsStateKind::Fresh => "fresh",
            RobotsStateKind::Stale => "stale",
            RobotsStateKind::ServerErrorDisallow => "5xx-disallow",
            RobotsStateKind::Fallback => "fallback",
        }
    }

    /// All kinds, in the order above.
    pub const ALL: [RobotsStateKind; 5] = [
        RobotsStateKind::Unknown,
        RobotsStateKind::Fresh,
        RobotsStateKind::Stale,
        RobotsStateKind::ServerErrorDisallow,
        RobotsStateKind::Fallback,
    ];
}

impl fmt::Display for RobotsStateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RobotsState {
    /// The stored kind (time-driven transitions not yet applied; see [`OriginRobots::kind_at`]).
    pub fn kind(&self) -> RobotsStateKind {
        match self {
            RobotsState::Unknown => RobotsStateKind::Unknown,
            RobotsState::Fresh { .. } => RobotsStateKind::Fresh,
            RobotsState::Stale { .. } => RobotsStateKind::Stale,
            RobotsState::ServerErrorDisallow { .. } => RobotsStateKind::ServerErrorDisallow,
            RobotsState::Fallback { .. } => RobotsStateKind::Fallback,
        }
    }
}

/// Where the rules of a non-holding verdict come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RulesSource {
    /// A fresh copy.
    Fresh,
    /// The fallback after 30 days of server-class failures.
    Fallback,
}

/// Why the origin's URLs are held (kept queued in order, neither fetched nor dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldReason {
    /// robots.txt was never fetched.
    NeverFetched,
    /// The copy expired and its refresh has not resolved yet.
    RefreshPending,
    /// robots.txt answers a server-class failure since `since`: the site is disallowed for now.
    ServerErrorDisallow { since: UnixMillis },
}

impl fmt::Display for HoldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoldReason::NeverFetched => f.write_str("robots.txt not fetched yet"),
            HoldReason::RefreshPending => f.write_str("robots.txt expired, refresh pending"),
            HoldReason::ServerErrorDisallow { since } => {
                write!(
                    f,
                    "robots.txt failing since {since}: site disallowed for now"
                )
            }
        }
    }
}

/// What the caller may do with the origin's URLs at a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive<'a> {
    /// Keep every URL queued in order; fetch nothing, drop nothing.
    Hold(HoldReason),
    /// Everything is allowed. `cause` is the copy's reason, or `None` in a fallback without
    /// any last good copy.
    AllowAll {
        source: RulesSource,
        cause: Option<AllowAllCause>,
    },
    /// Compile `body` as robots.txt and obey it; a URL it disallows is dropped.
    ObeyRules { body: &'a [u8], source: RulesSource },
}

impl Directive<'_> {
    /// True for [`Directive::Hold`].
    pub fn is_hold(&self) -> bool {
        matches!(self, Directive::Hold(_))
    }
}

impl fmt::Display for Directive<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let src = |s: &RulesSource| match s {
            RulesSource::Fresh => "fresh robots.txt",
            RulesSource::Fallback => "fallback (last good robots.txt)",
        };
        match self {
            Directive::Hold(reason) => write!(f, "hold: {reason}"),
            Directive::AllowAll {
                source,
                cause: Some(cause),
            } => write!(f, "allow all by {}: {cause}", src(source)),
            Directive::AllowAll { cause: None, .. } => {
                f.write_str("allow all: fallback without any last good robots.txt")
            }
            Directive::ObeyRules { body, source } => {
                write!(f, "obey {} ({} bytes)", src(source), body.len())
            }
        }
    }
}

/// A summary of a fetch outcome, kept for the admin API ("last status").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchSummary {
    /// An HTTP status (2xx, 4xx, 429, 5xx).
    Status(u16),
    /// Redirects went past the hop limit.
    RedirectLimitExceeded,
    /// A network-class failure.
    Network(NetworkErrorKind),
    /// Not sent: the address policy refused the address.
    AddressRefused,
}

impl fmt::Display for FetchSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchSummary::Status(s) => write!(f, "{s}"),
            FetchSummary::RedirectLimitExceeded => f.write_str("redirect limit exceeded"),
            FetchSummary::AddressRefused => f.write_str("address refused"),
            FetchSummary::Network(k) => write!(f, "network error ({})", k.as_str()),
        }
    }
}

impl RobotsFetchResult {
    /// The summary stored as "last status".
    pub fn summary(&self) -> FetchSummary {
        match self {
            RobotsFetchResult::Success { status, .. }
            | RobotsFetchResult::ClientError { status }
            | RobotsFetchResult::ServerError { status, .. } => FetchSummary::Status(*status),
            RobotsFetchResult::RedirectLimitExceeded => FetchSummary::RedirectLimitExceeded,
            RobotsFetchResult::TooManyRequests { .. } => FetchSummary::Status(429),
            RobotsFetchResult::Network { kind } => FetchSummary::Network(*kind),
            RobotsFetchResult::AddressRefused => FetchSummary::AddressRefused,
        }
    }
}

/// The last robots.txt fetch: when it resolved and what it said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastFetch {
    pub at: UnixMillis,
    pub outcome: FetchSummary,
}

/// One state change, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The kind in effect at `at` before the change (time-driven transitions included).
    pub from: RobotsStateKind,
    pub to: RobotsStateKind,
    pub at: UnixMillis,
    /// Human-readable reason.
    pub reason: String,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}: {}", self.from, self.to, self.reason)
    }
}

/// What an operator's admin API shows about one origin, computed for an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsStatus {
    /// The kind in effect at the instant.
    pub kind: RobotsStateKind,
    /// Start of the unbroken run of failures (5xx-disallow, fallback).
    pub since: Option<UnixMillis>,
    /// When fallback starts or started (5xx-disallow, fallback).
    pub fallback_at: Option<UnixMillis>,
    /// When the current copy expires or expired (fresh, stale).
    pub expires_at: Option<UnixMillis>,
    /// When robots.txt is to be fetched next (at or before the instant: due now).
    pub next_fetch_at: UnixMillis,
    /// Consecutive failures (0 outside 5xx-disallow and fallback).
    pub attempt: u32,
    /// The last fetch, if any.
    pub last_fetch: Option<LastFetch>,
    /// When the copy in use (current or last good) was fetched.
    pub copy_fetched_at: Option<UnixMillis>,
    /// Size of the body in use, if the copy is a body.
    pub copy_body_len: Option<usize>,
}
