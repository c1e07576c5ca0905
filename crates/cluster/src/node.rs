//! One node of the cluster, as the daemon runs it: its settings, the broker connection
//! (made in the background, so the node starts and crawls locally while the broker is
//! down), the publisher of links other nodes own and their durable outbox, the queue of
//! crawl-log records to publish, the reason the node must stop, and the back-off of every
//! broker-facing activity. It holds no daemon state and reports nothing itself: a paused or
//! resumed activity goes to the caller's [`BrokerPauses`], a dropped record is returned.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Notify};

use crate::broker::{connect_in_background, jetstream, reconnect_delay};
use frontier::Frontier;

use crate::{
    hand_off_all, Appended, BrokerError, ClusterSettings, ConnectionState, Handoffs, JetStream,
    Journal, LeaseError, LeaseKeeper, LeaseStore, Outbox, OutboxError, Ownership, Publisher,
    ShardLog, SweepReport,
};

/// Crawl-log records buffered for publishing; beyond this (broker down or slow) they are
/// dropped: the crawl log file stays the record.
const EVENT_BUFFER: usize = 10_000;

/// `[cluster]` checked: the library's settings plus the node's own keys.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub lib: ClusterSettings,
    /// Whether this node routes the lists published to `frontierd.intake`.
    pub intake_router: bool,
    /// Whether this node publishes its crawl-log records to the events stream.
    pub publish_events: bool,
    /// How often this node publishes its status.
    pub status_interval: Duration,
    /// With shard leases: how long this node waits before its first request to a host of a
    /// shard whose lease ran out (its old holder may still have had a request in flight):
    /// the fetch timeout plus the longest gap.
    pub takeover_hold: Duration,
}

/// The node could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("outbox open task")]
    OutboxTask(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error("[cluster]")]
    Connect(#[source] BrokerError),
}

/// This node's cluster side, shared by the daemon's tasks and workers.
pub struct Node {
    pub settings: NodeSettings,
    pub js: JetStream,
    pub connection: Arc<ConnectionState>,
    pub publisher: Publisher,
    pub outbox: Outbox,
    /// The shards this node holds now (fixed by `owned_shards`, or leased), and the dispatch
    /// gate over their hosts.
    pub ownership: Arc<Ownership>,
    /// The shard leases (`owned_shards = "auto"`), once the lease buckets are open: run by
    /// the daemon's lease task, and at its stop to hand everything off.
    pub keeper: tokio::sync::Mutex<Option<LeaseKeeper>>,
    /// Shards given up and not yet released; held by a sweep from reading the queues of the
    /// hosts it hands off to deleting them. A taken shard's pending URLs are queued from its
    /// log only under it: a sweep that read a host's queue before this node took the host's
    /// shard back deletes what the log has before the log queues it again, never after
    /// (then they would be nowhere).
    pub handoffs: tokio::sync::Mutex<Handoffs>,
    /// With shard leases: the shard logs this node appends to and reads when it takes a
    /// shard (`shard_log.rs`).
    pub journal: Option<Journal>,
    /// Links were written to the outbox: publish them now.
    pub outbox_kick: Notify,
    max_url_len: usize,
    events: Option<mpsc::Sender<Vec<u8>>>,
    events_rx: Mutex<Option<mpsc::Receiver<Vec<u8>>>>,
    /// A reason the node must stop (the broker's streams were made for another shard
    /// count); `failed` wakes whoever waits for it.
    fatal: Mutex<Option<String>>,
    pub failed: Notify,
    /// Counted for the rates in this node's status.
    pub urls_received: AtomicU64,
    pub links_published: AtomicU64,
}

impl Node {
    /// Open the outbox (`cluster-outbox` in `data_dir`) and connect in the background.
    /// `max_url_len` as the frontier's: URLs it would refuse are not routed.
    pub async fn open(
        settings: NodeSettings,
        data_dir: &Path,
        max_url_len: usize,
    ) -> Result<Node, NodeError> {
        let path = data_dir.join("cluster-outbox");
        let outbox = tokio::task::spawn_blocking(move || Outbox::open(&path))
            .await
            .map_err(NodeError::OutboxTask)??;
        let (client, connection) = connect_in_background(&settings.lib)
            .await
            .map_err(NodeError::Connect)?;
        let js = jetstream(client);
        let publisher = Publisher::new(js.clone(), settings.lib.shard_map, max_url_len);
        let map = settings.lib.shard_map;
        let ownership = Arc::new(match &settings.lib.owned {
            Some(owned) => Ownership::fixed(map, owned),
            None => Ownership::leased(map),
        });
        let journal = settings
            .lib
            .owned
            .is_none()
            .then(|| Journal::new(ShardLog::new(js.clone()), map, max_url_len));
        let (events, events_rx) = match settings.publish_events {
            true => {
                let (tx, rx) = mpsc::channel(EVENT_BUFFER);
                (Some(tx), Some(rx))
            }
            false => (None, None),
        };
        Ok(Node {
            settings,
            js,
            connection,
            publisher,
            outbox,
            ownership,
            keeper: tokio::sync::Mutex::new(None),
            handoffs: tokio::sync::Mutex::new(Handoffs::default()),
            journal,
            outbox_kick: Notify::new(),
            max_url_len,
            events,
            events_rx: Mutex::new(events_rx),
            fatal: Mutex::new(None),
            failed: Notify::new(),
            urls_received: AtomicU64::new(0),
            links_published: AtomicU64::new(0),
        })
    }

