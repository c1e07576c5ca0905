//! Shard leases in the broker, two JetStream key-value buckets:
//!
//! - `FRONTIERD_MEMBERS`: one key per live node (`<node_id>`), aged out by the broker one
//!   lease TTL after its last write: a node that stops writing leaves the member list.
//! - `FRONTIERD_LEASES`: one key per shard (`shards.<n>`, a [`LeaseValue`]), kept until
//!   written again. Its holder renews it (a new revision) every third of the TTL; whether a
//!   lease ran out is judged by each observer on its own monotonic clock (the revision has
//!   not changed for a whole TTL since it first saw it), never by comparing two machines'
//!   clocks. Not aged out by the broker: a missing key then always means "never claimed",
//!   and only a lease that ran out (its holder may have been fetching until the end) needs
//!   the takeover hold.
//!
//! Every write of a shard key is checked against the revision the writer last saw (create
//! when there is no key), so two nodes can never both take the same shard: the second write
//! fails. What to claim, renew and release is `lease.rs`'s; `keeper.rs` runs the rounds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_nats::jetstream::kv::{self, Operation};
use async_nats::jetstream::stream;
use bytes::Bytes;
use futures_util::StreamExt;

use crate::broker::BoxError;
use crate::lease::{LeaseValue, Observed};
use crate::JetStream;

/// The bucket of shard leases.
pub const LEASE_BUCKET: &str = "FRONTIERD_LEASES";
/// The bucket of live nodes.
pub const MEMBER_BUCKET: &str = "FRONTIERD_MEMBERS";

fn shard_key(shard: u32) -> String {
    format!("shards.{shard}")
}

/// A lease operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another node wrote the key since this node read it: the shard is not ours.
    #[error("shard {shard}: the lease changed since revision {revision} (another node took it)")]
    Conflict { shard: u32, revision: u64 },
    #[error("{bucket}: {what}: {source}")]
    Broker {
        bucket: &'static str,
        what: String,
        source: BoxError,
    },
    #[error("lease buckets: {what}: no answer within {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("bucket {MEMBER_BUCKET} keeps keys {found:?}, this node is configured for a lease TTL of {configured:?}: every node must use the same cluster.lease_ttl")]
    TtlMismatch {
        found: Duration,
        configured: Duration,
    },
}

fn broker(bucket: &'static str, what: impl Into<String>) -> impl FnOnce(BoxError) -> LeaseError {
    let what = what.into();
    move |source| LeaseError::Broker {
        bucket,
        what,
        source,
    }
}

/// What the bucket says at one moment.
#[derive(Debug, Default, Clone)]
pub struct LeaseSnapshot {
    /// Nodes whose membership key is present.
    pub live: BTreeSet<String>,
    /// Shards with a key (held or released), by shard; `expired` is false here (the
    /// keeper judges it).
    pub shards: BTreeMap<u32, Observed>,
}

/// The two buckets, opened.
#[derive(Clone)]
pub struct LeaseStore {
    leases: kv::Store,
    members: kv::Store,
}

