//! What `frontierd cluster status` reads: each node's last published status (a limits
//! stream keeping one message per node) and each shard's consumer counts, read without
//! creating anything, gathered into a [`ClusterStatus`] for the command to print.

use async_nats::jetstream;
use futures_util::StreamExt;

use crate::broker::{
    node_subject, shard_consumer_name, BoxError, BrokerError, NODES_STREAM, URL_STREAM,
};
use crate::consume::ShardBacklog;
use crate::shard::ShardSet;

/// Publish this node's status (any bytes; frontierd writes JSON) and wait for the ack.
pub async fn publish_node_status(
    js: &jetstream::Context,
    node_id: &str,
    status: Vec<u8>,
) -> Result<(), BrokerError> {
    let subject = node_subject(node_id);
    let err = |e: BoxError| BrokerError::Publish {
        subject: subject.clone(),
        source: e,
    };
    js.publish(subject.clone(), status.into())
        .await
        .map_err(|e| err(Box::new(e)))?
        .await
        .map_err(|e| err(Box::new(e)))?;
    Ok(())
}

/// Every node's last status, `(node_id, body)`, by node id.
pub async fn node_statuses(js: &jetstream::Context) -> Result<Vec<(String, Vec<u8>)>, BrokerError> {
    let err = |e: BoxError| BrokerError::Stream {
        stream: NODES_STREAM.into(),
        source: e,
    };
    let nodes = js
        .get_stream(NODES_STREAM)
        .await
        .map_err(|e| err(Box::new(e)))?;
    let info = nodes
        .info_with_subjects("frontierd.nodes.*")
        .await
        .map_err(|e| err(Box::new(e)))?;
    let subjects: Vec<String> = info
        .filter_map(|s| async move { s.ok().map(|(subject, _)| subject) })
        .collect()
        .await;
    let mut out = Vec::new();
    for subject in subjects {
        let message = nodes
            .get_last_raw_message_by_subject(&subject)
            .await
            .map_err(|e| err(Box::new(e)))?;
        let node = subject
            .strip_prefix("frontierd.nodes.")
            .unwrap_or(&subject)
            .to_string();
        out.push((node, message.payload.to_vec()));
    }
    out.sort();
    Ok(out)
}

/// A shard's consumer counts; None when no node ever consumed the shard (its consumer does
/// not exist: URLs published to it wait in the stream, counted by [`shard_stored`]).
pub async fn shard_backlog(
    js: &jetstream::Context,
    shard: u32,
) -> Result<Option<ShardBacklog>, BrokerError> {
    let name = shard_consumer_name(shard);
    let err = |e: BoxError| BrokerError::Consumer {
        shard,
        consumer: name.clone(),
        source: e,
    };
    let stream = js
        .get_stream(URL_STREAM)
        .await
        .map_err(|e| err(Box::new(e)))?;
    let info = match stream.consumer_info(&name).await {
        Ok(info) => info,
        // JetStream API error 10014
        Err(e) if e.to_string().contains("consumer not found") => return Ok(None),
        Err(e) => return Err(err(Box::new(e))),
    };
    Ok(Some(ShardBacklog {
        pending: info.num_pending,
        ack_pending: info.num_ack_pending,
        redelivered: info.num_redelivered,
    }))
}

/// Messages stored for a shard in the URL stream (delivered-but-unacknowledged included).
pub async fn shard_stored(js: &jetstream::Context, shard: u32) -> Result<u64, BrokerError> {
    let err = |e: BoxError| BrokerError::Stream {
        stream: URL_STREAM.into(),
        source: e,
    };
    let stream = js
        .get_stream(URL_STREAM)
        .await
        .map_err(|e| err(Box::new(e)))?;
    let subject = crate::broker::url_subject(shard);
    let info = stream
        .info_with_subjects(subject.clone())
        .await
        .map_err(|e| err(Box::new(e)))?;
    let counts: Vec<u64> = info
        .filter_map(|s| async move { s.ok().map(|(_, n)| n as u64) })
        .collect()
        .await;
    Ok(counts.into_iter().sum())
}

/// What `frontierd cluster status` shows: each shard with its owners and counts, and each
/// node as it last reported itself.
#[derive(Debug)]
pub struct ClusterStatus {
    pub shards: Vec<ShardStatus>,
    pub nodes: Vec<NodeReport>,
}