    pub fn node_id(&self) -> &str {
        &self.settings.lib.node_id
    }

    /// Whether this node holds the shard of `url` now; a URL without a shard (it does not
    /// canonicalize) counts as ours, so the frontier refuses and reports it as it always did.
    pub fn owns_url(&self, url: &str) -> bool {
        self.settings
            .lib
            .shard_map
            .shard_of_url(url, self.max_url_len)
            .map_or(true, |shard| self.ownership.holds(shard))
    }

    /// Whether a request for `url` may be sent this instant (its shard held, past its
    /// takeover hold and inside its fence: [`Ownership::open_now`]); a URL without a shard
    /// may (the fetcher refuses it as it always did).
    pub fn may_send_now(&self, url: &str) -> bool {
        self.settings
            .lib
            .shard_map
            .shard_of_url(url, self.max_url_len)
            .map_or(true, |shard| self.ownership.open_now(shard))
    }

    /// [`Node::may_send_now`] for a request to `origin` (`scheme://host[:port]`), asked by
    /// the fetcher on the connection itself, right before it is opened and before each
    /// write.
    pub fn may_send_to_origin(&self, origin: &str) -> bool {
        self.may_send_now(&format!("{origin}/"))
    }

    /// Queue a crawl-log record for the events stream (never waits). False when it was
    /// dropped: the buffer is full.
    pub fn publish_event(&self, record: &str) -> bool {
        match &self.events {
            Some(tx) => tx.try_send(record.as_bytes().to_vec()).is_ok(),
            None => true,
        }
    }

    /// The queue of crawl-log records, for the one task that publishes them (None when
    /// events are off, or once taken).
    pub fn take_events(&self) -> Option<mpsc::Receiver<Vec<u8>>> {
        self.events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The node must stop, for this reason.
    pub fn fail(&self, reason: String) {
        *self.fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        self.failed.notify_one();
    }

    /// The reason given to [`Node::fail`], if any.
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A broker-facing activity paused by an error.
#[derive(Debug)]
pub struct Paused<'a> {
    /// intake, routing, router, events, status, setup.
    pub activity: &'static str,
    /// What exactly (e.g. `shard 3`).
    pub what: &'a str,
    pub error: &'a (dyn std::error::Error + Send + Sync + 'static),
    pub retry_in: Duration,
    /// True on the first error of a run of errors.
    pub first: bool,
}

/// A paused activity works again.
#[derive(Debug)]
pub struct Resumed<'a> {
    pub activity: &'static str,
    pub what: &'a str,
    pub paused_for: Duration,
}

