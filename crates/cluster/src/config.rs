//! The `[cluster]` settings a node runs with, and their validation.

use std::path::PathBuf;
use std::time::Duration;

use frontier::PolitenessKeyMode;
use serde::Deserialize;

use crate::shard::{ShardError, ShardMap, ShardSet};

/// Cluster settings as written (e.g. a `[cluster]` TOML table); [`ClusterConfig::validate`]
/// turns them into [`ClusterSettings`].
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// This node's name: `[A-Za-z0-9_-]`, 1..=64 chars (it is a NATS subject token and a
    /// consumer-name part).
    pub node_id: String,
    /// Comma-separated server URLs, e.g. `nats://10.0.0.5:4222,nats://10.0.0.6:4222`.
    pub nats_url: String,
    /// Shard count, fixed at cluster creation (1..=4096).
    pub shards: u32,
    /// The shards this node owns, e.g. `"0-31,40"`; `"auto"`: shard leases decide (each
    /// live node takes its fair share, docs/cluster.md "Shard leases").
    pub owned_shards: String,
    /// How long a shard lease lasts without renewal (leases only): a dead node's shards
    /// are taken over this long after its last renewal.
    #[serde(default = "default_lease_ttl_ms")]
    pub lease_ttl_ms: u64,
    /// How long a delivered batch may stay unacknowledged before the broker redelivers it.
    #[serde(default = "default_ack_wait_ms")]
    pub ack_wait_ms: u64,
    /// Stream replicas (1 for one nats-server; 3 for a 3-server cluster).
    #[serde(default = "default_replicas")]
    pub replicas: usize,
    /// How long the events stream keeps crawl-log records.
    #[serde(default = "default_events_max_age_s")]
    pub events_max_age_s: u64,
    #[serde(default)]
    pub auth: NatsAuth,
    #[serde(default)]
    pub tls: NatsTls,
}

fn default_ack_wait_ms() -> u64 {
    30_000
}
fn default_lease_ttl_ms() -> u64 {
    15_000
}
fn default_replicas() -> usize {
    1
}
fn default_events_max_age_s() -> u64 {
    7 * 24 * 3600
}

/// How the node authenticates to NATS: at most one of these.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NatsAuth {
    /// A `.creds` file (JWT + nkey seed), as `nsc` writes it.
    pub credentials_file: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    /// An nkey seed (`SU...`).
    pub nkey_seed: Option<String>,
}

/// TLS towards NATS.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NatsTls {
    /// Refuse a server that does not offer TLS.
    #[serde(default)]
    pub required: bool,
    /// Extra PEM root certificates (the system roots are used too).
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM), for servers that verify clients.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// Validated cluster settings.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    pub node_id: String,
    pub nats_url: String,
    pub shard_map: ShardMap,
    /// `owned_shards` as a fixed set; `None`: `"auto"`, shard leases.
    pub owned: Option<ShardSet>,
    /// `lease_ttl_ms` (leases only).
    pub lease_ttl: Duration,
    pub ack_wait: Duration,
    pub replicas: usize,
    pub events_max_age: Duration,
    pub auth: NatsAuth,
    pub tls: NatsTls,
}

/// Why cluster settings are refused; each names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cluster.node_id {0:?}: must be 1-64 characters of A-Z a-z 0-9 _ -")]
    NodeId(String),
    #[error("cluster.nats_url is empty")]
    NatsUrl,
    #[error("cluster.nats_url: server {url:?}: {reason}")]
    NatsServer { url: String, reason: String },
    #[error("cluster.shards: {0}")]
    Shards(ShardError),
    #[error("cluster.owned_shards {text:?}: {source}")]
    OwnedShards { text: String, source: ShardError },
    #[error("cluster.lease_ttl_ms {0}: must be 3000..=600000 (3 s to 10 min)")]
    LeaseTtl(u64),
    #[error("cluster.ack_wait_ms {0}: must be 1000..=43200000 (1 s to 12 h)")]
    AckWait(u64),
    #[error("cluster.replicas {0}: must be 1..=5")]
    Replicas(usize),
    #[error("cluster.events_max_age_s must be at least 1")]
    EventsMaxAge,
    #[error("cluster.auth: set at most one of credentials_file, user+password, token, nkey_seed (found {0})")]
    AuthConflict(String),
    #[error("cluster.auth: user and password go together")]
    UserWithoutPassword,
    #[error("cluster.tls: cert_file and key_file go together")]
    CertWithoutKey,
}

impl ClusterConfig {
    /// A config owning every shard of a `shards`-shard cluster (one node; also tests).
    pub fn single_node(node_id: &str, nats_url: &str, shards: u32) -> ClusterConfig {
        ClusterConfig {
            node_id: node_id.into(),
            nats_url: nats_url.into(),
            shards,
            owned_shards: format!("0-{}", shards.saturating_sub(1)),
            lease_ttl_ms: default_lease_ttl_ms(),
            ack_wait_ms: default_ack_wait_ms(),
            replicas: default_replicas(),
            events_max_age_s: default_events_max_age_s(),
            auth: NatsAuth::default(),
            tls: NatsTls::default(),
        }
    }

