//! The robots gate: how the frontier asks robots-policy about an origin and a URL.
//!
//! The frontier only sees the small traits here. [`BasicRobots`] is a stand-in backend used
//! until the full per-origin state machine of `robots-policy` is wired in; it knows unknown,
//! fresh (rules or allow-all, 24 h) and server-error hold with back-off.
//!
//! Robots records live in the store as the backend's encoded bytes; decoded states and
//! compiled policies are kept in a bounded in-memory cache ([`RobotsCache`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// What fetching an origin's robots.txt produced, as the frontier is told by its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotsFetchOutcome {
    /// 2xx with the (already size-capped, decoded) body.
    Success {
        /// Body bytes.
        body: Vec<u8>,
        /// `Cache-Control: max-age`, if any.
        max_age: Option<Duration>,
    },
    /// 4xx other than 429: no restrictions.
    ClientError {
        /// Status code.
        status: u16,
    },
    /// More redirect hops than allowed: treated as a 404.
    RedirectLimit,
    /// 5xx or 429: whole site disallowed for now.
    ServerError {
        /// Status code.
        status: u16,
        /// `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// DNS, connect, TLS, timeout, reset, invalid response: a server error.
    NetworkFailure {
        /// Kind, for the record.
        kind: String,
    },
}

/// What an origin's robots state says right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotsDecision<'a> {
    /// The robots.txt must be fetched before any page (unknown or stale origin, or a retry
    /// is due).
    FetchNow,
    /// Hold the origin's URLs: nothing fetched, nothing dropped.
    Hold,
    /// Every URL is allowed.
    AllowAll,
    /// Obey these robots.txt bytes.
    Obey(&'a [u8]),
}

/// One origin's robots state (decoded).
pub trait OriginRobots: Send {
    /// The decision at `now_ms`.
    fn decide(&self, now_ms: u64) -> RobotsDecision<'_>;
    /// Apply the outcome of a robots.txt fetch. `jitter` in [0, 1) spreads retries.
    fn apply(&mut self, outcome: &RobotsFetchOutcome, now_ms: u64, jitter: f64);
    /// Versioned encoding for the store.
    fn encode(&self) -> Vec<u8>;
    /// Short name of the state (for logs and stats).
    fn kind(&self) -> &'static str;
}

/// A compiled rule set for our user agent.
pub trait PathPolicy: Send + Sync {
    /// `Ok(())` if allowed; `Err(deciding rule)` if disallowed.
    fn check(&self, path_and_query: &str) -> Result<(), String>;
    /// Crawl-delay of the chosen group.
    fn crawl_delay(&self) -> Option<Duration>;
}

/// A robots backend: creates, decodes and compiles.
pub trait RobotsBackend: Send + Sync {
    /// State of an origin never seen.
    fn unknown(&self) -> Box<dyn OriginRobots>;
    /// Decode a stored record.
    fn decode(&self, bytes: &[u8]) -> Result<Box<dyn OriginRobots>, String>;
    /// Compile a robots.txt body for `agent`.
    fn compile(&self, body: &[u8], agent: &str) -> Arc<dyn PathPolicy>;
}

/// Cached origin: decoded state plus, once needed, the compiled policy of the body it obeys.
pub struct CachedOrigin {
    /// Decoded state.
    pub state: Box<dyn OriginRobots>,
    policy: Option<(usize, usize, Arc<dyn PathPolicy>)>,
}

impl CachedOrigin {
    fn new(state: Box<dyn OriginRobots>) -> CachedOrigin {
        CachedOrigin {
            state,
            policy: None,
        }
    }
}

/// Outcome of gating one URL.
#[derive(Clone)]
pub enum Gate {
    /// Fetch robots.txt first.
    FetchRobots,
    /// Hold.
    Hold,
    /// Allowed; crawl-delay of the rules, if any.
    Allow(Option<Duration>),
    /// Disallowed by this rule.
    Disallow(String),
}

/// Bounded cache of decoded origin states (approximate LRU with two generations: when the
/// hot map reaches half the capacity it becomes the cold map; a cold hit is promoted).
pub struct RobotsCache {
    backend: Arc<dyn RobotsBackend>,
    agent: String,
    cap: usize,
    hot: HashMap<String, CachedOrigin>,
    cold: HashMap<String, CachedOrigin>,
}

