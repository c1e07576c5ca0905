//! Consuming one shard: a durable pull consumer with the shard's subject as its only filter
//! (nats-server 2.9 has no multi-filter consumers), explicit acks, redelivery after the ack
//! wait.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, consumer::PullConsumer};
use futures_util::StreamExt;

use crate::broker::{shard_consumer_name, url_subject, BrokerError, URL_STREAM};
use crate::config::ClusterSettings;
use crate::message::{parse_batch, ParsedBatch};

/// How long after its expiry (or at once, for a request that does not wait) a pull request
/// is given up as lost.
const PULL_GRACE: Duration = Duration::from_secs(5);

/// The consumer of one owned shard.
pub struct ShardConsumer {
    shard: u32,
    consumer: PullConsumer,
    ack_wait: Duration,
}

/// One message taken from a shard: its URLs (and refused lines) and the handle to
/// acknowledge it. Acknowledge only after the URLs are durable on this node; a delivery
/// dropped unacknowledged comes back after the ack wait.
pub struct Delivery {
    pub shard: u32,
    pub batch: ParsedBatch,
    /// Times the broker has delivered this message (1 the first time).
    pub delivered: i64,
    /// Its sequence in the URL stream.
    pub stream_sequence: u64,
    message: jetstream::Message,
}

/// A shard's backlog as the broker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardBacklog {
    /// Messages not yet delivered.
    pub pending: u64,
    /// Delivered, not yet acknowledged.
    pub ack_pending: usize,
    /// Delivered more than once and still unacknowledged.
    pub redelivered: usize,
}

impl ShardConsumer {
    /// Open (creating if missing) the durable consumer of `shard`. The ack wait is set when
    /// the consumer is created; an existing consumer keeps its own.
    pub async fn open(
        js: &jetstream::Context,
        settings: &ClusterSettings,
        shard: u32,
    ) -> Result<ShardConsumer, BrokerError> {
        let name = shard_consumer_name(shard);
        let err = |e: Box<dyn std::error::Error + Send + Sync>| BrokerError::Consumer {
            shard,
            consumer: name.clone(),
            source: e,
        };
        let stream = js
            .get_stream(URL_STREAM)
            .await
            .map_err(|e| err(Box::new(e)))?;
        let consumer = stream
            .get_or_create_consumer(
                &name,
                pull::Config {
                    durable_name: Some(name.clone()),
                    description: Some(format!("frontierd shard {shard}")),
                    filter_subject: url_subject(shard),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: settings.ack_wait,
                    // redeliver until acknowledged: a URL is never given up by the broker
                    max_deliver: -1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| err(Box::new(e)))?;
        let ack_wait = consumer.cached_info().config.ack_wait;
        Ok(ShardConsumer {
            shard,
            consumer,
            ack_wait,
        })
    }

    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// Up to `max_messages` deliveries: what the shard has now, or else the first message to
    /// arrive within `wait` (an empty vector when none does) with what arrived with it.
    /// `wait` is capped at half the consumer's ack wait: a message taken early in a longer
    /// wait would run out its ack wait inside the same call and be delivered into it twice.
    ///
    /// A pull request for n messages is answered when n arrived or it expires, so one long
    /// poll for `max_messages` would hold a shard with a single message for the whole
    /// `wait`: the call asks without waiting first, then long-polls for one message only,
    /// then takes the rest without waiting.
    pub async fn next_batch(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<Vec<Delivery>, BrokerError> {
        let max = max_messages.max(1);
        let mut out = self.take(max, None).await?;
        if out.is_empty() {
            out = self.take(1, Some(wait.min(self.ack_wait / 2))).await?;
            if !out.is_empty() && max > 1 {
                out.extend(self.take(max - 1, None).await?);
            }
        }
        Ok(out)
    }

    /// One pull request: without waiting (`None`), or waiting up to the given time.
    async fn take(&self, n: usize, wait: Option<Duration>) -> Result<Vec<Delivery>, BrokerError> {
        let err = |e: Box<dyn std::error::Error + Send + Sync>| BrokerError::Fetch {
            shard: self.shard,
            source: e,
        };
        // a pull request lost with the connection (broker restarted) is never answered and
        // its stream would wait forever: give up a little after it would have expired (the
        // messages it may have taken are not acknowledged, so they come back)
        let give_up = wait.unwrap_or(Duration::ZERO) + PULL_GRACE;
        match tokio::time::timeout(give_up, self.pull(n, wait)).await {
            Ok(result) => result,
            Err(_) => Err(err(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("pull request not answered within {give_up:?}"),
            )))),
        }
    }

    async fn pull(&self, n: usize, wait: Option<Duration>) -> Result<Vec<Delivery>, BrokerError> {
        let err = |e: Box<dyn std::error::Error + Send + Sync>| BrokerError::Fetch {
            shard: self.shard,
            source: e,
        };
        let mut messages = match wait {
            None => self.consumer.fetch().max_messages(n).messages().await,
            Some(w) => {
                self.consumer
                    .batch()
                    .max_messages(n)
                    .expires(w)
                    .messages()
                    .await
            }
        }
        .map_err(|e| err(Box::new(e)))?;
        let mut out = Vec::new();
        while let Some(next) = messages.next().await {
            let message = next.map_err(err)?;
            let (delivered, stream_sequence) = match message.info() {
                Ok(info) => (info.delivered, info.stream_sequence),
                Err(e) => return Err(err(e)),
            };
            out.push(Delivery {
                shard: self.shard,
                batch: parse_batch(&message.payload),
                delivered,
                stream_sequence,
                message,
            });
        }
        Ok(out)
    }

    /// The shard's backlog, from the consumer's info.
    pub async fn backlog(&self) -> Result<ShardBacklog, BrokerError> {
        let info = self
            .consumer
            .get_info()
            .await
            .map_err(|e| BrokerError::Consumer {
                shard: self.shard,
                consumer: shard_consumer_name(self.shard),
                source: Box::new(e),
            })?;
        Ok(ShardBacklog {
            pending: info.num_pending,
            ack_pending: info.num_ack_pending,
            redelivered: info.num_redelivered,
        })
    }
}

impl Delivery {
    /// True when the broker delivered this message before (its earlier delivery was not
    /// acknowledged in time).
    pub fn is_redelivery(&self) -> bool {
        self.delivered > 1
    }

    /// Give the message back, to be delivered again after `delay` (the node cannot take
    /// it now: its disk is low). Nothing of it was committed.
    pub async fn nak_with_delay(&self, delay: std::time::Duration) -> Result<(), BrokerError> {
        self.message
            .ack_with(async_nats::jetstream::AckKind::Nak(Some(delay)))
            .await
            .map_err(|e| BrokerError::Ack {
                shard: self.shard,
                sequence: self.stream_sequence,
                source: e,
            })
    }

    /// Acknowledge, waiting for the broker to confirm, so that on `Ok` the message is gone
    /// from the work queue for good. Call after the URLs are committed; on `Err` the
    /// message may come back (the seen-set absorbs it).
    pub async fn ack(&self) -> Result<(), BrokerError> {
        self.message
            .double_ack()
            .await
            .map_err(|e| BrokerError::Ack {
                shard: self.shard,
                sequence: self.stream_sequence,
                source: e,
            })
    }
}
