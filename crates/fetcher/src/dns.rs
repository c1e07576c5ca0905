//! DNS: answers cached for their TTL, failures for a short while, in a bounded map.
//!
//! getaddrinfo tells no TTL, so names go to hickory-resolver (asynchronous, reading
//! `/etc/resolv.conf` and `/etc/hosts` like the system does): each answer is kept for its
//! TTL clamped to `[min_ttl, max_ttl]`, a failure (NXDOMAIN, no address, timeout, server
//! failure) for `negative_ttl`, so a dead name costs one lookup per `negative_ttl`, not one
//! per URL. Thousands of lookups can be under way at once; none holds a thread. If the
//! system configuration cannot be read, getaddrinfo (on tokio's blocking pool) answers
//! instead, each answer kept for `min_ttl`. Names under `.invalid` never resolve (RFC 6761
//! section 6.4) and are answered at once. See `docs/politeness.md`, "DNS".

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use tower_service::Service;

/// DNS cache settings. `Default` is the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// Resolvers to ask (UDP, then TCP), in order. Default empty: the system's, from
    /// `/etc/resolv.conf`.
    pub servers: Vec<SocketAddr>,
    /// Names cached at most; past it, expired entries go first, then arbitrary ones.
    /// Default 100 000.
    pub cache_entries: usize,
    /// An answer is kept at least this long, whatever its TTL. Default 60 s.
    pub min_ttl: Duration,
    /// An answer is kept at most this long, whatever its TTL. Default 1 h.
    pub max_ttl: Duration,
    /// A failed lookup is answered from the cache (as the same failure) this long.
    /// Default 30 s.
    pub negative_ttl: Duration,
    /// One lookup's limit (all its queries and retries). Default 10 s.
    pub timeout: Duration,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            servers: Vec::new(),
            cache_entries: 100_000,
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
        }
    }
}

/// How one name lookup was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DnsResult {
    /// From the `[resolve]` table.
    Table,
    /// From the cache, an answer.
    Cached,
    /// From the cache, a failure (negative caching).
    CachedFailure,
    /// Asked the resolver; it answered with addresses.
    Resolved,
    /// Asked the resolver; the name does not exist or has no address.
    NxDomain,
    /// Asked the resolver; it failed (timeout, server failure, unreachable server).
    Failed,
}

impl DnsResult {
    /// Every result, in this order (metric labels).
    pub const ALL: [DnsResult; 6] = [
        DnsResult::Table,
        DnsResult::Cached,
        DnsResult::CachedFailure,
        DnsResult::Resolved,
        DnsResult::NxDomain,
        DnsResult::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DnsResult::Table => "table",
            DnsResult::Cached => "cached",
            DnsResult::CachedFailure => "cached-failure",
            DnsResult::Resolved => "resolved",
            DnsResult::NxDomain => "nxdomain",
            DnsResult::Failed => "failed",
        }
    }

    /// Whether the lookup gave addresses.
    pub fn is_ok(self) -> bool {
        matches!(
            self,
            DnsResult::Table | DnsResult::Cached | DnsResult::Resolved
        )
    }
}

impl fmt::Display for DnsResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// DNS counters since the fetcher was built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsStats {
    /// Lookups by how they were answered (indexed like [`DnsResult::ALL`]).
    pub lookups: [u64; 6],
    /// Names in the cache now (answers and failures).
    pub cache_entries: u64,
    /// Entries pushed out by the size cap.
    pub evicted: u64,
}

impl DnsStats {
    pub fn lookups_of(&self, r: DnsResult) -> u64 {
        let i = DnsResult::ALL.iter().position(|x| *x == r).unwrap_or(0);
        self.lookups[i]
    }
}

/// One cached outcome.
#[derive(Clone)]
struct Entry {
    answer: Result<Arc<[IpAddr]>, Arc<str>>,
    /// NXDOMAIN rather than another failure (kept to answer alike from the cache).
    nx: bool,
    expires: Instant,
}

/// Where names not in the table or the cache go.
enum Backend {
    Hickory(Box<TokioResolver>),
    System(GaiResolver),
}

#[derive(Default)]
struct Counters {
    lookups: [AtomicU64; 6],
    evicted: AtomicU64,
}

/// The cache and the resolver behind it. Cheap to clone (shared).
#[derive(Clone)]
pub(crate) struct DnsCache {
    cfg: DnsConfig,
    map: Arc<Mutex<HashMap<String, Entry>>>,
    /// Built on first use (it needs the runtime; building the fetcher does not).
    backend: Arc<OnceLock<Backend>>,
    counters: Arc<Counters>,
}

