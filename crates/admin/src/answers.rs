//! Every answer of the admin API as a type (serde): the server writes them, and a client
//! (`frontierd submit`, `stats`, `hosts`) can read them back the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Any refusal: `{"error": "..."}` with a status that says what kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    /// What is wrong, naming the input and the reason.
    pub error: String,
}

/// `POST /v1/urls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitAnswer {
    /// URLs new to the frontier, queued durably before this answer.
    pub accepted: u64,
    /// URLs it already held.
    pub duplicate: u64,
    /// How many lines were refused.
    pub rejected: usize,
    /// Each refused line.
    pub rejections: Vec<RejectedLine>,
}

/// One refused line of a submitted list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedLine {
    /// Its line (or JSON element) number, from 1.
    pub line: usize,
    /// The line as sent (shortened when long).
    pub url: String,
    /// Why.
    pub reason: String,
}

/// `POST /v1/hosts/{host}/pause|resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseAnswer {
    /// The politeness key acted on.
    pub host: String,
    /// The same key (named like the host detail's field).
    pub key: String,
    /// What the request named.
    pub requested: String,
    /// Whether the host is paused now.
    pub paused: bool,
    /// Whether the request changed anything.
    pub changed: bool,
    /// Whether it was paused ahead of its first URL.
    pub created: bool,
}

/// `GET /v1/hosts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostsAnswer {
    /// The hosts, in key order.
    pub hosts: Vec<HostView>,
}

/// One host (a politeness key), as listed; the detail adds `key`, `requested`, `origins`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostView {
    /// The politeness key.
    pub host: String,
    /// Where its fetches last connected: hosts on one address share its budget.
    pub ip: Option<String>,
    /// URLs queued.
    pub queued: u64,
    /// Fetches under way.
    pub in_flight: u64,
    /// Paused by an operator.
    pub paused: bool,
    /// Earliest next request, RFC 3339.
    pub next_allowed: String,
    /// Time until then, ms (0 when allowed now).
    pub next_allowed_in_ms: u64,
    /// Consecutive host-level failures.
    pub backoff_level: u64,
    /// End of the back-off, RFC 3339, while one runs.
    pub backoff_until: Option<String>,
    /// Crawl-delay in force, ms.
    pub crawl_delay_ms: u64,
    /// How long its last answer took, ms.
    pub last_response_ms: u64,
    /// Left out of the crawl (its crawl-delay is over the cap).
    pub skipped: bool,
    /// What happened to its URLs so far.
    pub counters: HostCounters,
    /// Its origins' robots.txt states, summed up.
    #[serde(flatten)]
    pub robots: RobotsSummary,
    /// Detail only: the key (same as `host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Detail only: what the request named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<String>,
    /// Detail only: each origin of the host with its robots.txt state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origins: Option<Vec<OriginView>>,
}

/// A host's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCounters {
    pub enqueued: u64,
    pub dispatched: u64,
    pub completed: u64,
    pub dropped: u64,
    pub given_up: u64,
    pub retried: u64,
    pub robots_fetches: u64,
    pub crawl_delay_clamped: u64,
}

/// The robots summary of one host's origins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsSummary {
    /// "2 of 3 origins held".
    pub robots: String,
    /// How many origins hold their URLs.
    pub robots_held: usize,
    /// Origins per state.
    pub robots_states: BTreeMap<String, u64>,
    /// The one state they share, "mixed", or "unknown" when no origin has a record yet.
    pub robots_state: String,
}

/// One origin of a host with its robots.txt state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginView {
    /// `scheme://host[:port]`.
    pub origin: String,
    /// Its robots state's name.
    pub robots_state: String,
    /// Whether that state holds its URLs.
    pub held: bool,
    /// In this state since, RFC 3339.
    pub since: Option<String>,
    /// When the copy in force goes stale.
    pub expires: Option<String>,
    /// When the 30-day fallback applies.
    pub fallback_at: Option<String>,
    /// Next robots.txt fetch.
    pub next_fetch: String,
    /// Fetch attempts in this state.
    pub attempt: u32,
    /// The last fetch and its outcome.
    pub last_fetch: Option<LastFetch>,
    /// Size of the copy in force.
    pub body_bytes: Option<usize>,
    /// Sitemaps named by the copy in force (or the last good one).
    pub sitemaps: Vec<String>,
}

/// A robots.txt fetch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFetch {
    /// When, RFC 3339.
    pub at: String,
    /// Its outcome.
    pub outcome: String,
}

/// `GET /v1/ip-groups`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpGroupsAnswer {
    /// `politeness.max_in_flight_per_ip`.
    pub max_in_flight_per_ip: u64,
    /// `politeness.ip_delay`, ms.
    pub ip_delay_ms: u64,
    /// The groups of the hosts held in memory.
    pub ip_groups: Vec<IpGroup>,
}

/// Hosts sharing one address, and the address's budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpGroup {
    pub ip: String,
    pub hosts: Vec<String>,
    pub host_count: usize,
    pub in_flight: u64,
    pub waiting: u64,
    /// RFC 3339.
    pub next_allowed: String,
    pub next_allowed_in_ms: u64,
}

/// `GET /v1/recent`: the last crawl-log records, newest first (the status page's table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentAnswer {
    /// At most [`RECENT_FETCHES`] records.
    pub fetches: Vec<RecentFetch>,
}

/// How many crawl-log records `GET /v1/recent` keeps.
pub const RECENT_FETCHES: usize = 50;

/// One crawl-log record, shortened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentFetch {
    /// When it was logged, RFC 3339.
    pub at: String,
    /// The URL as fetched (or refused).
    pub url: String,
    /// The crawl-log outcome (`fetched`, `retry`, `robots-disallowed`, ...).
    pub outcome: String,
    /// The HTTP status, when there was an answer.
    pub status: Option<u16>,
    /// Body bytes.
    pub bytes: u64,
    /// How long the fetch took, ms.
    pub duration_ms: u64,
    /// Why, for what was not fetched or is tried again.
    pub reason: String,
}
