//! Which shards this node may serve right now, read on every dispatch (it is the frontier's
//! [`DispatchGate`]) and for every link (is its shard ours?). Written by the lease keeper
//! (`keeper.rs`), or fixed once by a static `owned_shards`.
//!
//! Per shard, on this process' monotonic clock: `open_from` (not held: never; just taken
//! over: when the takeover hold ends) and `open_until` (the fence: a third of the lease TTL
//! before the lease could run out in the other nodes' eyes, moved on by each renewal).
//! Between the two the shard's hosts may be dispatched; outside, they keep their queues and
//! wait.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use frontier::DispatchGate;

use crate::shard::{ShardMap, ShardSet};

/// `open_from` of a shard this node does not hold.
const NOT_HELD: u64 = u64::MAX;
/// `open_from` of a shard held but closed while its log is read (its hosts' waits are not
/// known yet).
const READING_LOG: u64 = u64::MAX - 1;
/// How soon a host of a shard not held (or fenced) is asked about again.
const RECHECK_MS: u64 = 500;

/// This node's shards and their windows.
pub struct Ownership {
    map: ShardMap,
    origin: Instant,
    open_from: Vec<AtomicU64>,
    open_until: Vec<AtomicU64>,
    /// Fixed by `owned_shards`: never changes.
    fixed: bool,
}

impl Ownership {
    /// Holding nothing yet (leases decide).
    pub fn leased(map: ShardMap) -> Ownership {
        let n = map.shards() as usize;
        Ownership {
            map,
            origin: Instant::now(),
            open_from: (0..n).map(|_| AtomicU64::new(NOT_HELD)).collect(),
            open_until: (0..n).map(|_| AtomicU64::new(0)).collect(),
            fixed: false,
        }
    }

    /// `owned` held for good (static `owned_shards`).
    pub fn fixed(map: ShardMap, owned: &ShardSet) -> Ownership {
        let o = Ownership::leased(map);
        for s in owned.iter() {
            o.open_from[s as usize].store(0, Ordering::Release);
            o.open_until[s as usize].store(u64::MAX, Ordering::Release);
        }
        Ownership { fixed: true, ..o }
    }

    /// Whether ownership is static (`owned_shards`), not leased.
    pub fn is_fixed(&self) -> bool {
        self.fixed
    }

    pub fn shard_map(&self) -> ShardMap {
        self.map
    }