/// A lookup that gave no address: why, and whether the name does not exist.
#[derive(Debug, Clone)]
pub(crate) struct LookupFailure {
    pub(crate) detail: Arc<str>,
    pub(crate) result: DnsResult,
}

impl DnsCache {
    pub(crate) fn new(cfg: DnsConfig) -> DnsCache {
        DnsCache {
            cfg,
            map: Arc::new(Mutex::new(HashMap::new())),
            backend: Arc::new(OnceLock::new()),
            counters: Arc::new(Counters::default()),
        }
    }

    pub(crate) fn count(&self, r: DnsResult) {
        if let Some(i) = DnsResult::ALL.iter().position(|x| *x == r) {
            self.counters.lookups[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn stats(&self) -> DnsStats {
        let mut lookups = [0u64; 6];
        for (i, c) in self.counters.lookups.iter().enumerate() {
            lookups[i] = c.load(Ordering::Relaxed);
        }
        let cache_entries = self.map.lock().map(|m| m.len() as u64).unwrap_or(0);
        DnsStats {
            lookups,
            cache_entries,
            evicted: self.counters.evicted.load(Ordering::Relaxed),
        }
    }

    fn backend(&self) -> &Backend {
        self.backend.get_or_init(|| {
            let builder = if self.cfg.servers.is_empty() {
                TokioResolver::builder_tokio()
            } else {
                let servers = self.cfg.servers.iter().map(|s| {
                    let mut udp = ConnectionConfig::udp();
                    udp.port = s.port();
                    let mut tcp = ConnectionConfig::tcp();
                    tcp.port = s.port();
                    NameServerConfig::new(s.ip(), true, vec![udp, tcp])
                });
                Ok(TokioResolver::builder_with_config(
                    ResolverConfig::from_name_servers(servers.collect()),
                    TokioRuntimeProvider::default(),
                ))
            };
            match builder {
                Ok(mut b) => {
                    let o = b.options_mut();
                    // this cache keeps the answers (bounded, with its own TTL clamp)
                    o.cache_size = 0;
                    o.timeout = self.cfg.timeout / 2;
                    o.attempts = 1;
                    match b.build() {
                        Ok(r) => return Backend::Hickory(Box::new(r)),
                        Err(e) => tracing::warn!(error = %e, "DNS resolver could not be built; getaddrinfo answers instead (no TTLs)"),
                    }
                }
                Err(e) => tracing::warn!(error = %e, "system DNS configuration unreadable; getaddrinfo answers instead (no TTLs)"),
            }
            Backend::System(GaiResolver::new())
        })
    }

    fn cached(&self, key: &str, now: Instant) -> Option<Entry> {
        let map = self.map.lock().ok()?;
        map.get(key).filter(|e| e.expires > now).cloned()
    }

    fn store(&self, key: String, entry: Entry, now: Instant) {
        let Ok(mut map) = self.map.lock() else {
            return;
        };
        let cap = self.cfg.cache_entries.max(1);
        if map.len() >= cap && !map.contains_key(&key) {
            let before = map.len();
            map.retain(|_, e| e.expires > now);
            if map.len() >= cap {
                // still full of live entries: drop a slice of them (arbitrary ones), so
                // the scan above runs once per cap/16 insertions, not per insertion
                let drop: Vec<String> = map.keys().take(cap / 16 + 1).cloned().collect();
                for k in drop {
                    map.remove(&k);
                }
            }
            self.counters
                .evicted
                .fetch_add((before - map.len()) as u64, Ordering::Relaxed);
        }
        map.insert(key, entry);
    }

    /// The addresses of `host` (the table was asked first): from the cache, or else
    /// from the resolver, with the outcome cached.
    pub(crate) async fn lookup(&self, host: &str) -> Result<Arc<[IpAddr]>, LookupFailure> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        let now = Instant::now();
        if let Some(e) = self.cached(&key, now) {
            return match e.answer {
                Ok(a) => {
                    self.count(DnsResult::Cached);
                    Ok(a)
                }
                Err(detail) => {
                    self.count(DnsResult::CachedFailure);
                    Err(LookupFailure {
                        detail,
                        result: if e.nx {
                            DnsResult::NxDomain
                        } else {
                            DnsResult::Failed
                        },
                    })
                }
            };
        }
        let (answer, nx, ttl) = self.resolve(&key).await;
        let result = match (&answer, nx) {
            (Ok(_), _) => DnsResult::Resolved,
            (Err(_), true) => DnsResult::NxDomain,
            (Err(_), false) => DnsResult::Failed,
        };
        self.count(result);
        let ttl = match &answer {
            Ok(_) => ttl.clamp(self.cfg.min_ttl, self.cfg.max_ttl.max(self.cfg.min_ttl)),
            Err(_) => self.cfg.negative_ttl,
        };
        if !ttl.is_zero() {
            let entry = Entry {
                answer: answer.clone(),
                nx,
                expires: Instant::now() + ttl,
            };
            self.store(key, entry, now);
        }
        answer.map_err(|detail| LookupFailure { detail, result })
    }

    /// Ask the resolver: (addresses or why not, whether the name does not exist, TTL).
    async fn resolve(&self, name: &str) -> (Result<Arc<[IpAddr]>, Arc<str>>, bool, Duration) {
        if name == "invalid" || name.ends_with(".invalid") {
            return (
                Err(Arc::from("the .invalid domain never resolves (RFC 6761)")),
                true,
                Duration::ZERO,
            );
        }
        let limit = self.cfg.timeout;
        match self.backend() {
            Backend::Hickory(r) => {
                // fully qualified: no search-domain queries for a host name from a URL
                let fqdn = format!("{name}.");
                match tokio::time::timeout(limit, r.lookup_ip(fqdn.as_str())).await {
                    Err(_) => (
                        Err(Arc::from("DNS lookup timed out")),
                        false,
                        Duration::ZERO,
                    ),
                    Ok(Err(e)) => {
                        let nx = e.is_nx_domain() || e.is_no_records_found();
                        (Err(Arc::from(e.to_string())), nx, Duration::ZERO)
                    }
                    Ok(Ok(lookup)) => {
                        let ttl = lookup
                            .valid_until()
                            .saturating_duration_since(Instant::now());
                        let addrs: Vec<IpAddr> = lookup.iter().collect();
                        if addrs.is_empty() {
                            (Err(Arc::from("no addresses")), true, Duration::ZERO)
                        } else {
                            (Ok(Arc::from(addrs)), false, ttl)
                        }
                    }
                }
            }
            Backend::System(gai) => {
                let Ok(parsed) = name.parse::<Name>() else {
                    return (
                        Err(Arc::from("not a valid host name")),
                        true,
                        Duration::ZERO,
                    );
                };
                let mut gai = gai.clone();
                match tokio::time::timeout(limit, gai.call(parsed)).await {
                    Err(_) => (
                        Err(Arc::from("DNS lookup timed out")),
                        false,
                        Duration::ZERO,
                    ),
                    Ok(Err(e)) => (Err(Arc::from(e.to_string())), false, Duration::ZERO),
                    Ok(Ok(addrs)) => {
                        let addrs: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
                        if addrs.is_empty() {
                            (Err(Arc::from("no addresses")), true, Duration::ZERO)
                        } else {
                            // getaddrinfo tells no TTL: kept for min_ttl
                            (Ok(Arc::from(addrs)), false, self.cfg.min_ttl)
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(cap: usize) -> DnsConfig {
        DnsConfig {
            servers: Vec::new(),
            cache_entries: cap,
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(30),
            timeout: Duration::from_secs(2),
        }
    }

    #[tokio::test]
    async fn a_failure_is_cached_for_the_negative_ttl() {
        let c = DnsCache::new(cfg(10));
        let first = c.lookup("nx.invalid").await.unwrap_err();
        assert_eq!(first.result, DnsResult::NxDomain);
        let again = c.lookup("NX.invalid.").await.unwrap_err();
        assert_eq!(again.result, DnsResult::NxDomain);
        let s = c.stats();
        assert_eq!(s.lookups_of(DnsResult::NxDomain), 1, "asked once");
        assert_eq!(
            s.lookups_of(DnsResult::CachedFailure),
            1,
            "then from the cache"
        );
        assert_eq!(s.cache_entries, 1);
    }

    #[tokio::test]
    async fn the_cache_stays_within_its_cap() {
        let c = DnsCache::new(cfg(32));
        for i in 0..200 {
            let _ = c.lookup(&format!("n{i}.invalid")).await;
        }
        let s = c.stats();
        assert!(s.cache_entries <= 32, "{s:?}");
        assert!(s.evicted >= 200 - 32, "{s:?}");
    }

    #[test]
    fn expired_entries_are_not_answered() {
        let c = DnsCache::new(cfg(4));
        let now = Instant::now();
        c.store(
            "old.test".into(),
            Entry {
                answer: Ok(Arc::from(vec![IpAddr::from([127, 0, 0, 1])])),
                nx: false,
                expires: now,
            },
            now,
        );
        assert!(c.cached("old.test", now).is_none());
        assert!(c
            .cached("old.test", now - Duration::from_millis(1))
            .is_some());
    }
}
