//! cluster: frontierd's multi-node mode over NATS JetStream.
//!
//! It owns: the shard map (a stable hash of a URL's politeness key modulo a shard count
//! fixed at cluster creation), the `[cluster]` settings and their validation, the URL
//! message format and its parser, the stream setup (`FRONTIERD_URLS` work queue with one
//! subject per shard, `FRONTIERD_EVENTS` limits stream with one subject per node), the
//! [`Publisher`] that routes URLs to shard subjects and reports exactly which were
//! acknowledged, the [`IntakeRouter`] that splits lists published to `frontierd.intake`, the [`ShardConsumer`] of one owned shard, and the [`EventPublisher`].
//! With shard leases, each shard's log in the broker ([`ShardLog`]: what its holder queued
//! and fetched, its robots.txt answers, its hosts' waits at a hand-off), so that a shard
//! moves whole, also away from a node that died with its disk.
//! A daemon's node ([`Node`]): its settings, the connection made in the background, the
//! outbox publisher, the crawl-log events queue, the [`Backoff`] of its broker-facing tasks,
//! whose pauses go to the caller's [`BrokerPauses`] (this crate logs no counted event).
//! For the operator's commands: a URL list published part by part with its unacknowledged
//! URLs retried for a while ([`ListPublisher`], `frontierd publish`), connecting with
//! patience ([`connect_patiently`]), and the cluster's status gathered ([`cluster_status`]);
//! they print nothing, retries are reported to the caller ([`Retrying`]).
//!
//! It must never acknowledge a message on its own (the caller acks a [`Delivery`] only after
//! its own durable commit), drop a URL it could not publish (the caller gets it back in
//! [`PublishFailure::unacked`]), rewrite a line it cannot read (non-UTF-8 lines are rejected
//! by number and reason), or decide politeness: that stays in each node's frontier. It does
//! no crawling; its one local storage is the [`Outbox`] of links other nodes own, kept until
//! the broker acknowledged them. See docs/cluster.md.

mod broker;
mod config;
mod consume;
mod handoff;
mod intake;
mod journal;
mod keeper;
mod lease;
mod lease_store;
mod list;
mod message;
mod node;
mod outbox;
mod ownership;
mod patience;
mod publish;
mod shard;
mod shard_log;
mod status;

pub use broker::{
    connect, connect_in_background, connect_options, ensure_streams, events_subject, jetstream,
    node_subject, reconnect_delay, shard_consumer_name, url_subject, BrokerError, ConnectionState,
    EVENTS_STREAM, INTAKE_STREAM, INTAKE_SUBJECT, NODES_STREAM, URL_STREAM,
};
pub use config::{server_list, ClusterConfig, ClusterSettings, ConfigError, NatsAuth, NatsTls};
pub use consume::{Delivery, ShardBacklog, ShardConsumer};
pub use handoff::{
    hand_off, hand_off_all, pending_not_queued_here, HandOff, HandOffError, Handoffs, SweepReport,
};
pub use intake::{IntakeError, IntakeFailure, IntakeReport, IntakeRouter, INTAKE_CONSUMER};
pub use journal::{Appended, Journal};
pub use keeper::{LeaseKeeper, RoundReport};
pub use lease::{LeaseValue, Observed};
pub use lease_store::{
    lease_holders, LeaseError, LeaseSnapshot, LeaseStore, LEASE_BUCKET, MEMBER_BUCKET,
};
pub use list::{
    ListError, ListPart, ListPublisher, ListRejection, ListSource, PartPublished, Retrying,
    LIST_PART_URLS,
};
pub use message::{
    encode_batch, encode_record, parse_batch, LineError, ParsedBatch, UrlRecord, MAX_LINE_BYTES,
};
pub use node::{
    load, per_second, Backoff, BrokerPauses, Node, NodeError, NodeSettings, Paused, Resumed,
};
pub use outbox::{Oldest, Outbox, OutboxError, PUBLISH_BATCH};
pub use ownership::Ownership;
pub use patience::{connect_patiently, WaitError};
pub use publish::{
    EventPublisher, PublishFailure, PublishReport, Publisher, DEFAULT_MAX_IN_FLIGHT,
    MAX_MESSAGE_BYTES,
};
pub use shard::{RouteError, ShardError, ShardMap, ShardSet, MAX_SHARDS};
pub use shard_log::{
    fold, shard_log_subject, url_key, Compacted, Folded, HostWait, LogEntry, RobotsEntry, ShardLog,
    MAX_LOGGED_ROBOTS_BODY, SHARD_LOG_STREAM,
};
pub use status::{
    cluster_status, node_statuses, publish_node_status, shard_backlog, shard_stored, ClusterStatus,
    NodeReport, ShardCounts, ShardStatus,
};

/// Re-exported so callers need not depend on async-nats for the context type.
pub use async_nats::jetstream::Context as JetStream;
pub use async_nats::Client as NatsClient;
