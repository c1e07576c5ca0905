//! Shard leases, the rules: which shards a node should hold, given who is alive and who
//! holds what in the broker's lease bucket. Pure: the broker's view and this node's leases
//! in, a [`LeasePlan`] out; the bucket itself is `lease_store.rs`'s, the fencing clock the
//! daemon's. See docs/cluster.md, "Shard leases".
//!
//! - **Fair share.** With `n` live nodes sorted by id, the node at index `i` aims at
//!   `shards / n` shards, one more when `i < shards % n`: the targets add up to the shard
//!   count, so a node over its target gives shards up while one under it takes free ones,
//!   and the cluster settles after a join, a clean stop or a death.
//! - **Which shards.** Each node ranks shards by `xxh3(node_id:shard)` (rendezvous
//!   hashing): it claims free shards it ranks highest and gives up those it ranks lowest, so
//!   two nodes rarely reach for the same free shard and a shard tends to stay where it is.
//! - **Lost.** A shard this node thought it held whose lease now names another node (or is
//!   gone) is lost at once: no renewal, no dispatch.
//! - **Free.** A shard with no key (never claimed), released by its holder, or whose
//!   holder let it run out.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

/// The value of a shard's lease key (`shards.<n>`), JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseValue {
    /// The holder; `None` once its last holder released it cleanly (then `hold_ms` says
    /// how long the next holder waits before its first request to a host of the shard).
    pub node: Option<String>,
    /// After a clean release: the longest wait the last holder still owed any host of the
    /// shard (its politeness gap, crawl-delay or back-off), counted from the release. A
    /// duration, not an instant: two machines' clocks are never compared.
    #[serde(default)]
    pub hold_ms: u64,
    /// When the holder took it (or, released, when it let it go): unix ms on the writer's
    /// clock, for `frontierd cluster status` to show an age. Never used to judge a lease.
    #[serde(default)]
    pub since_ms: u64,
}

/// A shard's lease as the broker has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The key's value; `None` when there is no key (never claimed, or deleted).
    pub value: Option<LeaseValue>,
    /// The key's revision (0 when there is no key): every write is checked against it.
    pub revision: u64,
    /// Its holder let it run out: the revision has not changed for a whole lease TTL since
    /// this node first saw it (on this node's own clock).
    pub expired: bool,
}

impl Observed {
    /// Nobody holds it: no key, released, or run out.
    pub fn is_free(&self) -> bool {
        self.expired || self.value.as_ref().is_none_or(|v| v.node.is_none())
    }

    fn held_by(&self, node: &str) -> bool {
        self.value
            .as_ref()
            .and_then(|v| v.node.as_deref())
            .is_some_and(|n| n == node)
    }
}

/// What a node does in one lease round.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LeasePlan {
    /// Held and kept: renew (a write checked against the revision this node last wrote).
    pub renew: Vec<u32>,
    /// Free and wanted: claim (create the key, or update a released one at its revision).
    pub claim: Vec<u32>,
    /// Held beyond the fair share: hand off (stop, give the queued URLs back, release).
    pub release: Vec<u32>,
    /// Held no more (another node holds it, or its key is gone): stop at once.
    pub lost: Vec<u32>,
}

/// The shards node `me` aims at holding among `live` nodes (itself counted even when its
/// own membership key is missing, e.g. it expired during a pause).
pub fn fair_share(shards: u32, live: &BTreeSet<String>, me: &str) -> u32 {
    let mut nodes: Vec<&str> = live.iter().map(String::as_str).collect();
    if !live.contains(me) {
        nodes.push(me);
        nodes.sort_unstable();
    }
    let n = nodes.len() as u32;
    let i = nodes.iter().position(|x| *x == me).unwrap_or(0) as u32;
    shards / n + u32::from(i < shards % n)
}

/// How much node `node` wants shard `shard` (rendezvous hashing): higher is keener.
pub fn preference(node: &str, shard: u32) -> u64 {
    xxh3_64(format!("{node}:{shard}").as_bytes())
}

