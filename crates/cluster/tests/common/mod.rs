//! What the broker tests share: the nats-server harness (crates/nats-harness, also used by
//! the end-to-end suite) and node settings on it.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use cluster::{ClusterConfig, ClusterSettings};
use frontier::PolitenessKeyMode;

pub use nats_harness::NatsServer;

/// Settings of a node owning `owned` of `shards` shards on `server`.
pub fn node_settings(server: &NatsServer, node: &str, shards: u32, owned: &str) -> ClusterSettings {
    let mut c = ClusterConfig::single_node(node, &server.url(), shards);
    c.owned_shards = owned.into();
    c.validate(PolitenessKeyMode::Host)
        .expect("valid test config")
}

/// Poll `check` until it returns `Some`, failing after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
