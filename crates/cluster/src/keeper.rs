//! The lease keeper of one node: every third of the lease TTL, one round against the lease
//! buckets (`lease_store.rs`) following the plan (`lease.rs`), its outcome written into the
//! node's [`Ownership`] (the dispatch gate) and returned to the caller, which starts and
//! stops the shards' consumers and hands off the shards it gives up.
//!
//! **Fencing.** A renewal sent at `t` (this node's monotonic clock) lets the shard's hosts
//! be dispatched until `t + ttl - ttl/3`. Another node judges the lease run out only after
//! seeing the same revision for a whole `ttl` on its own clock, and it can only have seen
//! that revision after it was written, which is after `t`: so a node that cannot renew
//! (broker unreachable, process stopped by SIGSTOP, a long pause) stops dispatching at least
//! `ttl/3` before anyone may take the shard, and the taker then waits its takeover hold
//! (the fetch timeout plus the longest gap) before its first request, for the requests the
//! old holder still had in flight. When a paused node wakes, its gate is already shut (its
//! fence is in the past) and its next round finds the shard lost: it never fetches for a
//! shard it no longer holds. Every broker call of a round gives up after a quarter of the TTL
//! (a server killed mid-request must not hold the round while the fences run out).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::lease::{plan, Observed};
use crate::lease_store::{LeaseError, LeaseStore};
use crate::ownership::Ownership;

/// Now, unix ms (only written into leases for display).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What one round changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RoundReport {
    /// Live nodes, this one included.
    pub live: usize,
    /// Shards taken (claimed, or adopted: their lease already named this node), with the
    /// hold before their first request.
    pub gained: Vec<(u32, Duration)>,
    /// Of those gained, the ones adopted: this node's own from before (its store has their
    /// state; their log is not replayed).
    pub adopted: Vec<u32>,
    /// Shards lost to another node (or whose key went): stop consuming them.
    pub lost: Vec<u32>,
    /// Shards to hand off: stop consuming them, give their queued URLs back to the broker,
    /// then [`LeaseKeeper::release`].
    pub to_release: Vec<u32>,
    /// The first broker error of the round, if any (the rest of the round went on).
    pub error: Option<String>,
}

/// One node's leases.
pub struct LeaseKeeper {
    store: LeaseStore,
    me: String,
    shards: u32,
    ttl: Duration,
    takeover_hold: Duration,
    ownership: Arc<Ownership>,
    /// Shards held, with the revision this node last wrote.
    held: BTreeMap<u32, u64>,
    /// Shards being handed off: closed, still renewed until released.
    releasing: BTreeMap<u32, u64>,
    /// Each shard key's revision and when (monotonic ms) this node first saw it.
    seen: HashMap<u32, (u64, u64)>,
    /// When each shard held was taken (unix ms, written with the lease for display).
    since: HashMap<u32, u64>,
}

impl LeaseKeeper {
    pub fn new(
        store: LeaseStore,
        me: &str,
        ttl: Duration,
        takeover_hold: Duration,
        ownership: Arc<Ownership>,
    ) -> LeaseKeeper {
        LeaseKeeper {
            store,
            me: me.to_string(),
            shards: ownership.shard_map().shards(),
            ttl,
            takeover_hold,
            ownership,
            held: BTreeMap::new(),
            releasing: BTreeMap::new(),
            seen: HashMap::new(),
            since: HashMap::new(),
        }
    }

    /// `op`, or [`LeaseError::Timeout`] after a quarter of the TTL: a broker that stops
    /// answering (a server killed mid-request) must not hold the round, and the renewals of
    /// the other shards, past the fence.
    async fn within<T>(
        &self,
        what: &'static str,
        op: impl std::future::Future<Output = Result<T, LeaseError>>,
    ) -> Result<T, LeaseError> {
        let after = self.ttl / 4;
        tokio::time::timeout(after, op)
            .await
            .unwrap_or(Err(LeaseError::Timeout { what, after }))
    }

    /// How often [`LeaseKeeper::round`] should run.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// The node's ownership this keeper writes.
    pub fn ownership(&self) -> Arc<Ownership> {
        self.ownership.clone()
    }

    /// One round: say this node is alive, read the buckets, judge which leases ran out,
    /// then renew, give up, and claim as planned.
    pub async fn round(&mut self) -> Result<RoundReport, LeaseError> {
        let sent = self.ownership.now_ms();
        let ttl_ms = self.ttl.as_millis() as u64;
        let fence = sent + ttl_ms - ttl_ms / 3;
        self.within(
            "writing this node's member key",
            self.store.heartbeat(&self.me),
        )
        .await?;
        let mut snap = self
            .within("reading the buckets", self.store.snapshot())
            .await?;
        // first seen no earlier than read: a revision written during the read must not
        // count as seen from before it was written
        self.judge_expiry(&mut snap.shards, self.ownership.now_ms(), ttl_ms);
        let mut report = RoundReport {
            live: snap.live.len().max(1),
            ..RoundReport::default()
        };
        self.adopt(&snap.shards, fence, &mut report);
        let held = self.held.keys().copied().collect();
        let p = plan(&self.me, self.shards, &snap.live, &snap.shards, &held);
        for s in p.lost {
            self.lose(s, &mut report);
        }
        for s in p.renew {
            self.renew(s, fence, &mut report).await;
        }
        for (s, rev) in self.releasing.clone() {
            match self.write_renewal(s, rev).await {
                Ok(rev) => {
                    self.releasing.insert(s, rev);
                }
                Err(e) => {
                    self.releasing.remove(&s);
                    report.error.get_or_insert(e.to_string());
                }
            }
        }
        for s in p.release {
            if let Some(rev) = self.held.remove(&s) {
                self.ownership.revoke(s);
                self.releasing.insert(s, rev);
                report.to_release.push(s);
            }
        }
        for s in p.claim {
            self.claim(s, snap.shards.get(&s), fence, &mut report).await;
        }
        Ok(report)
    }

