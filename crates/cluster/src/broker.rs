//! Connecting to NATS and setting up the streams.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use async_nats::{ConnectOptions, Event};

use crate::config::{server_list, ClusterSettings};

/// The stream that carries URLs, one subject per shard.
pub const URL_STREAM: &str = "FRONTIERD_URLS";
/// The stream of URL lists not yet split by shard.
pub const INTAKE_STREAM: &str = "FRONTIERD_INTAKE";
/// Where anyone may publish a URL list without knowing the shard map.
pub const INTAKE_SUBJECT: &str = "frontierd.intake";
/// The stream of crawl-log records, one subject per node.
pub const EVENTS_STREAM: &str = "FRONTIERD_EVENTS";

/// `frontierd.urls.<shard>`: the subject a shard's URLs are published to.
pub fn url_subject(shard: u32) -> String {
    format!("frontierd.urls.{shard}")
}

/// `frontierd.events.<node_id>`: the subject a node's crawl-log records are published to.
pub fn events_subject(node_id: &str) -> String {
    format!("frontierd.events.{node_id}")
}

/// The durable consumer of one shard. Named after the shard, not the node, so a shard moved
/// to another node keeps its place in the stream.
pub fn shard_consumer_name(shard: u32) -> String {
    format!("shard-{shard}")
}

/// What the stream description records, so a node configured with another shard count
/// refuses to start instead of routing hosts to the wrong owners.
fn url_stream_description(shards: u32) -> String {
    format!("frontierd URLs by politeness-key shard; shards={shards}")
}

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A broker operation that failed; the operation and its object are named. Every one of
/// these is worth retrying after a pause: nothing was acknowledged that was not done.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("connecting to NATS at {url}: {source}")]
    Connect { url: String, source: BoxError },
    #[error("reading NATS credentials file {path}: {source}")]
    Credentials {
        path: String,
        source: std::io::Error,
    },
    #[error("stream {stream}: {source}")]
    Stream { stream: String, source: BoxError },
    #[error("stream {stream} was created for {found} shards, this node is configured for {configured}: the shard count is fixed at cluster creation")]
    ShardCountMismatch {
        stream: String,
        found: String,
        configured: u32,
    },
    #[error("consumer {consumer} of shard {shard}: {source}")]
    Consumer {
        shard: u32,
        consumer: String,
        source: BoxError,
    },
    #[error("fetching from shard {shard}: {source}")]
    Fetch { shard: u32, source: BoxError },
    #[error("acknowledging message {sequence} of shard {shard}: {source}")]
    Ack {
        shard: u32,
        sequence: u64,
        source: BoxError,
    },
    #[error("fetching from the intake stream: {source}")]
    IntakeFetch { source: BoxError },
    #[error("acknowledging intake message {sequence}: {source}")]
    IntakeAck { sequence: u64, source: BoxError },
    #[error("publishing to {subject}: {source}")]
    Publish { subject: String, source: BoxError },
}

/// Connection state as the client's event callback sees it, for logs and metrics.
#[derive(Debug, Default)]
pub struct ConnectionState {
    connected: AtomicBool,
    disconnects: AtomicU64,
    reconnects: AtomicU64,
}

impl ConnectionState {
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
    /// Times the connection was lost.
    pub fn disconnects(&self) -> u64 {
        self.disconnects.load(Ordering::Relaxed)
    }
    /// Times it came back after a loss.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }
}

/// Back-off between reconnect attempts: 100 ms doubling to 5 s, forever (the client never
/// gives up: a broker outage pauses the cluster, it does not end it).
pub fn reconnect_delay(attempt: usize) -> Duration {
    let exp = attempt.saturating_sub(1).min(6) as u32;
    Duration::from_millis(100u64 << exp).min(Duration::from_secs(5))
}

/// Connect options from the settings: name, credentials, TLS, back-off, logging. The daemon
/// adds `retry_on_initial_connect` so it starts (and crawls locally) while the broker is down.
pub async fn connect_options(
    settings: &ClusterSettings,
    state: Arc<ConnectionState>,
) -> Result<ConnectOptions, BrokerError> {
    let auth = &settings.auth;
    let mut opts = ConnectOptions::new();
    if let Some(path) = &auth.credentials_file {
        opts = opts
            .credentials_file(path)
            .await
            .map_err(|source| BrokerError::Credentials {
                path: path.display().to_string(),
                source,
            })?;
    }
    if let (Some(user), Some(pass)) = (&auth.user, &auth.password) {
        opts = opts.user_and_password(user.clone(), pass.clone());
    }
    if let Some(token) = &auth.token {
        opts = opts.token(token.clone());
    }
    if let Some(seed) = &auth.nkey_seed {
        opts = opts.nkey(seed.clone());
    }
    let tls = &settings.tls;
    if tls.required {
        opts = opts.require_tls(true);
    }
    if let Some(ca) = &tls.ca_file {
        opts = opts.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
        opts = opts.add_client_certificate(cert.clone(), key.clone());
    }
    let node = settings.node_id.clone();
    Ok(opts
        .name(format!("frontierd-{}", settings.node_id))
        .max_reconnects(None)
        .reconnect_delay_callback(reconnect_delay)
        .event_callback(move |event| {
            let state = state.clone();
            let node = node.clone();
            async move {
                match event {
                    Event::Connected => {
                        if state.disconnects() > 0 {
                            state.reconnects.fetch_add(1, Ordering::Relaxed);
                        }
                        state.connected.store(true, Ordering::Relaxed);
                        tracing::info!(node = %node, "NATS connection up");
                    }
                    Event::Disconnected => {
                        state.connected.store(false, Ordering::Relaxed);
                        state.disconnects.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(node = %node, "NATS connection lost; reconnecting with back-off");
                    }
                    other => tracing::warn!(node = %node, event = %other, "NATS event"),
                }
            }
        }))
}

