//! Frontier configuration and its defaults (the reasons are in `docs/frontier.md`).

use std::num::NonZeroU32;
use std::path::PathBuf;

use crate::canon::PolitenessKeyMode;
use crate::store::SledConfig;

/// What to do with a robots crawl-delay above [`FrontierConfig::max_crawl_delay_ms`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrawlDelayOverCap {
    /// Use the cap instead (default).
    #[default]
    Clamp,
    /// Skip the host: its URLs are dropped with reason `crawl-delay-too-long`.
    Skip,
}

/// Frontier settings.
#[derive(Debug, Clone)]
pub struct FrontierConfig {
    /// Store directory.
    pub path: PathBuf,
    /// sled settings (cache size is explicit).
    pub sled: SledConfig,
    /// Longest URL accepted, in bytes (default 8 KiB).
    pub max_url_len: usize,
    /// Host or registrable domain as the politeness key.
    pub key_mode: PolitenessKeyMode,
    /// Our User-Agent (its product token picks the robots.txt group).
    pub user_agent: String,
    /// Smallest gap between two requests to a host (default 1 s).
    pub min_delay_ms: u64,
    /// Largest gap, unless crawl-delay or Retry-After ask for more (default 30 s).
    pub max_delay_ms: u64,
    /// Gap >= factor x last response time (default 5).
    pub delay_factor: f64,
    /// Cap on robots crawl-delay (default 60 s).
    pub max_crawl_delay_ms: u64,
    /// Clamp (default) or skip when crawl-delay is above the cap.
    pub crawl_delay_over_cap: CrawlDelayOverCap,
    /// Requests in flight per host (default 1).
    pub max_in_flight_per_host: u64,
    /// Global request rate (per second); `None` = unlimited.
    pub global_rate_per_sec: Option<NonZeroU32>,
    /// Burst allowed by the global quota (default = one second's worth).
    pub global_burst: Option<NonZeroU32>,
    /// Cap on Retry-After (default 24 h).
    pub retry_after_cap_ms: u64,
    /// First back-off step after a 429/503 without Retry-After (default 60 s).
    pub backoff_base_ms: u64,
    /// Largest back-off step (default 1 h).
    pub backoff_max_ms: u64,
    /// Attempts per URL before it is given up (default 5).
    pub max_attempts: u32,
    /// While an origin's robots state holds, look again this often (default 60 s).
    pub robots_hold_recheck_ms: u64,
    /// Decoded robots states cached in memory (default 10 000 origins).
    pub robots_cache_origins: usize,
    /// Host-record journal bytes below which no checkpoint is made (default 16 MiB; a
    /// checkpoint also waits until the journal holds 2 KiB per host record it would write;
    /// 0 checkpoints after every batch, for tests).
    pub journal_checkpoint_bytes: u64,
    /// Host records a checkpoint writes per call, at most (default 4 096): a checkpoint of
    /// a million hosts is spread over the following calls instead of one batch holding
    /// every record (hundreds of MB at once, and seconds under the lock). Once they are
    /// written it deletes the journal records it covered, a 64th as many per call.
    pub journal_checkpoint_slice: usize,
    /// Intake-log bytes after which it is folded into per-host queue segments (default
    /// 64 MiB). The URLs queued since the last fold are also held in memory, so this
    /// bounds that memory; larger means fewer, fuller segment writes.
    pub intake_buffer_bytes: u64,
    /// Bytes a fold writes in one call at most, about (default 8 MiB): a fold goes on a
    /// slice at a time in the enqueues and completions that follow the one that started
    /// it, the lock given back between slices.
    pub fold_slice_bytes: usize,
    /// robots.txt fetches handed out and not yet completed, at most, address lookups before
    /// a first robots.txt (`resolve_before_robots`) included; `None`: no cap. While the cap
    /// is reached, hosts that need robots.txt wait in order and hosts whose rules are known
    /// keep getting pages (no robots.txt wall with many new hosts).
    pub max_robots_in_flight: Option<u64>,
    /// robots.txt fetches in flight at most when a dispatch call has handed out everything
    /// else that may go and is still short of what was asked (workers that would idle):
    /// hosts waiting in line for a robots.txt slot get those, up to this many in flight.
    /// Pages of hosts with known rules still go first, and while they fill the call the cap
    /// is `max_robots_in_flight`. `None` (the default): that cap always. Less than
    /// `max_robots_in_flight` counts as that cap.
    pub max_robots_in_flight_spare: Option<u64>,
    /// Requests in flight to one IP address at most, over every host that resolves to it
    /// (robots.txt included; default 4). At least 1.
    pub max_in_flight_per_ip: u64,
    /// Smallest gap between two request starts at one IP address, whichever of its hosts
    /// they are for (default 250 ms; 0 = no gap).
    pub ip_delay_ms: u64,
    /// Ask for a host's address before its first robots.txt fetch, so that this fetch
    /// waits for its IP group like any other: the host is listed by
    /// [`crate::Frontier::take_resolves`] and waits until the caller reports the answer
    /// with [`crate::Frontier::resolved`] (the frontier does no I/O). Off: a new host's
    /// first fetch is paced by its own rules only (default; external fetchers).
    pub resolve_before_robots: bool,
    /// Seed for jitter (tests); `None` = random.
    pub seed: Option<u64>,
    /// Revisits of fetched URLs (default: none, one pass; see `docs/recrawl.md`).
    pub recrawl: crate::sched::recrawl::RecrawlConfig,
}

impl FrontierConfig {
    /// Defaults for a store at `path`.
    pub fn new(path: impl Into<PathBuf>) -> FrontierConfig {
        FrontierConfig {
            path: path.into(),
            sled: SledConfig::default(),
            max_url_len: 8 * 1024,
            key_mode: PolitenessKeyMode::Host,
            user_agent: "frontierd/0.1".to_string(),
            min_delay_ms: 1_000,
            max_delay_ms: 30_000,
            delay_factor: 5.0,
            max_crawl_delay_ms: 60_000,
            crawl_delay_over_cap: CrawlDelayOverCap::Clamp,
            max_in_flight_per_host: 1,
            global_rate_per_sec: None,
            global_burst: None,
            retry_after_cap_ms: 24 * 3600 * 1000,
            backoff_base_ms: 60_000,
            backoff_max_ms: 3_600_000,
            max_attempts: 5,
            robots_hold_recheck_ms: 60_000,
            robots_cache_origins: 10_000,
            journal_checkpoint_bytes: 16 * 1024 * 1024,
            journal_checkpoint_slice: 4096,
            intake_buffer_bytes: 64 * 1024 * 1024,
            fold_slice_bytes: 8 * 1024 * 1024,
            max_robots_in_flight: None,
            max_robots_in_flight_spare: None,
            max_in_flight_per_ip: 4,
            ip_delay_ms: 250,
            resolve_before_robots: false,
            seed: None,
            recrawl: Default::default(),
        }
    }

    /// No politeness gaps at all (benchmarks and tests only).
    pub fn without_gaps(mut self) -> FrontierConfig {
        self.min_delay_ms = 0;
        self.max_delay_ms = 0;
        self.delay_factor = 0.0;
        self.ip_delay_ms = 0;
        self
    }
}
