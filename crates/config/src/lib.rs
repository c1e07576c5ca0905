//! `frontierd run` configuration: a TOML file whose every key has a default (the embedded
//! `configs/frontierd.toml` documents them). Unknown keys, bad durations and values out of
//! range are errors that name the key, the value and what is allowed.
//!
//! Owns: the file's shape, its defaults, its checks (`Config::check` -> [`Settings`]), the
//! warnings about what is allowed but probably not meant (`warnings.rs`), who may reach a
//! listener (`exposure.rs`), the log filter's directives (`log_filter.rs`), and the
//! translation into each library crate's own config.
//! Must never: start anything, open a socket or the store, read the clock, or log (the
//! binary reports what the checks return).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub mod log_filter;
mod network;
pub mod sitemaps;
mod values;
use values::{choose, range_dur, range_u64, regexes};

/// The documented defaults, embedded so `frontierd run` works without a file.
pub const DEFAULT_TOML: &str = include_str!("../../../configs/frontierd.toml");

mod check;
pub use daemon::Unauthenticated;
mod duration;
use duration::fmt_dur;
pub use duration::Dur;

/// The whole file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub store: StoreSection,
    pub fetch: FetchSection,
    pub politeness: PolitenessSection,
    pub robots: RobotsSection,
    pub scope: ScopeSection,
    pub intake: IntakeSection,
    pub warc: WarcSection,
    pub crawl_log: CrawlLogSection,
    pub admin: AdminSection,
    pub log: LogSection,
    pub recrawl: recrawl::RecrawlSection,
    pub grpc: grpc::GrpcSection,
    pub sitemaps: sitemaps::SitemapsSection,
    pub dns: network::DnsSection,
    pub cluster: cluster::ClusterSection,
    pub addresses: addresses::AddressesSection,
    pub disk: disk::DiskSection,
    /// Host name (exact, or `*.suffix`) -> addresses, answered without DNS.
    pub resolve: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// Data directory; empty = `$STATE_DIRECTORY` or `./frontierd-data`.
    pub data_dir: String,
    /// sled directory; empty = `<data_dir>/store`.
    pub path: String,
    /// sled page cache, bytes.
    pub cache_bytes: u64,
    /// Intake-log bytes (URLs queued since the last fold, also held in memory) before
    /// they are folded into per-host queue segments.
    pub intake_buffer_bytes: u64,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            data_dir: String::new(),
            path: String::new(),
            cache_bytes: 32 * 1024 * 1024,
            intake_buffer_bytes: 64 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchSection {
    pub user_agent: String,
    pub workers: u32,
    pub connect_timeout: Dur,
    pub total_timeout: Dur,
    pub robots_body_cap: u64,
    pub page_body_cap: u64,
    pub max_decoded_bytes: u64,
    /// Tokens of [`fetcher::AcceptedCoding`], checked by [`Config::check`].
    pub accept_encoding: Vec<String>,
    pub robots_max_redirects: u32,
    pub shutdown_grace: Dur,
    /// Unset: [`Settings::max_pooled_connections`] scales it with `workers`.
    pub max_pooled_connections: Option<u32>,
    pub pool_idle_timeout: Dur,
    pub http2: bool,
    /// Unset: [`Settings::tls_sessions`] scales it with `workers`, as the pool.
    pub tls_sessions: Option<u32>,
    /// PEM files whose certificates are trusted besides the built-in web roots.
    pub extra_root_certificates: Vec<PathBuf>,
}