/// One shard.
#[derive(Debug)]
pub struct ShardStatus {
    pub shard: u32,
    /// The nodes that say they own it: one, none (nobody consumes it), or several (a
    /// conflict).
    pub owners: Vec<String>,
    /// Its lease in the broker (shard leases): its holder (`node: None` released and not
    /// yet taken: a move in progress) and since when; `None` no lease (fixed
    /// `owned_shards`, or never claimed).
    pub lease: Option<crate::LeaseValue>,
    pub counts: ShardCounts,
}

/// A shard's backlog.
#[derive(Debug)]
pub enum ShardCounts {
    /// Its consumer's counts.
    Consumer(ShardBacklog),
    /// No node ever consumed it: the messages stored for it.
    Stored(u64),
}

/// A node's last published status; a field it lacks (or a status that is not JSON) reads
/// as its zero, and `owned_shards` as `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    pub id: String,
    /// When it published this, unix ms.
    pub time_ms: u64,
    pub connected: bool,
    /// Its `cluster.owned_shards`, as it wrote it.
    pub owned_shards: Option<String>,
    pub urls_received_per_s: f64,
    pub links_published_per_s: f64,
    pub pages_per_s: f64,
    /// Links in its outbox.
    pub outbox: u64,
}

impl NodeReport {
    /// Read a node's status body (JSON, as frontierd publishes it).
    pub fn parse(id: String, body: &[u8]) -> NodeReport {
        let s: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
        NodeReport {
            id,
            time_ms: s["time_ms"].as_u64().unwrap_or(0),
            connected: s["connected"].as_bool().unwrap_or(false),
            owned_shards: s["owned_shards"].as_str().map(str::to_string),
            urls_received_per_s: s["urls_received_per_s"].as_f64().unwrap_or(0.0),
            links_published_per_s: s["links_published_per_s"].as_f64().unwrap_or(0.0),
            pages_per_s: s["pages_per_s"].as_f64().unwrap_or(0.0),
            outbox: s["outbox"].as_u64().unwrap_or(0),
        }
    }
}

/// Gather the status of a cluster of `shards` shards: every node's last status, then each
/// shard's owners (the nodes whose status names it), its lease and counts.
pub async fn cluster_status(
    js: &jetstream::Context,
    shards: u32,
) -> Result<ClusterStatus, BrokerError> {
    let nodes: Vec<NodeReport> = node_statuses(js)
        .await?
        .into_iter()
        .map(|(id, body)| NodeReport::parse(id, &body))
        .collect();
    let owned: Vec<Option<ShardSet>> = nodes
        .iter()
        .map(|n| {
            n.owned_shards
                .as_deref()
                .and_then(|s| ShardSet::parse(s, shards).ok())
        })
        .collect();
    // a lease bucket that cannot be read leaves the lease column empty; the rest still shows
    let leases = crate::lease_store::lease_holders(js).await.ok().flatten();
    // with shard leases, a node out of the member list (dead, or stopped) owns nothing,
    // whatever its last status said
    let member = |id: &str| leases.as_ref().is_none_or(|l| l.live.contains(id));
    let mut out = Vec::new();
    for shard in 0..shards {
        let owners = nodes
            .iter()
            .zip(&owned)
            .filter(|(n, o)| member(&n.id) && o.as_ref().is_some_and(|o| o.contains(shard)))
            .map(|(n, _)| n.id.clone())
            .collect();
        let counts = match shard_backlog(js, shard).await? {
            Some(b) => ShardCounts::Consumer(b),
            None => ShardCounts::Stored(shard_stored(js, shard).await?),
        };
        out.push(ShardStatus {
            shard,
            owners,
            lease: leases
                .as_ref()
                .and_then(|l| l.shards.get(&shard))
                .and_then(|o| o.value.clone()),
            counts,
        });
    }
    Ok(ClusterStatus { shards: out, nodes })
}

#[cfg(test)]
mod tests {
    use super::NodeReport;

    #[test]
    fn a_node_status_reads_field_by_field() {
        let body = br#"{"time_ms": 5, "connected": true, "owned_shards": "0-3",
            "urls_received_per_s": 1.5, "outbox": "many"}"#;
        let n = NodeReport::parse("n1".into(), body);
        assert_eq!(n.time_ms, 5);
        assert!(n.connected);
        assert_eq!(n.owned_shards.as_deref(), Some("0-3"));
        assert_eq!(n.urls_received_per_s, 1.5);
        assert_eq!((n.pages_per_s, n.outbox), (0.0, 0));
        let garbage = NodeReport::parse("n2".into(), b"not json");
        assert_eq!((garbage.time_ms, garbage.owned_shards), (0, None));
    }
}
