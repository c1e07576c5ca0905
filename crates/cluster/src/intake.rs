//! The intake subject: `frontierd.intake` takes URL lists from any NATS client that does
//! not know the shard map; a router (any node may run one; they share one durable consumer,
//! so each list is routed once) splits each list by shard and publishes it with
//! [`Publisher`], acknowledging the intake message only after every part was acknowledged.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, consumer::PullConsumer};
use futures_util::StreamExt;

use crate::broker::{BoxError, BrokerError, INTAKE_STREAM, INTAKE_SUBJECT};
use crate::message::{parse_batch, LineError};
use crate::publish::{PublishFailure, Publisher};
use crate::shard::RouteError;

/// The durable consumer all routers share.
pub const INTAKE_CONSUMER: &str = "intake-router";

/// Routes intake lists to shard subjects.
pub struct IntakeRouter {
    consumer: PullConsumer,
    publisher: Publisher,
    ack_wait: Duration,
}

/// What one [`IntakeRouter::route_once`] did.
#[derive(Debug, Default)]
pub struct IntakeReport {
    /// Intake messages routed and acknowledged.
    pub messages: usize,
    /// URLs published to shard subjects (acknowledged).
    pub routed: usize,
    /// Lines refused by the parser, with the intake message's stream sequence.
    pub rejected: Vec<(u64, LineError)>,
    /// URLs the frontier would refuse, with the intake message's stream sequence.
    pub unroutable: Vec<(u64, RouteError)>,
}

/// Routing stopped at a message whose parts were not all acknowledged: that message stays
/// unacknowledged and comes back after the ack wait (parts already published may then be
/// published twice; the owners' seen-sets absorb that).
#[derive(Debug, thiserror::Error)]
#[error("routing intake message {sequence}: {failure}")]
pub struct IntakeFailure {
    pub sequence: u64,
    pub failure: PublishFailure,
    pub report: IntakeReport,
}

/// Either kind of router error.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error(transparent)]
    Broker(#[from] BrokerError),
    #[error(transparent)]
    Publish(#[from] Box<IntakeFailure>),
}

impl IntakeRouter {
    pub async fn open(
        js: &jetstream::Context,
        publisher: Publisher,
        ack_wait: Duration,
    ) -> Result<IntakeRouter, BrokerError> {
        let err = |e: BoxError| BrokerError::Stream {
            stream: INTAKE_STREAM.into(),
            source: e,
        };
        let stream = js
            .get_stream(INTAKE_STREAM)
            .await
            .map_err(|e| err(Box::new(e)))?;
        let consumer = stream
            .get_or_create_consumer(
                INTAKE_CONSUMER,
                pull::Config {
                    durable_name: Some(INTAKE_CONSUMER.into()),
                    filter_subject: INTAKE_SUBJECT.into(),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait,
                    max_deliver: -1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| err(Box::new(e)))?;
        let ack_wait = consumer.cached_info().config.ack_wait;
        Ok(IntakeRouter {
            consumer,
            publisher,
            ack_wait,
        })
    }

    /// Route up to `max_messages` intake lists, waiting at most `wait` (capped at half the
    /// ack wait) for them.
    pub async fn route_once(
        &self,
        max_messages: usize,
        wait: Duration,
    ) -> Result<IntakeReport, IntakeError> {
        let err = |e: BoxError| BrokerError::IntakeFetch { source: e };
        let mut messages = self
            .consumer
            .batch()
            .max_messages(max_messages)
            .expires(wait.min(self.ack_wait / 2))
            .messages()
            .await
            .map_err(|e| err(Box::new(e)))?;
        let mut report = IntakeReport::default();
        while let Some(next) = messages.next().await {
            let message = next.map_err(err)?;
            let sequence = message.info().map_err(err)?.stream_sequence;
            let parsed = parse_batch(&message.payload);
            report
                .rejected
                .extend(parsed.rejected.into_iter().map(|e| (sequence, e)));
            match self.publisher.publish(parsed.records).await {
                Ok(done) => {
                    report.routed += done.published;
                    report
                        .unroutable
                        .extend(done.unroutable.into_iter().map(|e| (sequence, e)));
                }
                Err(failure) => {
                    return Err(IntakeError::Publish(Box::new(IntakeFailure {
                        sequence,
                        failure,
                        report,
                    })))
                }
            }
            message
                .double_ack()
                .await
                .map_err(|e| BrokerError::IntakeAck {
                    sequence,
                    source: e,
                })?;
            report.messages += 1;
        }
        Ok(report)
    }
}
