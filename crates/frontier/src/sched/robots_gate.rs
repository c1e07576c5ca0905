//! The robots gate: how the frontier asks robots-policy about an origin and a URL.
//!
//! There is one robots engine, robots-policy: [`RobotsEngine`] holds its state-machine
//! timing, [`OriginState`] is one origin's state (robots-policy's `OriginRobots` with that
//! timing) and a compiled rule set is robots-policy's [`AgentPolicy`].
//!
//! Robots records live in the store as robots-policy's encoded bytes; decoded states and
//! compiled policies are kept in a bounded in-memory cache ([`RobotsCache`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use robots_policy::state::{
    self as rp, DecodeError, Directive as RpDirective, Jitter, StateConfig, UnixMillis,
};
use robots_policy::AgentPolicy;

/// What fetching an origin's robots.txt produced: robots-policy's fetch result.
pub type RobotsFetchOutcome = robots_policy::state::RobotsFetchResult;

/// What an origin's robots state says right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotsDecision<'a> {
    /// The robots.txt must be fetched before any page (unknown or stale origin, or a retry
    /// is due).
    FetchNow,
    /// Hold the origin's URLs: nothing fetched, nothing dropped; look again at the given
    /// instant (unix ms) if the state knows it.
    Hold(Option<u64>),
    /// Every URL is allowed.
    AllowAll,
    /// Obey these robots.txt bytes, of the copy fetched at `fetched_at_ms`.
    Obey {
        /// The body.
        body: &'a [u8],
        /// When the copy was fetched (unix ms): with the body's length, it names the copy
        /// (a decoded state holds one copy; a new fetch makes a new state).
        fetched_at_ms: u64,
    },
}

/// Cached origin: decoded state plus, once needed, the compiled policy of the body it obeys.
pub struct CachedOrigin {
    /// Decoded state.
    pub state: OriginState,
    /// The compiled policy and the copy it was compiled from: (fetched at, body length).
    policy: Option<((u64, usize), Arc<AgentPolicy>)>,
}

impl CachedOrigin {
    fn new(state: OriginState) -> CachedOrigin {
        CachedOrigin {
            state,
            policy: None,
        }
    }
}

/// Outcome of gating one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotsVerdict {
    /// Fetch robots.txt first.
    FetchRobots,
    /// Hold (until the given instant, if known).
    Hold(Option<u64>),
    /// Allowed; crawl-delay of the rules, if any.
    Allow(Option<Duration>),
    /// Disallowed by this rule.
    Disallow(String),
}

/// Bounded cache of decoded origin states (approximate LRU with two generations: when the
/// hot map reaches the capacity it becomes the cold map; a cold hit is promoted). It holds
/// the `cap` origins used last, and up to as many again from the generation before. A
/// crawl goes round its hosts in turn, and a cache that held fewer than a turn missed on
/// every lease: with generations of half the capacity, 10 000 hosts in turn with a
/// capacity of 10 000 read and compiled a robots.txt for every page.
pub struct RobotsCache {
    backend: Arc<RobotsEngine>,
    agent: String,
    cap: usize,
    hot: HashMap<String, CachedOrigin>,
    cold: HashMap<String, CachedOrigin>,
}

impl RobotsCache {
    /// New cache holding at least the `cap` origins used last (at most twice as many).
    pub fn new(backend: Arc<RobotsEngine>, agent: &str, cap: usize) -> RobotsCache {
        RobotsCache {
            backend,
            agent: agent.to_string(),
            cap: cap.max(2),
            hot: HashMap::new(),
            cold: HashMap::new(),
        }
    }