impl RobotsCache {
    /// New cache holding about `cap` origins.
    pub fn new(backend: Arc<dyn RobotsBackend>, agent: &str, cap: usize) -> RobotsCache {
        RobotsCache {
            backend,
            agent: agent.to_string(),
            cap: cap.max(2),
            hot: HashMap::new(),
            cold: HashMap::new(),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn RobotsBackend> {
        &self.backend
    }

    /// Number of cached origins.
    pub fn len(&self) -> usize {
        self.hot.len() + self.cold.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached entry for `origin`, loading it with `load` (stored bytes) on a miss.
    pub fn entry<E>(
        &mut self,
        origin: &str,
        load: impl FnOnce() -> Result<Option<Vec<u8>>, E>,
    ) -> Result<&mut CachedOrigin, E>
    where
        E: From<String>,
    {
        if !self.hot.contains_key(origin) {
            let entry = match self.cold.remove(origin) {
                Some(e) => e,
                None => {
                    let state = match load()? {
                        Some(bytes) => self.backend.decode(&bytes).map_err(E::from)?,
                        None => self.backend.unknown(),
                    };
                    CachedOrigin::new(state)
                }
            };
            if self.hot.len() >= self.cap / 2 {
                self.cold = std::mem::take(&mut self.hot);
            }
            self.hot.insert(origin.to_string(), entry);
        }
        // just inserted or present
        Ok(self
            .hot
            .get_mut(origin)
            .expect("entry present after insert"))
    }

    /// Replace the state of `origin` (after a durable apply).
    pub fn put(&mut self, origin: &str, state: Box<dyn OriginRobots>) {
        self.cold.remove(origin);
        if self.hot.len() >= self.cap / 2 && !self.hot.contains_key(origin) {
            self.cold = std::mem::take(&mut self.hot);
        }
        self.hot
            .insert(origin.to_string(), CachedOrigin::new(state));
    }

    /// Gate `path_and_query` of an origin whose entry is `entry`.
    pub fn gate(
        backend: &dyn RobotsBackend,
        agent: &str,
        entry: &mut CachedOrigin,
        path_and_query: &str,
        now_ms: u64,
    ) -> Gate {
        match entry.state.decide(now_ms) {
            RobotsDecision::FetchNow => Gate::FetchRobots,
            RobotsDecision::Hold => Gate::Hold,
            RobotsDecision::AllowAll => Gate::Allow(None),
            RobotsDecision::Obey(body) => {
                let (ptr, len) = (body.as_ptr() as usize, body.len());
                let policy = match &entry.policy {
                    Some((p, l, pol)) if *p == ptr && *l == len => pol.clone(),
                    _ => {
                        let pol = backend.compile(body, agent);
                        entry.policy = Some((ptr, len, pol.clone()));
                        pol
                    }
                };
                match policy.check(path_and_query) {
                    Ok(()) => Gate::Allow(policy.crawl_delay()),
                    Err(rule) => Gate::Disallow(rule),
                }
            }
        }
    }

    /// Split borrow helper: backend and agent.
    pub fn parts(&mut self, origin: &str) -> Option<(&dyn RobotsBackend, &str, &mut CachedOrigin)> {
        let e = self.hot.get_mut(origin)?;
        Some((self.backend.as_ref(), self.agent.as_str(), e))
    }
}

// ---------------------------------------------------------------------------------------
// Stand-in backend.

/// Stand-in backend: unknown -> fetch; 2xx -> obey for 24 h (or max-age); 4xx / redirect
/// limit -> allow-all for 24 h; 5xx, 429, network -> hold, retry after 1 min doubling to 1 h
/// (or Retry-After within those bounds). No 30-day fallback. Rules: `User-agent` groups
/// matched by product token (else `*`), longest `Allow`/`Disallow` prefix wins (`*` and `$`
/// not supported), `Crawl-delay` in seconds.
#[derive(Debug, Default, Clone)]
pub struct BasicRobots;

const DAY_MS: u64 = 24 * 3600 * 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
enum BasicState {
    Unknown,
    Fresh {
        expires_ms: u64,
        body: Option<Vec<u8>>,
    },
    ServerError {
        since_ms: u64,
        retry_at_ms: u64,
        attempt: u32,
    },
}

impl OriginRobots for BasicState {
    fn decide(&self, now_ms: u64) -> RobotsDecision<'_> {
        match self {
            BasicState::Unknown => RobotsDecision::FetchNow,
            BasicState::Fresh { expires_ms, .. } if now_ms >= *expires_ms => {
                RobotsDecision::FetchNow
            }
            BasicState::Fresh { body: None, .. } => RobotsDecision::AllowAll,
            BasicState::Fresh { body: Some(b), .. } => RobotsDecision::Obey(b),
            BasicState::ServerError { retry_at_ms, .. } if now_ms >= *retry_at_ms => {
                RobotsDecision::FetchNow
            }
            BasicState::ServerError { .. } => RobotsDecision::Hold,
        }
    }

    fn apply(&mut self, outcome: &RobotsFetchOutcome, now_ms: u64, jitter: f64) {
        *self = match outcome {
            RobotsFetchOutcome::Success { body, max_age } => {
                let life = max_age
                    .map(|d| (d.as_millis() as u64).clamp(3_600_000, DAY_MS))
                    .unwrap_or(DAY_MS);
                BasicState::Fresh {
                    expires_ms: now_ms + life,
                    body: Some(body.clone()),
                }
            }
            RobotsFetchOutcome::ClientError { .. } | RobotsFetchOutcome::RedirectLimit => {
                BasicState::Fresh {
                    expires_ms: now_ms + DAY_MS,
                    body: None,
                }
            }
            RobotsFetchOutcome::ServerError { .. } | RobotsFetchOutcome::NetworkFailure { .. } => {
                let (since, attempt) = match self {
                    BasicState::ServerError {
                        since_ms, attempt, ..
                    } => (*since_ms, attempt.saturating_add(1)),
                    _ => (now_ms, 1),
                };
                let base = 60_000u64
                    .saturating_mul(1 << (attempt - 1).min(6))
                    .min(3_600_000);
                let wait = match outcome {
                    RobotsFetchOutcome::ServerError {
                        retry_after: Some(ra),
                        ..
                    } => (ra.as_millis() as u64).clamp(60_000, 3_600_000),
                    _ => base + (base as f64 * 0.2 * jitter) as u64,
                };
                BasicState::ServerError {
                    since_ms: since,
                    retry_at_ms: now_ms + wait,
                    attempt,
                }
            }
        };
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8];
        match self {
            BasicState::Unknown => out.push(0),
            BasicState::Fresh { expires_ms, body } => {
                out.push(if body.is_some() { 1 } else { 2 });
                out.extend_from_slice(&expires_ms.to_le_bytes());
                if let Some(b) = body {
                    out.extend_from_slice(b);
                }
            }
            BasicState::ServerError {
                since_ms,
                retry_at_ms,
                attempt,
            } => {
                out.push(3);
                out.extend_from_slice(&since_ms.to_le_bytes());
                out.extend_from_slice(&retry_at_ms.to_le_bytes());
                out.extend_from_slice(&u64::from(*attempt).to_le_bytes());
            }
        }
        out
    }

    fn kind(&self) -> &'static str {
        match self {
            BasicState::Unknown => "unknown",
            BasicState::Fresh { .. } => "fresh",
            BasicState::ServerError { .. } => "5xx-disallow",
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

struct BasicPolicy {
    rules: Vec<(bool, String)>,
    crawl_delay: Option<Duration>,
}

impl PathPolicy for BasicPolicy {
    fn check(&self, path: &str) -> Result<(), String> {
        let mut best: Option<&(bool, String)> = None;
        for r in &self.rules {
            if !r.1.is_empty() && path.starts_with(r.1.as_str()) {
                let better = match best {
                    None => true,
                    Some(b) => r.1.len() > b.1.len() || (r.1.len() == b.1.len() && r.0),
                };
                if better {
                    best = Some(r);
                }
            }
        }
        match best {
            Some((false, p)) => Err(format!("Disallow: {p}")),
            _ => Ok(()),
        }
    }
    fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
    }
}

impl RobotsBackend for BasicRobots {
    fn unknown(&self) -> Box<dyn OriginRobots> {
        Box::new(BasicState::Unknown)
    }

    fn decode(&self, b: &[u8]) -> Result<Box<dyn OriginRobots>, String> {
        let bad = || "corrupt basic robots record".to_string();
        if b.first() != Some(&1) {
            return Err(bad());
        }
        let st = match b.get(1) {
            Some(0) => BasicState::Unknown,
            Some(1) => BasicState::Fresh {
                expires_ms: u64_at(b, 2).ok_or_else(bad)?,
                body: Some(b[10..].to_vec()),
            },
            Some(2) => BasicState::Fresh {
                expires_ms: u64_at(b, 2).ok_or_else(bad)?,
                body: None,
            },
            Some(3) => BasicState::ServerError {
                since_ms: u64_at(b, 2).ok_or_else(bad)?,
                retry_at_ms: u64_at(b, 10).ok_or_else(bad)?,
                attempt: u32::try_from(u64_at(b, 18).ok_or_else(bad)?).unwrap_or(u32::MAX),
            },
            _ => return Err(bad()),
        };
        Ok(Box::new(st))
    }

    fn compile(&self, body: &[u8], agent: &str) -> Arc<dyn PathPolicy> {
        let text = String::from_utf8_lossy(body);
        let token = agent
            .split('/')
            .next()
            .unwrap_or(agent)
            .trim()
            .to_ascii_lowercase();
        // groups: (agents, rules, delay)
        type Group = (Vec<String>, Vec<(bool, String)>, Option<Duration>);
        let mut groups: Vec<Group> = Vec::new();
        let mut in_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "user-agent" => {
                    if !in_agents {
                        groups.push((Vec::new(), Vec::new(), None));
                        in_agents = true;
                    }
                    if let Some(g) = groups.last_mut() {
                        g.0.push(v.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    if let Some(g) = groups.last_mut() {
                        g.1.push((k == "allow", v.to_string()));
                    }
                }
                "crawl-delay" => {
                    in_agents = false;
                    if let (Some(g), Ok(s)) = (groups.last_mut(), v.parse::<f64>()) {
                        if s.is_finite() && s >= 0.0 {
                            g.2 = Some(Duration::from_secs_f64(s.min(1e9)));
                        }
                    }
                }
                _ => {}
            }
        }
        let pick = |pred: &dyn Fn(&str) -> bool| {
            let mut rules = Vec::new();
            let mut delay = None;
            let mut found = false;
            for g in &groups {
                if g.0.iter().any(|a| pred(a)) {
                    found = true;
                    rules.extend(g.1.iter().cloned());
                    delay = delay.or(g.2);
                }
            }
            found.then_some(BasicPolicy {
                rules,
                crawl_delay: delay,
            })
        };
        let policy = pick(&|a| a == token)
            .or_else(|| pick(&|a| a == "*"))
            .unwrap_or(BasicPolicy {
                rules: Vec::new(),
                crawl_delay: None,
            });
        Arc::new(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_states_roundtrip() {
        let b = BasicRobots;
        let mut s = b.unknown();
        assert_eq!(s.decide(0), RobotsDecision::FetchNow);
        s.apply(
            &RobotsFetchOutcome::ServerError {
                status: 503,
                retry_after: None,
            },
            1000,
            0.0,
        );
        assert_eq!(s.decide(1000), RobotsDecision::Hold);
        assert_eq!(s.decide(61_000), RobotsDecision::FetchNow);
        let d = b.decode(&s.encode()).unwrap();
        assert_eq!(d.encode(), s.encode());
        s.apply(
            &RobotsFetchOutcome::Success {
                body: b"User-agent: *\nDisallow: /x\n".to_vec(),
                max_age: None,
            },
            2000,
            0.0,
        );
        assert!(matches!(s.decide(2000), RobotsDecision::Obey(_)));
        assert_eq!(s.decide(2000 + DAY_MS), RobotsDecision::FetchNow);
        assert_eq!(b.decode(&s.encode()).unwrap().encode(), s.encode());
    }

    #[test]
    fn basic_policy() {
        let p = BasicRobots.compile(
            b"User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private\nAllow: /private/ok\nCrawl-delay: 5\n",
            "frontierd/0.1",
        );
        assert!(p.check("/public").is_ok());
        assert!(p.check("/private/x").is_err());
        assert!(p.check("/private/ok/1").is_ok());
        assert_eq!(p.crawl_delay(), Some(Duration::from_secs(5)));
        let q = BasicRobots.compile(b"User-agent: frontierd\nDisallow: /a\n", "frontierd/0.1");
        assert!(q.check("/a").is_err());
    }
}
