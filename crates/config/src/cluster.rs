//! `[cluster]`: multi-node mode over NATS JetStream (docs/cluster.md). Off by default: the
//! single node with its spool and API intake stays the default. The keys map onto
//! [`cluster::ClusterConfig`], whose validation names each key; the daemon-side keys
//! (`intake_router`, `publish_events`, `status_interval`) are checked here.

use std::time::Duration;

use serde::Deserialize;

use super::{range_dur, ConfigError, Dur};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSection {
    /// Run as a cluster node (everything below is read only when true).
    pub enabled: bool,
    pub node_id: String,
    pub nats_url: String,
    pub shards: u32,
    pub owned_shards: String,
    pub lease_ttl: Dur,
    pub ack_wait_ms: u64,
    pub replicas: usize,
    pub events_max_age_s: u64,
    /// Route lists published to `frontierd.intake` (every router shares one consumer).
    pub intake_router: bool,
    /// Publish each crawl-log record to `frontierd.events.<node_id>`.
    pub publish_events: bool,
    /// How often this node publishes its status (owned shards, rates) for
    /// `frontierd cluster status`.
    pub status_interval: Dur,
    pub auth: cluster::NatsAuth,
    pub tls: cluster::NatsTls,
}

impl Default for ClusterSection {
    fn default() -> Self {
        let lib = cluster::ClusterConfig::single_node("", "nats://127.0.0.1:4222", 64);
        ClusterSection {
            enabled: false,
            node_id: lib.node_id,
            nats_url: lib.nats_url,
            shards: lib.shards,
            owned_shards: "auto".into(),
            lease_ttl: Dur(Duration::from_millis(lib.lease_ttl_ms)),
            ack_wait_ms: lib.ack_wait_ms,
            replicas: lib.replicas,
            events_max_age_s: lib.events_max_age_s,
            intake_router: true,
            publish_events: true,
            status_interval: Dur(Duration::from_secs(5)),
            auth: lib.auth,
            tls: lib.tls,
        }
    }
}

/// `[cluster]` checked: the library's settings plus the node's own keys (the cluster
/// crate's `NodeSettings`, which its `Node` runs with).
pub use cluster::NodeSettings as ClusterNodeSettings;

impl ClusterSection {
    /// The library's view of the section.
    pub fn library_config(&self) -> cluster::ClusterConfig {
        cluster::ClusterConfig {
            node_id: self.node_id.clone(),
            nats_url: self.nats_url.clone(),
            shards: self.shards,
            owned_shards: self.owned_shards.clone(),
            lease_ttl_ms: self.lease_ttl.0.as_millis() as u64,
            ack_wait_ms: self.ack_wait_ms,
            replicas: self.replicas,
            events_max_age_s: self.events_max_age_s,
            auth: self.auth.clone(),
            tls: self.tls.clone(),
        }
    }

    /// None when the section is off; the shard map uses the daemon's `politeness.key`, so
    /// a URL's shard follows the same key the frontier's politeness does.
    pub fn check(
        &self,
        key_mode: frontier::PolitenessKeyMode,
        takeover_hold: Duration,
    ) -> Result<Option<ClusterNodeSettings>, ConfigError> {
        if !self.enabled {
            return Ok(None);
        }
        range_dur("cluster.lease_ttl", self.lease_ttl, 3_000, 600_000)?;
        range_dur(
            "cluster.status_interval",
            self.status_interval,
            100,
            3_600_000,
        )?;
        let lib = self.library_config().validate(key_mode)?;
        Ok(Some(ClusterNodeSettings {
            lib,
            intake_router: self.intake_router,
            publish_events: self.publish_events,
            status_interval: self.status_interval.0,
            takeover_hold,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn check(text: &str) -> Result<crate::Settings, String> {
        Config::parse(text, "t")
            .map_err(|e| e.to_string())?
            .check(None)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn off_by_default_and_in_the_embedded_file() {
        let s = Config::load(None).unwrap().check(None).unwrap();
        assert!(s.cluster.is_none());
        assert!(!s.raw.cluster.enabled);
    }

    #[test]
    fn an_enabled_section_yields_its_shards_and_keys() {
        let s = check(
            "[cluster]\nenabled = true\nnode_id = \"n1\"\nnats_url = \"nats://127.0.0.1:4222\"\nshards = 16\nowned_shards = \"0-7\"\nack_wait_ms = 2000\nintake_router = false\n",
        )
        .unwrap();
        let c = s.cluster.unwrap();
        assert_eq!(c.lib.owned.map(|o| o.len()), Some(8));
        assert_eq!(c.lib.shard_map.shards(), 16);
        assert_eq!(c.lib.ack_wait, std::time::Duration::from_secs(2));
        assert!(!c.intake_router);
        assert!(c.publish_events);
    }

    #[test]
    fn a_bad_value_names_the_key() {
        let e = check("[cluster]\nenabled = true\nnode_id = \"n.1\"\n").unwrap_err();
        assert!(e.contains("cluster.node_id \"n.1\""), "{e}");
        let e = check("[cluster]\nenabled = true\nnode_id = \"n1\"\nowned_shards = \"0-64\"\n")
            .unwrap_err();
        assert!(e.contains("cluster.owned_shards \"0-64\""), "{e}");
        let e = check("[cluster]\nenabled = true\nshard = 3\n").unwrap_err();
        assert!(e.contains("unknown field `shard`"), "{e}");
        // off: not checked (the default node_id is empty)
        assert!(check("[cluster]\nenabled = false\n").is_ok());
    }

    #[test]
    fn the_deploy_example_node_config_checks() {
        let text = include_str!("../../../deploy/cluster/frontierd-node.toml");
        let s = check(text).unwrap();
        let c = s.cluster.unwrap();
        assert_eq!(c.lib.node_id, "node-1");
        assert!(c.lib.owned.is_none(), "shard leases");
        assert_eq!(c.lib.lease_ttl, std::time::Duration::from_secs(15));
        assert_eq!(c.lib.replicas, 3);
        assert_eq!(cluster::server_list(&c.lib.nats_url).len(), 3);
    }
}