    /// The engine.
    pub fn backend(&self) -> &Arc<RobotsEngine> {
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
        E: From<DecodeError>,
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
            if self.hot.len() >= self.cap {
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
    pub fn put(&mut self, origin: &str, state: OriginState) {
        self.cold.remove(origin);
        if self.hot.len() >= self.cap && !self.hot.contains_key(origin) {
            self.cold = std::mem::take(&mut self.hot);
        }
        self.hot
            .insert(origin.to_string(), CachedOrigin::new(state));
    }

    /// The verdict on `path_and_query` of an origin whose entry is `entry`.
    pub fn verdict(
        backend: &RobotsEngine,
        agent: &str,
        entry: &mut CachedOrigin,
        path_and_query: &str,
        now_ms: u64,
    ) -> RobotsVerdict {
        match entry.state.decide(now_ms) {
            RobotsDecision::FetchNow => RobotsVerdict::FetchRobots,
            RobotsDecision::Hold(t) => RobotsVerdict::Hold(t),
            RobotsDecision::AllowAll => RobotsVerdict::Allow(None),
            RobotsDecision::Obey {
                body,
                fetched_at_ms,
            } => {
                let copy = (fetched_at_ms, body.len());
                let policy = match &entry.policy {
                    Some((c, pol)) if *c == copy => pol.clone(),
                    _ => {
                        let pol = backend.compile(body, agent);
                        entry.policy = Some((copy, pol.clone()));
                        pol
                    }
                };
                match disallowing_rule(&policy, path_and_query) {
                    None => RobotsVerdict::Allow(policy.crawl_delay()),
                    Some(rule) => RobotsVerdict::Disallow(rule),
                }
            }
        }
    }

    /// The crawl-delay for `agent` of the rules `state` obeys at `now_ms` (None when it
    /// obeys none, or they set none).
    pub fn crawl_delay_of(
        backend: &RobotsEngine,
        agent: &str,
        state: &OriginState,
        now_ms: u64,
    ) -> Option<Duration> {
        match state.decide(now_ms) {
            RobotsDecision::Obey { body, .. } => backend.compile(body, agent).crawl_delay(),
            _ => None,
        }
    }

    /// Split borrow helper: backend and agent.
    pub fn parts(&mut self, origin: &str) -> Option<(&RobotsEngine, &str, &mut CachedOrigin)> {
        let e = self.hot.get_mut(origin)?;
        Some((self.backend.as_ref(), self.agent.as_str(), e))
    }
}

/// `None` if `policy` allows `path_and_query`; else the deciding rule, as
/// "kind: pattern (line n)" (or "disallowed" when the matcher names no rule).
pub fn disallowing_rule(policy: &AgentPolicy, path_and_query: &str) -> Option<String> {
    let v = policy.check(path_and_query);
    if v.allowed {
        return None;
    }
    Some(match v.rule.and_then(|id| policy.rule(id)) {
        Some(r) => format!("{}: {} (line {})", r.kind.as_str(), r.pattern, r.line),
        None => "disallowed".to_string(),
    })
}

// ---------------------------------------------------------------------------------------
// The engine: robots-policy's state machine and matcher.

/// The robots engine: robots-policy's per-origin state machine (`robots_policy::state`)
/// with its timing, and its Google-compatible matcher.
#[derive(Debug, Clone, Default)]
pub struct RobotsEngine {
    /// Timing of the state machine.
    pub state_config: Arc<StateConfig>,
}

impl RobotsEngine {
    /// State of an origin never seen.
    pub fn unknown(&self) -> OriginState {
        OriginState {
            cfg: self.state_config.clone(),
            inner: rp::OriginRobots::new(),
        }
    }

    /// Decode a stored record.
    pub fn decode(&self, bytes: &[u8]) -> Result<OriginState, DecodeError> {
        Ok(OriginState {
            cfg: self.state_config.clone(),
            inner: rp::decode(bytes)?,
        })
    }

    /// Compile a robots.txt body for `agent` (its product token: the part before `/`).
    pub fn compile(&self, body: &[u8], agent: &str) -> Arc<AgentPolicy> {
        let token = agent.split('/').next().unwrap_or(agent).trim();
        Arc::new(AgentPolicy::parse(body, token))
    }
}

/// One origin's robots state (decoded): robots-policy's `OriginRobots` with the timing it
/// is read under (every question to the state machine needs both).
#[derive(Debug, Clone)]
pub struct OriginState {
    cfg: Arc<StateConfig>,
    inner: rp::OriginRobots,
}

impl OriginState {
    /// The decision at `now_ms`.
    pub fn decide(&self, now_ms: u64) -> RobotsDecision<'_> {
        let now = UnixMillis(now_ms);
        if self.inner.needs_fetch(now) {
            return RobotsDecision::FetchNow;
        }
        match self.inner.verdict(&self.cfg, now) {
            RpDirective::Hold(_) => {
                let at = self.inner.next_fetch_at(now).0;
                RobotsDecision::Hold((at > now_ms).then_some(at))
            }
            RpDirective::AllowAll { .. } => RobotsDecision::AllowAll,
            RpDirective::ObeyRules { body, .. } => RobotsDecision::Obey {
                body,
                fetched_at_ms: self.inner.copy().map_or(0, |c| c.fetched_at.0),
            },
        }
    }

    /// Apply the outcome of a robots.txt fetch. `jitter` is a uniform random u64.
    pub fn apply(&mut self, outcome: &RobotsFetchOutcome, now_ms: u64, jitter: u64) {
        self.inner.apply(
            &self.cfg,
            outcome.clone(),
            UnixMillis(now_ms),
            Jitter(jitter),
        );
    }

    /// Versioned encoding for the store.
    pub fn encode(&self) -> Vec<u8> {
        rp::encode(&self.inner)
    }

    /// Short name of the state (for logs and stats).
    pub fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// Its status at `now_ms`: the state in effect, expiry, next fetch, last fetch.
    pub fn status(&self, now_ms: u64) -> rp::RobotsStatus {
        self.inner.status(&self.cfg, UnixMillis(now_ms))
    }

    /// Sitemaps named by the copy in force (or the last good one).
    pub fn sitemaps(&self) -> Vec<String> {
        match self.inner.copy().map(|c| &c.content) {
            Some(rp::CopyContent::Body(body)) => {
                robots_policy::RobotsTxt::parse(body).sitemaps().to_vec()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `n` origins named `prefix<k>` in turn, `turns` times; returns how many
    /// were read from the store.
    fn go_round(cache: &mut RobotsCache, prefix: &str, n: usize, turns: usize) -> usize {
        let stored = cache.backend().unknown().encode();
        let mut loads = 0;
        for _ in 0..turns {
            for o in 0..n {
                cache
                    .entry::<DecodeError>(&format!("http://{prefix}{o}.test"), || {
                        loads += 1;
                        Ok(Some(stored.clone()))
                    })
                    .unwrap();
            }
        }
        loads
    }

    /// Origins taken in turn, as a crawl goes round its hosts: with as many origins as the
    /// capacity, each is read from the store once, in the first turn only.
    #[test]
    fn a_turn_over_as_many_origins_as_the_capacity_reads_each_once() {
        let mut cache = RobotsCache::new(Arc::new(RobotsEngine::default()), "frontierd/0.1", 1000);
        assert_eq!(
            go_round(&mut cache, "h", 1000, 1),
            1000,
            "the first turn reads each"
        );
        assert_eq!(
            go_round(&mut cache, "h", 1000, 3),
            0,
            "the next turns read none"
        );
        assert!(cache.len() <= 2000);
        // a turn over more than twice the capacity misses every time: the bound holds
        assert_eq!(go_round(&mut cache, "w", 2500, 2), 5000);
        assert!(cache.len() <= 2000, "{} origins held", cache.len());
    }

    #[test]
    fn engine_roundtrip() {
        let b = RobotsEngine::default();
        let mut s = b.unknown();
        assert_eq!(s.decide(0), RobotsDecision::FetchNow);
        s.apply(
            &RobotsFetchOutcome::ServerError {
                status: 503,
                retry_after: None,
            },
            1000,
            0,
        );
        assert_eq!(s.decide(1000), RobotsDecision::Hold(Some(61_000)));
        assert_eq!(s.decide(61_000), RobotsDecision::FetchNow);
        let d = b.decode(&s.encode()).unwrap();
        assert_eq!(d.encode(), s.encode());
        s.apply(
            &RobotsFetchOutcome::Success {
                status: 200,
                body: b"User-agent: *\nDisallow: /x\nCrawl-delay: 5\n".to_vec(),
                max_age: None,
            },
            2000,
            0,
        );
        let RobotsDecision::Obey { body, .. } = s.decide(2000) else {
            panic!("expected rules");
        };
        let p = b.compile(body, "frontierd/0.1");
        assert_eq!(
            disallowing_rule(&p, "/x/y").as_deref(),
            Some("disallow: /x (line 2)")
        );
        assert_eq!(disallowing_rule(&p, "/y"), None);
        assert_eq!(p.crawl_delay(), Some(Duration::from_secs(5)));
        assert_eq!(s.decide(2000 + 24 * 3600 * 1000), RobotsDecision::FetchNow);
        // a record that is not robots-policy's encoding is a typed decode error
        assert_eq!(b.decode(&[]).err(), Some(DecodeError::Empty));
    }
}