/// One round's plan for node `me` of a `shards`-shard cluster: `held` are the shards it
/// holds (as far as it knows), `observed` the bucket's leases (a shard missing from it has
/// no key), `live` the nodes whose membership key is present.
pub fn plan(
    me: &str,
    shards: u32,
    live: &BTreeSet<String>,
    observed: &BTreeMap<u32, Observed>,
    held: &BTreeSet<u32>,
) -> LeasePlan {
    let none = Observed {
        value: None,
        revision: 0,
        expired: false,
    };
    let seen = |s: u32| observed.get(&s).unwrap_or(&none);
    let mut out = LeasePlan::default();
    let mut keep: Vec<u32> = Vec::new();
    for &s in held {
        if seen(s).held_by(me) {
            keep.push(s);
        } else {
            out.lost.push(s);
        }
    }
    let target = fair_share(shards, live, me) as usize;
    // keenest first: those kept when over the target, those claimed when under it
    let by_preference = |v: &mut Vec<u32>| v.sort_by_key(|&s| std::cmp::Reverse(preference(me, s)));
    by_preference(&mut keep);
    if keep.len() > target {
        out.release = keep.split_off(target);
    } else {
        let mut free: Vec<u32> = (0..shards)
            .filter(|s| !held.contains(s) && seen(*s).is_free())
            .collect();
        by_preference(&mut free);
        free.truncate(target - keep.len());
        out.claim = free;
    }
    keep.sort_unstable();
    out.renew = keep;
    out.release.sort_unstable();
    out.claim.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(nodes: &[&str]) -> BTreeSet<String> {
        nodes.iter().map(|n| n.to_string()).collect()
    }

    fn held_by(node: Option<&str>, revision: u64) -> Observed {
        Observed {
            value: Some(LeaseValue {
                node: node.map(str::to_string),
                hold_ms: 0,
                since_ms: 0,
            }),
            revision,
            expired: false,
        }
    }

    /// Runs rounds of every node against one bucket (claims and releases applied as the
    /// broker would, first writer wins) until nothing changes; returns who holds what.
    fn settle(
        nodes: &[&str],
        shards: u32,
        mut bucket: BTreeMap<u32, Observed>,
    ) -> BTreeMap<u32, String> {
        let members = live(nodes);
        for _round in 0..20 {
            let mut changed = false;
            for &me in nodes {
                let held: BTreeSet<u32> = bucket
                    .iter()
                    .filter(|(_, o)| o.held_by(me))
                    .map(|(s, _)| *s)
                    .collect();
                let p = plan(me, shards, &members, &bucket, &held);
                for s in p.release {
                    bucket.insert(s, held_by(None, 1));
                    changed = true;
                }
                for s in p.claim {
                    if bucket.get(&s).is_none_or(Observed::is_free) {
                        bucket.insert(s, held_by(Some(me), 1));
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        bucket
            .into_iter()
            .filter_map(|(s, o)| o.value.and_then(|v| v.node).map(|n| (s, n)))
            .collect()
    }

    fn counts(owners: &BTreeMap<u32, String>) -> BTreeMap<String, usize> {
        let mut c = BTreeMap::new();
        for n in owners.values() {
            *c.entry(n.clone()).or_default() += 1;
        }
        c
    }

    #[test]
    fn fair_shares_add_up_to_the_shard_count() {
        let nodes = live(&["a", "b", "c"]);
        let shares: Vec<u32> = ["a", "b", "c"]
            .iter()
            .map(|n| fair_share(64, &nodes, n))
            .collect();
        assert_eq!(shares, [22, 21, 21]);
        // a node whose membership key expired still counts itself
        assert_eq!(fair_share(64, &live(&["a", "b"]), "c"), 21);
        assert_eq!(fair_share(3, &live(&["a"]), "a"), 3);
    }

    #[test]
    fn three_nodes_from_an_empty_bucket_split_every_shard_once() {
        let owners = settle(&["n0", "n1", "n2"], 12, BTreeMap::new());
        assert_eq!(owners.len(), 12, "every shard held: {owners:?}");
        let c = counts(&owners);
        assert!(c.values().all(|&n| n == 4), "{c:?}");
    }

    #[test]
    fn a_dead_nodes_shards_go_to_the_survivors_once_its_leases_expire() {
        let mut bucket = BTreeMap::new();
        for s in 0..12 {
            let owner = ["n0", "n1", "n2"][s as usize % 3];
            let mut o = held_by(Some(owner), 5);
            // n2 is dead: its leases ran out
            o.expired = owner == "n2";
            bucket.insert(s, o);
        }
        let owners = settle(&["n0", "n1"], 12, bucket);
        assert_eq!(owners.len(), 12);
        let c = counts(&owners);
        assert_eq!(c["n0"] + c["n1"], 12);
        assert!(c.values().all(|&n| n == 6), "{c:?}");
    }

    #[test]
    fn a_joining_node_gets_its_share_from_the_others() {
        let mut bucket = BTreeMap::new();
        for s in 0..12 {
            bucket.insert(s, held_by(Some(["n0", "n1"][s as usize % 2]), 3));
        }
        let owners = settle(&["n0", "n1", "n2"], 12, bucket);
        let c = counts(&owners);
        assert_eq!(owners.len(), 12);
        assert!(c.values().all(|&n| n == 4), "{c:?}");
    }

    #[test]
    fn a_shard_taken_by_another_node_is_lost_not_renewed() {
        let mut bucket = BTreeMap::new();
        bucket.insert(0, held_by(Some("n1"), 9));
        bucket.insert(1, held_by(Some("n0"), 4));
        let held: BTreeSet<u32> = [0, 1, 2].into();
        let p = plan("n0", 3, &live(&["n0", "n1"]), &bucket, &held);
        // 0: another node's now; 2: gone
        assert_eq!(p.lost, [0, 2]);
        assert_eq!(p.renew, [1]);
        // share 2 of 3, holding 1: nothing free but the shard it just lost, which it does
        // not take back in the same round (and never 0)
        assert!(p.claim.is_empty(), "{p:?}");
        assert!(p.release.is_empty());
    }

    #[test]
    fn over_its_share_a_node_releases_the_shards_it_ranks_lowest() {
        let mut bucket = BTreeMap::new();
        for s in 0..8 {
            bucket.insert(s, held_by(Some("n0"), 1));
        }
        let held: BTreeSet<u32> = (0..8).collect();
        let p = plan("n0", 8, &live(&["n0", "n1"]), &bucket, &held);
        assert_eq!(p.renew.len(), 4);
        assert_eq!(p.release.len(), 4);
        let lowest_kept = p.renew.iter().map(|&s| preference("n0", s)).min().unwrap();
        let highest_released = p
            .release
            .iter()
            .map(|&s| preference("n0", s))
            .max()
            .unwrap();
        assert!(lowest_kept > highest_released);
    }
}