/// Where a [`Backoff`] reports its pauses (the daemon logs and counts them); shared by the
/// tasks that wait with it, so `Sync`.
pub trait BrokerPauses: Sync {
    fn paused(&self, paused: Paused<'_>);
    fn resumed(&self, resumed: Resumed<'_>);
}

/// Back-off of one broker-facing activity: counts the errors of a run, says when to try
/// again ([`reconnect_delay`]), and reports the pause and the resumption.
pub struct Backoff {
    activity: &'static str,
    what: String,
    attempt: usize,
    since: Option<Instant>,
}

impl Backoff {
    pub fn new(activity: &'static str, what: impl Into<String>) -> Backoff {
        Backoff {
            activity,
            what: what.into(),
            attempt: 0,
            since: None,
        }
    }

    /// Report the error and wait before the next try.
    pub async fn pause(
        &mut self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
        to: &dyn BrokerPauses,
    ) {
        let retry_in = reconnect_delay(self.attempt + 1);
        self.failed(error, to, retry_in);
        tokio::time::sleep(retry_in).await;
    }

    /// Report the error without waiting: for a loop that runs on its own schedule (the
    /// lease rounds, whose next try must come within the lease TTL whatever the error).
    pub fn failed(
        &mut self,
        error: &(dyn std::error::Error + Send + Sync + 'static),
        to: &dyn BrokerPauses,
        retry_in: Duration,
    ) {
        self.attempt += 1;
        to.paused(Paused {
            activity: self.activity,
            what: &self.what,
            error,
            retry_in,
            first: self.since.is_none(),
        });
        self.since.get_or_insert_with(Instant::now);
    }

    /// The operation worked: end a pause if there was one.
    pub fn ok(&mut self, to: &dyn BrokerPauses) {
        if let Some(since) = self.since.take() {
            to.resumed(Resumed {
                activity: self.activity,
                what: &self.what,
                paused_for: since.elapsed(),
            });
        }
        self.attempt = 0;
    }
}

/// A rate over the last interval, for the status.
pub fn per_second(now: u64, before: u64, over: Duration) -> f64 {
    now.saturating_sub(before) as f64 / over.as_secs_f64().max(0.001)
}

/// A counter's value.
pub fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Shard leases (`owned_shards = "auto"`): the node's side of the rounds and hand-offs.
impl Node {
    /// Open the lease buckets and set up this node's [`LeaseKeeper`]; returns how often its
    /// rounds run.
    pub async fn open_leases(&self) -> Result<Duration, LeaseError> {
        let s = &self.settings;
        let store = LeaseStore::open(&self.js, s.lib.lease_ttl, s.lib.replicas).await?;
        let keeper = LeaseKeeper::new(
            store,
            self.node_id(),
            s.lib.lease_ttl,
            s.takeover_hold,
            self.ownership.clone(),
        );
        let every = keeper.renew_every();
        *self.keeper.lock().await = Some(keeper);
        Ok(every)
    }

    /// One hand-off sweep ([`Handoffs::sweep`]), then the release of the shards it finished
    /// handing off (on a failed release the lease runs out instead: the next owner waits its
    /// takeover hold).
    pub async fn sweep(&self, frontier: &Arc<Frontier>, now_ms: u64) -> SweepReport {
        // the logs first: a shard's next holder must find in them every page fetched here
        // (or it fetches them again); without them, no hand-off now
        let not_yet = |why: String| SweepReport {
            errors: vec![why],
            ..SweepReport::default()
        };
        match self.append_journal().await {
            Err(e) => {
                return not_yet(format!(
                    "appending to the shard logs before a hand-off: {e}"
                ))
            }
            Ok(a) if a.held_back > 0 => {
                return not_yet(format!(
                    "{} fetched page(s) wait for their links to leave the outbox before a hand-off",
                    a.held_back
                ))
            }
            Ok(_) => {}
        }
        let mut r = self
            .handoffs
            .lock()
            .await
            .sweep(
                frontier,
                &self.publisher,
                &self.ownership,
                self.journal.as_ref(),
                now_ms,
            )
            .await;
        if let Some(k) = self.keeper.lock().await.as_mut() {
            for (shard, hold) in std::mem::take(&mut r.released) {
                match k.release(shard, hold).await {
                    Ok(()) => r.released.push((shard, hold)),
                    Err(e) => r.errors.push(e.to_string()),
                }
            }
        }
        r
    }

    /// Append the journal's waiting entries to their shards' logs (nothing to do without
    /// shard leases); those of shards this node no longer holds inside their fence are not
    /// appended: their URLs are still queued here and go by the next hand-off sweep.
    pub async fn append_journal(&self) -> Result<Appended, BrokerError> {
        let Some(j) = &self.journal else {
            return Ok(Appended {
                entries: 0,
                held_back: 0,
            });
        };
        // an outbox that cannot be read holds every done entry back
        let outbox_first = self.outbox.first_waiting().unwrap_or(0);
        j.append_waiting(&self.ownership, outbox_first).await
    }

    /// The stop's hand-off ([`hand_off_all`]), given up after `limit` (the broker may be
    /// down: the leases then run out and the URLs stay in this node's store). `Ok(None)`: no
    /// leases to hand off.
    pub async fn hand_off_at_stop(
        &self,
        frontier: &Arc<Frontier>,
        now_ms: u64,
        limit: Duration,
    ) -> Result<Option<SweepReport>, tokio::time::error::Elapsed> {
        let Some(keeper) = self.keeper.lock().await.take() else {
            return Ok(None);
        };
        let work = async {
            let flushed = self.append_journal().await;
            let mut r = hand_off_all(
                frontier,
                &self.publisher,
                self.journal.as_ref(),
                keeper,
                now_ms,
            )
            .await;
            if let Err(e) = flushed {
                r.errors.push(e.to_string());
            }
            r
        };
        tokio::time::timeout(limit, work).await.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl BrokerPauses for Seen {
        fn paused(&self, p: Paused<'_>) {
            let line = format!(
                "paused {} {} first={} {}",
                p.activity, p.what, p.first, p.error
            );
            self.0.lock().unwrap().push(line);
        }
        fn resumed(&self, r: Resumed<'_>) {
            let line = format!("resumed {} {}", r.activity, r.what);
            self.0.lock().unwrap().push(line);
        }
    }

    #[tokio::test]
    async fn a_run_of_errors_is_one_pause_then_one_resumption() {
        let seen = Seen::default();
        let mut b = Backoff::new("status", "node status");
        b.ok(&seen);
        let e = std::io::Error::other("down");
        b.pause(&e, &seen).await;
        b.pause(&e, &seen).await;
        b.ok(&seen);
        b.ok(&seen);
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                "paused status node status first=true down",
                "paused status node status first=false down",
                "resumed status node status",
            ]
        );
        assert_eq!(per_second(30, 10, Duration::from_secs(2)), 10.0);
    }
}