    /// Milliseconds on this process' monotonic clock.
    pub fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Whether this node holds `shard` (its URLs are queued here, whether or not they may
    /// be dispatched this instant).
    pub fn holds(&self, shard: u32) -> bool {
        self.open_from
            .get(shard as usize)
            .is_some_and(|f| f.load(Ordering::Acquire) != NOT_HELD)
    }

    /// Close a held shard while its log is read: none of its hosts is dispatched until
    /// [`Ownership::log_read`] (a host queued from the log must not go before its wait from
    /// the log is applied).
    pub fn reading_log(&self, shard: u32) {
        if let Some(f) = self.open_from.get(shard as usize) {
            let _ = f.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v != NOT_HELD).then_some(READING_LOG)
            });
        }
    }

    /// The shard's log is read: open it now (unless it was revoked meanwhile).
    pub fn log_read(&self, shard: u32) {
        if let Some(f) = self.open_from.get(shard as usize) {
            let now = self.now_ms();
            let _ = f.compare_exchange(READING_LOG, now, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Whether `shard` is held and inside its fence now (the takeover hold aside): URLs
    /// taken from its stream may be acknowledged as this node's.
    pub fn fenced_in(&self, shard: u32) -> bool {
        self.holds(shard)
            && self
                .open_until
                .get(shard as usize)
                .is_some_and(|u| self.now_ms() < u.load(Ordering::Acquire))
    }

    /// The shards held, ascending.
    pub fn held(&self) -> Vec<u32> {
        (0..self.map.shards()).filter(|&s| self.holds(s)).collect()
    }

    /// The shards held, as ranges (`0-3,8`), or `-` for none.
    pub fn held_text(&self) -> String {
        let held = self.held();
        if held.is_empty() {
            return "-".into();
        }
        let text = held
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        ShardSet::parse(&text, self.map.shards()).map_or(text, |s| s.to_string())
    }

    /// `shard` taken: its hosts may go from `hold` from now until the fence `until_ms`.
    pub fn grant(&self, shard: u32, hold: Duration, until_ms: u64) {
        let from = self.now_ms().saturating_add(hold.as_millis() as u64);
        if let (Some(f), Some(u)) = (
            self.open_from.get(shard as usize),
            self.open_until.get(shard as usize),
        ) {
            u.store(until_ms, Ordering::Release);
            f.store(from, Ordering::Release);
        }
    }

    /// `shard` renewed: the fence moves to `until_ms`.
    pub fn renew(&self, shard: u32, until_ms: u64) {
        if let Some(u) = self.open_until.get(shard as usize) {
            u.store(until_ms, Ordering::Release);
        }
    }

    /// `shard` lost or being handed off: nothing of it is dispatched from now on.
    pub fn revoke(&self, shard: u32) {
        if let Some(f) = self.open_from.get(shard as usize) {
            f.store(NOT_HELD, Ordering::Release);
        }
    }
}

impl Ownership {
    /// `None`: the hosts of `shard` may be visited now; `Some(ms)`: not now, ask again
    /// after `ms`.
    fn closed_for_shard(&self, shard: u32) -> Option<u64> {
        let s = shard as usize;
        let from = self.open_from.get(s)?.load(Ordering::Acquire);
        if from == NOT_HELD || from == READING_LOG {
            return Some(RECHECK_MS);
        }
        let now = self.now_ms();
        if now < from {
            return Some(from - now);
        }
        if now >= self.open_until.get(s)?.load(Ordering::Acquire) {
            // the lease could not be renewed in time: wait for the next renewal (or the loss)
            return Some(RECHECK_MS);
        }
        None
    }

    /// Whether a request to a host of `shard` may be sent this instant: the shard held,
    /// past its takeover hold and inside its fence. Asked again right before each request,
    /// not only at dispatch: a node frozen (SIGSTOP, a stalled VM) with a request in hand
    /// wakes after the others took its shards, and must not send it.
    pub fn open_now(&self, shard: u32) -> bool {
        self.closed_for_shard(shard).is_none()
    }
}

impl DispatchGate for Ownership {
    fn closed_for(&self, key: &str) -> Option<u64> {
        self.closed_for_shard(self.map.shard_of_key(key))
    }
}

#[cfg(test)]
mod tests {
    use frontier::PolitenessKeyMode;

    use super::*;

    fn key_of_shard(map: ShardMap, shard: u32) -> String {
        (0..10_000)
            .map(|i| format!("h{i}.site.test"))
            .find(|k| map.shard_of_key(k) == shard)
            .unwrap()
    }

    #[test]
    fn a_host_goes_only_inside_its_shards_window() {
        let map = ShardMap::new(4, PolitenessKeyMode::Host).unwrap();
        let o = Ownership::leased(map);
        let key = key_of_shard(map, 2);
        assert_eq!(o.closed_for(&key), Some(RECHECK_MS), "not held");
        o.grant(2, Duration::from_secs(60), o.now_ms() + 120_000);
        let wait = o.closed_for(&key).expect("held, in its takeover hold");
        assert!(wait > 59_000 && wait <= 60_000, "{wait}");
        assert!(
            o.holds(2),
            "URLs of a held shard are queued here, hold or not"
        );
        o.grant(2, Duration::ZERO, o.now_ms() + 120_000);
        assert_eq!(o.closed_for(&key), None, "open");
        o.renew(2, o.now_ms());
        assert_eq!(
            o.closed_for(&key),
            Some(RECHECK_MS),
            "fenced: not renewed in time"
        );
        o.renew(2, o.now_ms() + 10_000);
        assert_eq!(o.closed_for(&key), None);
        o.reading_log(2);
        assert_eq!(
            o.closed_for(&key),
            Some(RECHECK_MS),
            "closed while its log is read"
        );
        assert!(o.holds(2) && o.fenced_in(2));
        o.log_read(2);
        assert_eq!(o.closed_for(&key), None);
        o.revoke(2);
        assert_eq!(o.closed_for(&key), Some(RECHECK_MS), "revoked");
        assert!(!o.holds(2));
        o.reading_log(2);
        o.log_read(2);
        assert!(
            !o.holds(2),
            "a revoked shard is not opened by its log's read"
        );
    }

    /// A request in hand is asked about again right before it goes: once the fence has
    /// passed (a node frozen past a third of the TTL before its lease ran out) or the shard
    /// is gone, it does not go, though it was dispatched while the shard was open.
    #[test]
    fn a_request_in_hand_goes_only_while_its_shard_is_open() {
        let map = ShardMap::new(4, PolitenessKeyMode::Host).unwrap();
        let o = Ownership::leased(map);
        assert!(!o.open_now(2), "not held");
        o.grant(2, Duration::from_secs(60), o.now_ms() + 120_000);
        assert!(!o.open_now(2), "in its takeover hold");
        o.grant(2, Duration::ZERO, o.now_ms() + 120_000);
        assert!(o.open_now(2));
        assert!(!o.open_now(1), "another shard, not held");
        // the fence passed without a renewal: what a frozen node finds when it wakes
        o.renew(2, o.now_ms());
        assert!(!o.open_now(2), "fenced");
        o.renew(2, o.now_ms() + 10_000);
        assert!(o.open_now(2));
        o.revoke(2);
        assert!(!o.open_now(2), "revoked");
        let fixed = Ownership::fixed(map, &ShardSet::parse("1", 4).unwrap());
        assert!(fixed.open_now(1) && !fixed.open_now(2));
    }

    #[test]
    fn static_ownership_is_open_for_good() {
        let map = ShardMap::new(4, PolitenessKeyMode::Host).unwrap();
        let o = Ownership::fixed(map, &ShardSet::parse("1-2", 4).unwrap());
        assert_eq!(o.held(), [1, 2]);
        assert_eq!(o.held_text(), "1-2");
        assert_eq!(o.closed_for(&key_of_shard(map, 1)), None);
        assert_eq!(o.closed_for(&key_of_shard(map, 3)), Some(RECHECK_MS));
    }
}