impl Default for FetchSection {
    fn default() -> Self {
        FetchSection {
            user_agent: fetcher::DEFAULT_USER_AGENT.to_string(),
            workers: 16,
            connect_timeout: Dur(Duration::from_secs(10)),
            total_timeout: Dur(Duration::from_secs(30)),
            robots_body_cap: fetcher::DEFAULT_ROBOTS_BODY_CAP as u64,
            page_body_cap: fetcher::DEFAULT_PAGE_BODY_CAP as u64,
            max_decoded_bytes: fetcher::DEFAULT_MAX_DECODED_BYTES as u64,
            accept_encoding: fetcher::DEFAULT_ACCEPT_ENCODING
                .iter()
                .map(|c| c.token().to_string())
                .collect(),
            robots_max_redirects: fetcher::DEFAULT_ROBOTS_MAX_REDIRECTS,
            shutdown_grace: Dur(Duration::from_secs(30)),
            max_pooled_connections: None,
            pool_idle_timeout: Dur(Duration::from_secs(90)),
            http2: false,
            tls_sessions: None,
            extra_root_certificates: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolitenessSection {
    pub key: String,
    pub min_delay: Dur,
    pub max_delay: Dur,
    pub delay_factor: f64,
    pub max_crawl_delay: Dur,
    pub crawl_delay_over_cap: String,
    pub max_in_flight_per_host: u64,
    pub global_rate_per_sec: u32,
    pub max_attempts: u32,
    pub backoff_base: Dur,
    pub backoff_max: Dur,
    pub retry_after_cap: Dur,
    pub max_in_flight_per_ip: u64,
    pub ip_delay: Dur,
}

impl Default for PolitenessSection {
    /// The frontier's own defaults, so they are written once (the embedded TOML repeats
    /// them for the reader; a test holds the two equal).
    fn default() -> Self {
        let f = frontier::FrontierConfig::new("");
        let ms = |v: u64| Dur(Duration::from_millis(v));
        PolitenessSection {
            key: "host".into(),
            min_delay: ms(f.min_delay_ms),
            max_delay: ms(f.max_delay_ms),
            delay_factor: f.delay_factor,
            max_crawl_delay: ms(f.max_crawl_delay_ms),
            crawl_delay_over_cap: "clamp".into(),
            max_in_flight_per_host: f.max_in_flight_per_host,
            global_rate_per_sec: f.global_rate_per_sec.map_or(0, |r| r.get()),
            max_attempts: f.max_attempts,
            backoff_base: ms(f.backoff_base_ms),
            backoff_max: ms(f.backoff_max_ms),
            retry_after_cap: ms(f.retry_after_cap_ms),
            max_in_flight_per_ip: network::default_ip_keys().0,
            ip_delay: network::default_ip_keys().1,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RobotsSection {
    pub freshness: Dur,
    pub max_age_min: Dur,
    pub max_age_max: Dur,
    pub retry_initial: Dur,
    pub retry_max: Dur,
    pub fallback_after: Dur,
    pub fallback_retry_interval: Dur,
    pub hold_recheck: Dur,
    pub cache_origins: u64,
}

impl Default for RobotsSection {
    fn default() -> Self {
        RobotsSection {
            freshness: Dur(Duration::from_secs(24 * 3600)),
            max_age_min: Dur(Duration::from_secs(3600)),
            max_age_max: Dur(Duration::from_secs(24 * 3600)),
            retry_initial: Dur(Duration::from_secs(60)),
            retry_max: Dur(Duration::from_secs(3600)),
            fallback_after: Dur(Duration::from_secs(30 * 24 * 3600)),
            fallback_retry_interval: Dur(Duration::from_secs(24 * 3600)),
            hold_recheck: Dur(Duration::from_secs(60)),
            cache_origins: 10_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScopeSection {
    pub follow_links: bool,
    pub max_depth: u32,
    pub max_redirect_hops: u32,
    pub mode: String,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub keep_nofollow_links: bool,
    pub max_links_per_page: u64,
}

impl Default for ScopeSection {
    fn default() -> Self {
        ScopeSection {
            follow_links: false,
            max_depth: 3,
            max_redirect_hops: 10,
            mode: "same-host".into(),
            include: Vec::new(),
            exclude: Vec::new(),
            keep_nofollow_links: false,
            max_links_per_page: crawl::links::DEFAULT_MAX_LINKS as u64,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntakeSection {
    pub poll_interval: Dur,
    pub batch_size: u32,
}

impl Default for IntakeSection {
    fn default() -> Self {
        IntakeSection {
            poll_interval: Dur(Duration::from_secs(1)),
            batch_size: 1000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WarcSection {
    pub dir: String,
    pub prefix: String,
    pub max_file_size: u64,
    pub operator: String,
    pub gzip_level: u32,
    pub deflate_compressed_payloads: bool,
}

impl Default for WarcSection {
    fn default() -> Self {
        WarcSection {
            dir: String::new(),
            prefix: "frontierd".into(),
            max_file_size: 1 << 30,
            operator: String::new(),
            gzip_level: warc::DEFAULT_GZIP_LEVEL,
            deflate_compressed_payloads: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CrawlLogSection {
    pub path: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSection {
    pub listen: String,
    pub token_file: String,
    pub allow_unauthenticated: bool,
    pub header_read_timeout: Dur,
    pub request_timeout: Dur,
    pub max_connections: u32,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection {
            listen: "127.0.0.1:8470".into(),
            token_file: String::new(),
            allow_unauthenticated: false,
            header_read_timeout: Dur(Duration::from_secs(10)),
            request_timeout: Dur(Duration::from_secs(120)),
            max_connections: 64,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    pub format: String,
    pub level: String,
    pub stats_interval: Dur,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            format: "text".into(),
            level: "info".into(),
            stats_interval: Dur(Duration::from_secs(10)),
        }
    }
}

/// A configuration error (exit status 2): every one names the file or the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key whose value is not allowed; `allowed` says what is.
    #[error("{key} = {value}: {allowed}")]
    Invalid {
        key: String,
        value: String,
        allowed: String,
    },
    /// The text is not TOML of the expected shape (unknown key, wrong type, bad duration).
    #[error("{origin}: {source}")]
    Parse {
        origin: String,
        source: toml::de::Error,
    },
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A non-loopback admin listener without a token or explicit consent.
    #[error("{0}")]
    UnauthenticatedListener(String),
    #[error("{0}")]
    Cluster(#[from] ::cluster::ConfigError),
}

fn bad(key: &str, value: impl fmt::Display, allowed: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        allowed: allowed.to_string(),
    }
}

/// `[fetch] extra_root_certificates`: the certificates of each PEM file, DER.
fn extra_root_certificates(files: &[PathBuf]) -> Result<Vec<Vec<u8>>, ConfigError> {
    let mut certificates = Vec::new();
    for file in files {
        let refused = |reason: String| {
            bad(
                "fetch.extra_root_certificates",
                file.display(),
                &format!("a readable PEM file of certificates ({reason})"),
            )
        };
        let pem = std::fs::read(file).map_err(|e| refused(e.to_string()))?;
        let found = fetcher::certificates_from_pem(&pem).map_err(|e| refused(e.to_string()))?;
        certificates.extend(found);
    }
    Ok(certificates)
}

/// `[fetch] accept_encoding`: each token a coding the fetcher decodes, none twice.
fn accepted_codings(tokens: &[String]) -> Result<Vec<fetcher::AcceptedCoding>, ConfigError> {
    let mut codings = Vec::with_capacity(tokens.len());
    for token in tokens {
        let coding = fetcher::AcceptedCoding::from_token(token.trim()).ok_or_else(|| {
            bad(
                "fetch.accept_encoding",
                format!("{token:?}"),
                "gzip, deflate or br (an empty list asks for identity)",
            )
        })?;
        if codings.contains(&coding) {
            return Err(bad(
                "fetch.accept_encoding",
                format!("{token:?}"),
                "each coding once",
            ));
        }
        codings.push(coding);
    }
    Ok(codings)
}

pub use crawl::ScopeMode;

/// The checked configuration, with every path resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub raw: Config,
    pub data_dir: PathBuf,
    pub store_path: PathBuf,
    pub spool_dir: PathBuf,
    pub warc_dir: PathBuf,
    pub crawl_log: PathBuf,
    pub admin_listen: SocketAddr,
    pub token_file: Option<PathBuf>,
    pub scope_mode: ScopeMode,
    /// `politeness.key`, checked.
    pub key_mode: frontier::PolitenessKeyMode,
    /// `politeness.crawl_delay_over_cap`, checked.
    pub crawl_delay_over_cap: frontier::CrawlDelayOverCap,
    pub product_token: String,
    pub include: Vec<regex::Regex>,
    pub exclude: Vec<regex::Regex>,
    pub json_logs: bool,
    pub grpc: Option<grpc::GrpcListen>,
    pub sitemaps: sitemaps::SitemapSettings,
    pub cluster: Option<cluster::ClusterNodeSettings>,
    /// `fetch.accept_encoding`, checked.
    accept_encoding: Vec<fetcher::AcceptedCoding>,
    /// The certificates of the `fetch.extra_root_certificates` files, read once at check.
    extra_root_certificates: Vec<Vec<u8>>,
}

impl Config {
    /// Parse TOML text (`origin` names the file in messages).
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse {
            origin: origin.to_string(),
            source,
        })
    }

    /// Load a file, or the embedded defaults when `path` is None.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        match path {
            None => Config::parse(DEFAULT_TOML, "embedded default configuration"),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.to_path_buf(),
                    source,
                })?;
                Config::parse(&text, &p.display().to_string())
            }
        }
    }

    /// Check every value and resolve paths. `state_directory` is `$STATE_DIRECTORY`.
    pub fn check(self, state_directory: Option<&str>) -> Result<Settings, ConfigError> {
        let c = &self;
        let product_token = c.check_fetch()?;
        let accept_encoding = accepted_codings(&c.fetch.accept_encoding)?;
        let extra_root_certificates = extra_root_certificates(&c.fetch.extra_root_certificates)?;
        let (key_mode, crawl_delay_over_cap) = c.check_politeness()?;
        c.check_robots()?;
        let (scope_mode, include, exclude) = c.check_scope()?;
        let (admin_listen, json_logs) = c.check_outputs()?;
        c.check_resolve()?;
        // paths
        let data_dir = if !c.store.data_dir.is_empty() {
            PathBuf::from(&c.store.data_dir)
        } else if let Some(sd) = state_directory.filter(|s| !s.is_empty()) {
            // systemd may pass several, colon-separated: the first is ours
            PathBuf::from(sd.split(':').next().unwrap_or(sd))
        } else {
            PathBuf::from("./frontierd-data")
        };
        let or = |s: &str, d: &str| {
            if s.is_empty() {
                data_dir.join(d)
            } else {
                PathBuf::from(s)
            }
        };
        let store_path = or(&c.store.path, "store");
        let warc_dir = or(&c.warc.dir, "warc");
        let crawl_log = or(&c.crawl_log.path, "crawl.log.jsonl");
        let spool_dir = data_dir.join("spool");
        let token_file =
            (!c.admin.token_file.is_empty()).then(|| PathBuf::from(&c.admin.token_file));
        c.check_admin_and_store(admin_listen, token_file.as_deref())?;
        Ok(Settings {
            data_dir,
            store_path,
            spool_dir,
            warc_dir,
            crawl_log,
            admin_listen,
            token_file,
            scope_mode,
            key_mode,
            crawl_delay_over_cap,
            product_token,
            include,
            exclude,
            json_logs,
            grpc: grpc::check(c)?,
            sitemaps: self.sitemaps.check()?,
            cluster: c.cluster.check(key_mode, takeover_hold(c))?,
            accept_encoding,
            extra_root_certificates,
            raw: self,
        })
    }
}

/// How long a node that took over a shard whose lease ran out waits before its first request
/// to one of its hosts: the old holder may have sent a request just before its fence, which
/// may last the fetch timeout, and the host is owed its longest gap after that.
fn takeover_hold(c: &Config) -> Duration {
    let p = &c.politeness;
    c.fetch.total_timeout.0 + p.min_delay.0.max(p.max_crawl_delay.0)
}

/// Shortest `robots.freshness` the open web should get: a robots.txt is re-fetched at most
/// hourly (the spec's floor for a cached copy is up to the crawler; an hour matches
/// `robots.max_age_min`).
const FRESHNESS_WARN_BELOW: Duration = Duration::from_secs(3600);
/// Shortest `robots.fallback_after` the open web should get: the spec's rule is 30 days of
/// unbroken server errors before a site's robots.txt is treated as absent.
const FALLBACK_WARN_BELOW: Duration = Duration::from_secs(30 * 24 * 3600);

/// Values that are allowed (they make rehearsals on a test site quick) but below what a
/// crawl of the open web should use.
pub fn robots_timing_warnings(c: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if c.robots.freshness.0 < FRESHNESS_WARN_BELOW {
        out.push(format!(
            "robots.freshness = \"{}\" is below \"{}\": robots.txt is fetched that often from every site (fine for a test site, not for the open web)",
            c.robots.freshness,
            fmt_dur(FRESHNESS_WARN_BELOW)
        ));
    }
    if c.robots.fallback_after.0 < FALLBACK_WARN_BELOW {
        out.push(format!(
            "robots.fallback_after = \"{}\" is below the spec's \"{}\": a site whose robots.txt fails that long is crawled as if it had none",
            c.robots.fallback_after,
            fmt_dur(FALLBACK_WARN_BELOW)
        ));
    }
    out
}

impl Settings {
    /// What a fetched page leads to: `[scope]`.
    pub fn follow_rules(&self) -> crawl::FollowRules {
        let scope = &self.raw.scope;
        let mut links = crawl::LinkConfig::new(self.product_token.clone());
        links.keep_nofollow_links = scope.keep_nofollow_links;
        links.max_links = usize::try_from(scope.max_links_per_page).unwrap_or(usize::MAX);
        crawl::FollowRules {
            follow_links: scope.follow_links,
            max_depth: scope.max_depth,
            max_redirect_hops: scope.max_redirect_hops,
            scope: crawl::Scope {
                mode: self.scope_mode,
                include: self.include.clone(),
                exclude: self.exclude.clone(),
            },
            links,
        }
    }

    /// Frontier settings.
    pub fn frontier_config(&self) -> frontier::FrontierConfig {
        let p = &self.raw.politeness;
        let mut f = frontier::FrontierConfig::new(&self.store_path);
        f.sled.cache_bytes = self.raw.store.cache_bytes;
        f.intake_buffer_bytes = self.raw.store.intake_buffer_bytes;
        f.key_mode = self.key_mode;
        f.user_agent = self.product_token.clone();
        f.min_delay_ms = p.min_delay.ms();
        f.max_delay_ms = p.max_delay.ms();
        f.delay_factor = p.delay_factor;
        f.max_crawl_delay_ms = p.max_crawl_delay.ms();
        f.crawl_delay_over_cap = self.crawl_delay_over_cap;
        f.max_in_flight_per_host = p.max_in_flight_per_host;
        f.global_rate_per_sec = std::num::NonZeroU32::new(p.global_rate_per_sec);
        f.retry_after_cap_ms = p.retry_after_cap.ms();
        f.backoff_base_ms = p.backoff_base.ms();
        f.backoff_max_ms = p.backoff_max.ms();
        f.max_attempts = p.max_attempts;
        f.robots_hold_recheck_ms = self.raw.robots.hold_recheck.ms();
        f.robots_cache_origins = usize::try_from(self.raw.robots.cache_origins).unwrap_or(10_000);
        f.recrawl = self.raw.recrawl.frontier();
        network::apply_ip_keys(p, &mut f);
        self.raw.sitemaps.apply(&mut f);
        f
    }

    /// robots state machine timing.
    pub fn robots_state_config(&self) -> robots_policy::state::StateConfig {
        let r = &self.raw.robots;
        robots_policy::state::StateConfig {
            freshness_default: r.freshness.0,
            freshness_min: r.max_age_min.0,
            freshness_max: r.max_age_max.0,
            retry_initial: r.retry_initial.0,
            retry_max: r.retry_max.0,
            fallback_after: r.fallback_after.0,
            fallback_retry_interval: r.fallback_retry_interval.0,
            ..Default::default()
        }
    }

    /// Fetcher settings.
    pub fn fetcher_config(&self) -> Result<fetcher::FetcherConfig, ConfigError> {
        let f = &self.raw.fetch;
        let mut resolve = fetcher::ResolveTable::new();
        for (name, ips) in &self.raw.resolve {
            let addrs: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
            resolve.insert(name, addrs).map_err(|e| {
                bad(
                    &format!("resolve.\"{name}\""),
                    format!("{ips:?}"),
                    &e.to_string(),
                )
            })?;
        }
        Ok(fetcher::FetcherConfig {
            user_agent: f.user_agent.clone(),
            connect_timeout: f.connect_timeout.0,
            total_timeout: f.total_timeout.0,
            robots_body_cap: usize::try_from(f.robots_body_cap).map_err(|_| {
                bad(
                    "fetch.robots_body_cap",
                    f.robots_body_cap,
                    "at most the machine's address space",
                )
            })?,
            page_body_cap: usize::try_from(f.page_body_cap).map_err(|_| {
                bad(
                    "fetch.page_body_cap",
                    f.page_body_cap,
                    "at most the machine's address space",
                )
            })?,
            max_decoded_bytes: usize::try_from(f.max_decoded_bytes).map_err(|_| {
                bad(
                    "fetch.max_decoded_bytes",
                    f.max_decoded_bytes,
                    "at most the machine's address space",
                )
            })?,
            accept_encoding: self.accept_encoding.clone(),
            robots_max_redirects: f.robots_max_redirects,
            max_pooled_connections: self.max_pooled_connections() as usize,
            http2: f.http2,
            tls_sessions: self.tls_sessions() as usize,
            extra_root_certificates: self.extra_root_certificates.clone(),
            pool_idle_timeout: f.pool_idle_timeout.0,
            resolve,
            dns: self.raw.dns.fetcher_config(),
            addresses: self.raw.addresses.policy(),
        })
    }
}

pub mod addresses;
pub mod cluster;
mod daemon;
pub mod disk;
pub mod exposure;
pub mod grpc;
mod recrawl;
#[cfg(test)]
mod tests;
mod warnings;