/// Open a bucket, or create it: its stream made here as async-nats' `create_key_value`
/// would (`KV_<bucket>`, subjects `$KV.<bucket>.>`, one value per key, roll-ups, direct
/// gets, discard new), because that call first reads the account's JetStream limits, whose
/// answer from nats-server 2.9 (Debian 12's) async-nats 0.51 cannot read.
async fn bucket(
    js: &JetStream,
    name: &'static str,
    description: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, LeaseError> {
    if let Ok(kv) = js.get_key_value(name).await {
        return Ok(kv);
    }
    let config = stream::Config {
        name: format!("KV_{name}"),
        description: Some(description.to_string()),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        // the broker's default duplicate window (2 min) may not exceed max_age
        duplicate_window: if max_age.is_zero() {
            Duration::ZERO
        } else {
            max_age.min(Duration::from_secs(120))
        },
        storage: stream::StorageType::File,
        num_replicas: replicas.max(1),
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        ..Default::default()
    };
    if let Err(e) = js.get_or_create_stream(config).await {
        return Err(broker(name, "creating it")(Box::new(e)));
    }
    js.get_key_value(name)
        .await
        .map_err(|e| broker(name, "opening it")(Box::new(e)))
}

/// The keys of a bucket, from its stream's subjects as its leader counts them (a stream
/// info request with a subject filter). Not `kv::Store::keys`, which makes a consumer for
/// every listing: with a server of a three-server broker down, consumer creations queued
/// behind the meta leader's election and lease rounds timed out for tens of seconds.
async fn keys_of(bucket: &kv::Store, name: &'static str) -> Result<Vec<String>, LeaseError> {
    let prefix = format!("$KV.{name}.");
    let mut subjects = bucket
        .stream
        .info_with_subjects(format!("{prefix}>"))
        .await
        .map_err(|e| broker(name, "listing keys")(Box::new(e)))?;
    let mut keys = Vec::new();
    while let Some(next) = subjects.next().await {
        let (subject, _) = next.map_err(|e| broker(name, "listing keys")(Box::new(e)))?;
        if let Some(key) = subject.strip_prefix(&prefix) {
            keys.push(key.to_string());
        }
    }
    Ok(keys)
}

impl LeaseStore {
    /// Create the buckets (member keys live `ttl` after their last write), or open them
    /// and check that the members' was made with the same TTL.
    pub async fn open(
        js: &JetStream,
        ttl: Duration,
        replicas: usize,
    ) -> Result<LeaseStore, LeaseError> {
        let leases = bucket(
            js,
            LEASE_BUCKET,
            "frontierd shard leases",
            Duration::ZERO,
            replicas,
        )
        .await?;
        let members = bucket(js, MEMBER_BUCKET, "frontierd live nodes", ttl, replicas).await?;
        let found = members
            .status()
            .await
            .map_err(|e| broker(MEMBER_BUCKET, "reading its configuration")(Box::new(e)))?
            .max_age();
        if found != ttl {
            return Err(LeaseError::TtlMismatch {
                found,
                configured: ttl,
            });
        }
        Ok(LeaseStore { leases, members })
    }

    /// Say that `node` is alive (for one more TTL).
    pub async fn heartbeat(&self, node: &str) -> Result<(), LeaseError> {
        self.members
            .put(node, Bytes::from_static(b"1"))
            .await
            .map(|_| ())
            .map_err(|e| broker(MEMBER_BUCKET, format!("writing {node}"))(Box::new(e)))
    }

    /// `node` stops: its membership key goes at once (the others rebalance without
    /// waiting for it to age out).
    pub async fn leave(&self, node: &str) -> Result<(), LeaseError> {
        self.members
            .delete(node)
            .await
            .map_err(|e| broker(MEMBER_BUCKET, format!("deleting {node}"))(Box::new(e)))
    }

    /// Who is alive and who holds what.
    pub async fn snapshot(&self) -> Result<LeaseSnapshot, LeaseError> {
        let mut out = LeaseSnapshot::default();
        for key in keys_of(&self.members, MEMBER_BUCKET).await? {
            let entry = self
                .members
                .entry(&key)
                .await
                .map_err(|e| broker(MEMBER_BUCKET, format!("reading {key}"))(Box::new(e)))?;
            // a node that left cleanly has a delete marker until it ages out
            if entry.is_some_and(|e| e.operation == Operation::Put) {
                out.live.insert(key);
            }
        }
        out.shards = self.snapshot_shards().await?;
        Ok(out)
    }

    /// Every shard key present.
    async fn snapshot_shards(&self) -> Result<BTreeMap<u32, Observed>, LeaseError> {
        let mut out = BTreeMap::new();
        for key in keys_of(&self.leases, LEASE_BUCKET).await? {
            let Some(shard) = key.strip_prefix("shards.").and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some(o) = self.observe(shard).await? {
                out.insert(shard, o);
            }
        }
        Ok(out)
    }

    /// One shard's key, if present (a deleted key reads as absent).
    async fn observe(&self, shard: u32) -> Result<Option<Observed>, LeaseError> {
        let entry = self.leases.entry(shard_key(shard)).await.map_err(|e| {
            broker(LEASE_BUCKET, format!("reading {}", shard_key(shard)))(Box::new(e))
        })?;
        Ok(entry
            .filter(|e| e.operation == Operation::Put)
            .map(|e| Observed {
                // a value this version cannot read counts as held by nobody we know: not free
                value: Some(serde_json::from_slice(&e.value).unwrap_or(LeaseValue {
                    node: Some(String::from("?")),
                    hold_ms: 0,
                    since_ms: 0,
                })),
                revision: e.revision,
                expired: false,
            }))
    }

    /// The value of a lease `node` holds since `since_ms`.
    fn held_by(node: &str, since_ms: u64) -> Bytes {
        Self::encode(&LeaseValue {
            node: Some(node.to_string()),
            hold_ms: 0,
            since_ms,
        })
    }

    fn encode(value: &LeaseValue) -> Bytes {
        Bytes::from(serde_json::to_vec(value).unwrap_or_default())
    }

    /// Take a free shard: create its key, or write over a released or expired one at its
    /// revision.
    /// Returns the new revision; [`LeaseError::Conflict`] when another node was first.
    pub async fn claim(
        &self,
        shard: u32,
        node: &str,
        seen: Option<&Observed>,
        since_ms: u64,
    ) -> Result<u64, LeaseError> {
        let value = Self::held_by(node, since_ms);
        let key = shard_key(shard);
        match seen.filter(|o| o.revision > 0) {
            None => self
                .leases
                .create(&key, value)
                .await
                .map_err(|e| match e.kind() {
                    kv::CreateErrorKind::AlreadyExists => {
                        LeaseError::Conflict { shard, revision: 0 }
                    }
                    _ => broker(LEASE_BUCKET, format!("creating {key}"))(Box::new(e)),
                }),
            Some(o) => self.update(shard, o.revision, value).await,
        }
    }

    /// Renew a held shard (written again at the revision this node last wrote).
    pub async fn renew(
        &self,
        shard: u32,
        node: &str,
        revision: u64,
        since_ms: u64,
    ) -> Result<u64, LeaseError> {
        self.update(shard, revision, Self::held_by(node, since_ms))
            .await
    }

    /// Release a held shard: the next holder waits `hold_ms` before its first request to a
    /// host of it.
    pub async fn release(
        &self,
        shard: u32,
        revision: u64,
        hold_ms: u64,
        since_ms: u64,
    ) -> Result<u64, LeaseError> {
        let value = Self::encode(&LeaseValue {
            node: None,
            hold_ms,
            since_ms,
        });
        self.update(shard, revision, value).await
    }

    async fn update(&self, shard: u32, revision: u64, value: Bytes) -> Result<u64, LeaseError> {
        let key = shard_key(shard);
        self.leases
            .update(&key, value, revision)
            .await
            .map_err(|e| match e.kind() {
                kv::UpdateErrorKind::WrongLastRevision => LeaseError::Conflict { shard, revision },
                _ => broker(LEASE_BUCKET, format!("writing {key}"))(Box::new(e)),
            })
    }
}

/// The leases as `frontierd cluster status` shows them: every shard key's value, and the
/// live members; `Ok(None)` when the cluster has no lease bucket (fixed `owned_shards`
/// everywhere).
pub async fn lease_holders(js: &JetStream) -> Result<Option<LeaseSnapshot>, LeaseError> {
    let (Ok(leases), Ok(members)) = (
        js.get_key_value(LEASE_BUCKET).await,
        js.get_key_value(MEMBER_BUCKET).await,
    ) else {
        return Ok(None);
    };
    LeaseStore { leases, members }.snapshot().await.map(Some)
}