/// Connect to NATS (failing now if no server answers) and return the client with its
/// connection state.
pub async fn connect(
    settings: &ClusterSettings,
) -> Result<(async_nats::Client, Arc<ConnectionState>), BrokerError> {
    let state = Arc::new(ConnectionState::default());
    let opts = connect_options(settings, state.clone()).await?;
    let client = opts
        .connect(server_list(&settings.nats_url))
        .await
        .map_err(|e| BrokerError::Connect {
            url: settings.nats_url.clone(),
            source: Box::new(e),
        })?;
    state.connected.store(true, Ordering::Relaxed);
    Ok((client, state))
}

/// Create the URL, intake and events streams if missing, and check that an existing URL
/// stream was made for the configured shard count.
pub async fn ensure_streams(
    js: &jetstream::Context,
    settings: &ClusterSettings,
) -> Result<(), BrokerError> {
    let shards = settings.shard_map.shards();
    let stream_err = |name: &str| {
        let name = name.to_string();
        move |e: BoxError| BrokerError::Stream {
            stream: name,
            source: e,
        }
    };
    let mut urls = js
        .get_or_create_stream(stream::Config {
            name: URL_STREAM.into(),
            description: Some(url_stream_description(shards)),
            subjects: vec!["frontierd.urls.*".into()],
            // a message lives until a consumer acknowledges it, then it is gone
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            num_replicas: settings.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| stream_err(URL_STREAM)(Box::new(e)))?;
    let info = urls
        .info()
        .await
        .map_err(|e| stream_err(URL_STREAM)(Box::new(e)))?;
    let found = info.config.description.clone().unwrap_or_default();
    if found != url_stream_description(shards) {
        return Err(BrokerError::ShardCountMismatch {
            stream: URL_STREAM.into(),
            found: found
                .rsplit_once("shards=")
                .map(|(_, n)| n.to_string())
                .unwrap_or_else(|| format!("an unknown number of (description {found:?})")),
            configured: shards,
        });
    }
    js.get_or_create_stream(stream::Config {
        name: INTAKE_STREAM.into(),
        description: Some("frontierd URL lists to be routed to shards".into()),
        subjects: vec![INTAKE_SUBJECT.into()],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        num_replicas: settings.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| stream_err(INTAKE_STREAM)(Box::new(e)))?;
    js.get_or_create_stream(stream::Config {
        name: EVENTS_STREAM.into(),
        description: Some("frontierd crawl-log records by node".into()),
        subjects: vec!["frontierd.events.*".into()],
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        max_age: settings.events_max_age,
        num_replicas: settings.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| stream_err(EVENTS_STREAM)(Box::new(e)))?;
    js.get_or_create_stream(stream::Config {
        name: crate::shard_log::SHARD_LOG_STREAM.into(),
        description: Some(
            "frontierd shard logs: what each shard's holder queued and finished".into(),
        ),
        subjects: vec!["frontierd.shardlog.*".into()],
        // kept until the shard's holder compacts its log
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        num_replicas: settings.replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| stream_err(crate::shard_log::SHARD_LOG_STREAM)(Box::new(e)))?;
    js.get_or_create_stream(nodes_stream_config(settings.replicas))
        .await
        .map_err(|e| stream_err(NODES_STREAM)(Box::new(e)))?;
    Ok(())
}

/// Like [`connect`], but returns at once and keeps trying in the background (with
/// [`reconnect_delay`]) when no server answers yet: a node starts, and crawls from its own
/// store, while the broker is down. Fails only on local problems (a credentials file).
pub async fn connect_in_background(
    settings: &ClusterSettings,
) -> Result<(async_nats::Client, Arc<ConnectionState>), BrokerError> {
    let state = Arc::new(ConnectionState::default());
    let opts = connect_options(settings, state.clone())
        .await?
        .retry_on_initial_connect();
    let client = opts
        .connect(server_list(&settings.nats_url))
        .await
        .map_err(|e| BrokerError::Connect {
            url: settings.nats_url.clone(),
            source: Box::new(e),
        })?;
    Ok((client, state))
}

/// The stream of node statuses, one subject (and one kept message) per node.
pub const NODES_STREAM: &str = "FRONTIERD_NODES";

/// `frontierd.nodes.<node_id>`.
pub fn node_subject(node_id: &str) -> String {
    format!("frontierd.nodes.{node_id}")
}

pub(crate) fn nodes_stream_config(replicas: usize) -> stream::Config {
    stream::Config {
        name: NODES_STREAM.into(),
        description: Some("frontierd node statuses, the last one per node".into()),
        subjects: vec!["frontierd.nodes.*".into()],
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        max_messages_per_subject: 1,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The JetStream context of a client.
pub fn jetstream(client: async_nats::Client) -> jetstream::Context {
    jetstream::new(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_back_off_doubles_to_a_cap() {
        let d: Vec<u64> = (1..=9)
            .map(|a| reconnect_delay(a).as_millis() as u64)
            .collect();
        assert_eq!(d, vec![100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(reconnect_delay(0), Duration::from_millis(100));
    }

    #[test]
    fn a_comma_separated_url_is_a_list_of_servers() {
        assert_eq!(
            server_list("nats://a:4222, nats://b:4223,,"),
            vec!["nats://a:4222", "nats://b:4223"]
        );
    }

    #[test]
    fn subjects_and_names() {
        assert_eq!(url_subject(7), "frontierd.urls.7");
        assert_eq!(events_subject("n1"), "frontierd.events.n1");
        assert_eq!(shard_consumer_name(7), "shard-7");
    }
}
