//! What `frontierd cluster status` reads: each node's last published status (a limits
//! stream keeping one message per node) and each shard's consumer counts, read without
//! creating anything.

use async_nats::jetstream;
use futures_util::StreamExt;

use crate::broker::{
    node_subject, shard_consumer_name, BoxError, BrokerError, NODES_STREAM, URL_STREAM,
};
use crate::consume::ShardBacklog;

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