    /// A revision unchanged for a whole TTL since this node first saw it has run out (this
    /// node's own leases excepted: it renews them, or finds them lost).
    fn judge_expiry(&mut self, shards: &mut BTreeMap<u32, Observed>, now: u64, ttl_ms: u64) {
        for (s, o) in shards.iter_mut() {
            let first = self.seen.entry(*s).or_insert((o.revision, now));
            if first.0 != o.revision {
                *first = (o.revision, now);
            }
            let holder = o.value.as_ref().and_then(|v| v.node.as_deref());
            o.expired = holder.is_some_and(|h| h != self.me) && now - first.1 >= ttl_ms;
        }
    }

    /// Leases that name this node but that it does not hold are its own: after a restart (the
    /// frontier's restart hold keeps the gaps of its hosts), or a write that went through
    /// but whose answer was lost. No other node can hold them.
    fn adopt(&mut self, shards: &BTreeMap<u32, Observed>, fence: u64, report: &mut RoundReport) {
        for (s, o) in shards {
            let mine = o.value.as_ref().and_then(|v| v.node.as_deref()) == Some(&self.me);
            let known = self.held.contains_key(s) || self.releasing.contains_key(s);
            if mine && !known {
                let since = o.value.as_ref().map_or(0, |v| v.since_ms);
                self.since.insert(*s, since);
                self.held.insert(*s, o.revision);
                self.ownership.grant(*s, Duration::ZERO, fence);
                report.gained.push((*s, Duration::ZERO));
                report.adopted.push(*s);
            }
        }
    }

    fn lose(&mut self, s: u32, report: &mut RoundReport) {
        self.held.remove(&s);
        self.ownership.revoke(s);
        report.lost.push(s);
    }

    /// Write shard `s`'s lease again at revision `rev` (held or being handed off).
    async fn write_renewal(&self, s: u32, rev: u64) -> Result<u64, LeaseError> {
        let since = self.since.get(&s).copied().unwrap_or(0);
        let renew = self.store.renew(s, &self.me, rev, since);
        self.within("renewing a lease", renew).await
    }

    async fn renew(&mut self, s: u32, fence: u64, report: &mut RoundReport) {
        let Some(&rev) = self.held.get(&s) else {
            return;
        };
        match self.write_renewal(s, rev).await {
            Ok(rev) => {
                self.held.insert(s, rev);
                self.ownership.renew(s, fence);
            }
            Err(LeaseError::Conflict { .. }) => self.lose(s, report),
            // the fence stays where the last renewal put it
            Err(e) => {
                report.error.get_or_insert(e.to_string());
            }
        }
    }

    async fn claim(
        &mut self,
        s: u32,
        seen: Option<&Observed>,
        fence: u64,
        report: &mut RoundReport,
    ) {
        let hold = match seen {
            None => Duration::ZERO,
            Some(o) if o.expired => self.takeover_hold,
            Some(o) => Duration::from_millis(o.value.as_ref().map_or(0, |v| v.hold_ms)),
        };
        let now = wall_ms();
        match self
            .within("claiming a lease", self.store.claim(s, &self.me, seen, now))
            .await
        {
            Ok(rev) => {
                self.since.insert(s, now);
                self.held.insert(s, rev);
                self.ownership.grant(s, hold, fence);
                report.gained.push((s, hold));
            }
            Err(LeaseError::Conflict { .. }) => {}
            Err(e) => {
                report.error.get_or_insert(e.to_string());
            }
        }
    }

    /// Shard `s`, handed off, is released: the next holder waits `hold` before its first
    /// request to one of its hosts.
    pub async fn release(&mut self, s: u32, hold: Duration) -> Result<(), LeaseError> {
        let Some(rev) = self.releasing.remove(&s) else {
            return Ok(());
        };
        let hold_ms = hold.as_millis() as u64;
        self.since.remove(&s);
        let release = self.store.release(s, rev, hold_ms, wall_ms());
        self.within("releasing a lease", release).await.map(|_| ())
    }

    /// Stopping: every held shard is to be handed off (closed now; the caller hands each
    /// off and releases it, then calls [`LeaseKeeper::leave`]).
    pub fn release_all(&mut self) -> Vec<u32> {
        let all: Vec<u32> = self.held.keys().copied().collect();
        for s in &all {
            if let Some(rev) = self.held.remove(s) {
                self.ownership.revoke(*s);
                self.releasing.insert(*s, rev);
            }
        }
        self.releasing.keys().copied().collect()
    }

    /// This node leaves the member list at once.
    pub async fn leave(&self) -> Result<(), LeaseError> {
        self.within("leaving the member list", self.store.leave(&self.me))
            .await
    }
}