    pub fn validate(&self, key_mode: PolitenessKeyMode) -> Result<ClusterSettings, ConfigError> {
        let id = &self.node_id;
        if id.is_empty()
            || id.len() > 64
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ConfigError::NodeId(id.clone()));
        }
        let servers = server_list(&self.nats_url);
        if servers.is_empty() {
            return Err(ConfigError::NatsUrl);
        }
        for url in servers {
            if let Err(e) = url.parse::<async_nats::ServerAddr>() {
                return Err(ConfigError::NatsServer {
                    url,
                    reason: e.to_string(),
                });
            }
        }
        let shard_map = ShardMap::new(self.shards, key_mode).map_err(ConfigError::Shards)?;
        let owned = match self.owned_shards.trim() {
            "auto" => None,
            text => Some(ShardSet::parse(text, self.shards).map_err(|source| {
                ConfigError::OwnedShards {
                    text: self.owned_shards.clone(),
                    source,
                }
            })?),
        };
        if !(3_000..=600_000).contains(&self.lease_ttl_ms) {
            return Err(ConfigError::LeaseTtl(self.lease_ttl_ms));
        }
        if !(1000..=43_200_000).contains(&self.ack_wait_ms) {
            return Err(ConfigError::AckWait(self.ack_wait_ms));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(ConfigError::Replicas(self.replicas));
        }
        if self.events_max_age_s == 0 {
            return Err(ConfigError::EventsMaxAge);
        }
        let a = &self.auth;
        let methods: Vec<&str> = [
            (a.credentials_file.is_some(), "credentials_file"),
            (a.user.is_some() || a.password.is_some(), "user+password"),
            (a.token.is_some(), "token"),
            (a.nkey_seed.is_some(), "nkey_seed"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect();
        if methods.len() > 1 {
            return Err(ConfigError::AuthConflict(methods.join(", ")));
        }
        if a.user.is_some() != a.password.is_some() {
            return Err(ConfigError::UserWithoutPassword);
        }
        if self.tls.cert_file.is_some() != self.tls.key_file.is_some() {
            return Err(ConfigError::CertWithoutKey);
        }
        Ok(ClusterSettings {
            node_id: self.node_id.clone(),
            nats_url: self.nats_url.clone(),
            shard_map,
            owned,
            lease_ttl: Duration::from_millis(self.lease_ttl_ms),
            ack_wait: Duration::from_millis(self.ack_wait_ms),
            replicas: self.replicas,
            events_max_age: Duration::from_secs(self.events_max_age_s),
            auth: self.auth.clone(),
            tls: self.tls.clone(),
        })
    }
}

/// `cluster.nats_url` split at commas: async-nats takes a list of URLs, not one string with
/// commas (it would read `4222,nats` as the port).
pub fn server_list(nats_url: &str) -> Vec<String> {
    nats_url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ClusterConfig {
        ClusterConfig::single_node("node-1", "nats://127.0.0.1:4222", 64)
    }

    fn err(c: ClusterConfig) -> String {
        c.validate(PolitenessKeyMode::Host).unwrap_err().to_string()
    }

    #[test]
    fn a_valid_config_yields_its_shards() {
        let mut c = base();
        c.owned_shards = "0-31,40".into();
        let s = c.validate(PolitenessKeyMode::Host).unwrap();
        assert_eq!(s.owned.map(|o| o.len()), Some(33));
        assert_eq!(s.shard_map.shards(), 64);
        assert_eq!(s.ack_wait, Duration::from_secs(30));
        c.owned_shards = "auto".into();
        let s = c.validate(PolitenessKeyMode::Host).unwrap();
        assert!(s.owned.is_none(), "auto: leases");
        assert_eq!(s.lease_ttl, Duration::from_secs(15));
    }

    #[test]
    fn each_bad_key_is_named() {
        let mut c = base();
        c.node_id = "node.1".into();
        assert!(err(c).starts_with("cluster.node_id \"node.1\""));
        let mut c = base();
        c.owned_shards = "0-64".into();
        assert!(err(c).contains(
            "cluster.owned_shards \"0-64\": shard list item \"0-64\": shard 64 does not exist"
        ));
        let mut c = base();
        c.shards = 0;
        assert!(err(c).starts_with("cluster.shards: shard count 0"));
        let mut c = base();
        c.lease_ttl_ms = 500;
        assert!(err(c).starts_with("cluster.lease_ttl_ms 500"));
        let mut c = base();
        c.ack_wait_ms = 10;
        assert!(err(c).starts_with("cluster.ack_wait_ms 10"));
        let mut c = base();
        c.auth.token = Some("t".into());
        c.auth.nkey_seed = Some("SU".into());
        assert!(err(c).contains("found token, nkey_seed"));
        let mut c = base();
        c.nats_url = "nats://a:4222,nats://b:x".into();
        assert!(err(c).starts_with("cluster.nats_url: server \"nats://b:x\""));
        let mut c = base();
        c.auth.user = Some("u".into());
        assert_eq!(err(c), "cluster.auth: user and password go together");
        let mut c = base();
        c.tls.cert_file = Some("c.pem".into());
        assert_eq!(err(c), "cluster.tls: cert_file and key_file go together");
    }

    #[test]
    fn config_reads_from_json_and_refuses_unknown_keys() {
        let c: ClusterConfig = serde_json::from_str(
            r#"{"node_id":"a","nats_url":"nats://h:4222","shards":8,"owned_shards":"0-3","tls":{"required":true}}"#,
        )
        .unwrap();
        assert!(c.tls.required);
        assert_eq!(c.ack_wait_ms, 30_000);
        let bad = serde_json::from_str::<ClusterConfig>(
            r#"{"node_id":"a","nats_url":"n","shards":8,"owned_shards":"0","shard":1}"#,
        );
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("unknown field `shard`"));
    }
}
