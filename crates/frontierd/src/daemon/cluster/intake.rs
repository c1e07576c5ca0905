//! URLs in from the broker: one task per owned shard takes messages, commits their URLs to
//! the frontier (durable on return: the frontier's group commit), and only then
//! acknowledges them; and the intake router, which splits lists published to
//! `frontierd.intake` by shard.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cluster::{Backoff, IntakeError, IntakeRouter, Node, ShardConsumer};
use frontier::EnqueueItem;

use crate::daemon::offer::Offer;
use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::cluster::{
    AckFailed, BrokerLineRejected, BrokerReports, ClusterTaskError, DoneUrlsSkipped,
    IntakeListsRouted, ShardBatchCommitted, ShardLogAppended, ShardLogCompacted, ShardLogLateDone,
    ShardLogRead, Unroutable,
};
use crate::internal_events::InternalEvent;

/// How often the holder of a shard folds and rewrites its log.
const LOG_COMPACT_EVERY: Duration = Duration::from_secs(600);
/// Messages taken from a shard per round (each holds up to 256 KiB of URLs).
const SHARD_BATCH: usize = 64;
/// How long one round waits for messages (capped by the library at half the ack wait).
const SHARD_WAIT: Duration = Duration::from_secs(5);
/// Intake lists routed per round.
const ROUTER_BATCH: usize = 16;
/// While free space is low, a shard's messages are given back to come again after this.
const DISK_LOW_REDELIVERY: Duration = Duration::from_secs(30);
/// Time a routing round may take beyond its wait (publishing and acknowledging its lists).
const ROUTER_GRACE: Duration = Duration::from_secs(60);

/// How a shard was taken (shard leases).
#[derive(Debug, Clone, Copy, Default)]
pub struct Taken {
    /// From another node (not this node's own lease adopted after a restart): queue what
    /// its log has pending.
    pub replay: bool,
    /// Its takeover hold: nothing of it is fetched before it ends.
    pub hold: Duration,
}

/// Consume one owned shard until the daemon stops (the task is aborted then: deliveries not
/// yet acknowledged come back after the ack wait, and the seen-set absorbs those whose URLs
/// were committed). With shard leases, the shard's log is read first: a shard taken from
/// another node has what it left pending queued; in any case the log's done keys keep what
/// was fetched from being queued again.
pub async fn shard_loop(sh: Arc<Shared>, node: Arc<Node>, shard: u32, taken: Taken) {
    let m = &sh.metrics;
    let mut backoff = Backoff::new("intake", format!("shard {shard}"));
    // the late-done watch: aborted with this loop (the shard lost or given up)
    let mut late_watch = tokio::task::JoinSet::new();
    if node.journal.is_some() {
        if taken.replay {
            // read as late as may be: a holder whose lease ran out while the broker was
            // failing appends the done entries of its last pages once it answers again, and
            // nothing of the shard is fetched here before the hold ends anyway (its URLs
            // wait in the stream meanwhile)
            tokio::time::sleep(taken.hold).await;
            node.ownership.reading_log(shard);
        }
        let read = read_log(&sh, &node, shard, taken.replay, &mut backoff).await;
        if taken.replay {
            let mut after = read.last_sequence;
            if read.retried {
                // the broker was failing: the last holder may be appending the done
                // entries of its last pages just now; take them before opening the shard
                tokio::time::sleep(LATE_DONE_EVERY).await;
                late_done(&sh, &node, shard, &mut after, &mut backoff).await;
            }
            node.ownership.log_read(shard);
            late_watch.spawn(watch_late_done(sh.clone(), node.clone(), shard, after));
        } else {
            node.ownership.log_read(shard);
        }
    }
    let consumer = loop {
        match ShardConsumer::open(&node.js, &node.settings.lib, shard).await {
            Ok(c) => break c,
            Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    };
    let mut compacted = tokio::time::Instant::now();
    loop {
        if compacted.elapsed() >= LOG_COMPACT_EVERY {
            compacted = tokio::time::Instant::now();
            compact_log(&sh, &node, shard).await;
        }
        let deliveries = match consumer.next_batch(SHARD_BATCH, SHARD_WAIT).await {
            Ok(d) => d,
            Err(e) => {
                backoff.pause(&e, &BrokerReports(m)).await;
                continue;
            }
        };
        backoff.ok(&BrokerReports(m));
        if deliveries.is_empty() {
            continue;
        }
        if crate::daemon::disk::refuse_intake(&sh, "cluster").is_some() {
            // nothing committed: the broker keeps them and delivers them again later
            for d in &deliveries {
                if let Err(e) = d.nak_with_delay(DISK_LOW_REDELIVERY).await {
                    AckFailed { error: &e }.emit(m);
                }
            }
            continue;
        }
        let source = format!("shard {shard}");
        let mut items: Vec<EnqueueItem> = Vec::new();
        let mut handed: Vec<EnqueueItem> = Vec::new();
        let mut redeliveries = 0;
        for d in &deliveries {
            for rejected in &d.batch.rejected {
                BrokerLineRejected {
                    source: &source,
                    sequence: d.stream_sequence,
                    error: rejected,
                }
                .emit(m);
            }
            if d.is_redelivery() {
                redeliveries += 1;
            }
            let mut records = d.batch.records.clone();
            let skipped = match &node.journal {
                Some(j) => j.drop_done(&mut records, |r| &r.url),
                None => 0,
            };
            DoneUrlsSkipped {
                shard: Some(shard),
                urls: skipped as u64,
            }
            .emit(m);
            for r in records {
                let to = if r.handoff { &mut handed } else { &mut items };
                to.push(EnqueueItem::from(r));
            }
        }
        let urls = (items.len() + handed.len()) as u64;
        let handed_off = handed.len() as u64;
        // durable on return; rejected URLs are counted and written to the crawl log
        let mut offered = Ok(());
        if !handed.is_empty() {
            let again = Offer {
                again: true,
                ..Offer::submitted(handed)
            };
            offered = sh.offer(again).await.map(|_| ());
        }
        if offered.is_ok() {
            offered = sh.offer(Offer::submitted(items)).await.map(|_| ());
        }
        if let Err(e) = offered {
            // not acknowledged: the messages come back after the ack wait
            let error = format!("{e:#}");
            ClusterTaskError::ShardCommit {
                shard,
                error: &error,
            }
            .emit(m);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        ShardBatchCommitted {
            shard,
            messages: deliveries.len() as u64,
            redeliveries,
            urls,
            handed_off,
        }
        .emit(m);
        node.urls_received.fetch_add(urls, Ordering::Relaxed);
        if node.journal.is_some() && !logged_within_fence(&sh, &node, shard, &mut backoff).await {
            // not acknowledged: the shard's next holder gets these messages again, and this
            // node's hand-off sweep takes the URLs out of its queues
            continue;
        }
        for d in &deliveries {
            if let Err(e) = d.ack().await {
                AckFailed { error: &e }.emit(m);
            }
        }
    }
}

/// Watch a taken shard's log this long after reading it for done entries its last holder
/// appends late (it could not reach the broker in time: a broker failing for longer than
/// the lease TTL); beyond it such a holder's pages would have been fetched here anyway.
const LATE_DONE_WINDOW: Duration = Duration::from_secs(120);
/// How often the log is read for them meanwhile.
const LATE_DONE_EVERY: Duration = Duration::from_millis(500);

/// Read done entries appended to `shard`'s log after sequence `after` and keep them, so a
/// URL of them queued here is not fetched; `after` moves past what was read. A broker error
/// is reported and left for the next call.
async fn late_done(sh: &Shared, node: &Node, shard: u32, after: &mut u64, backoff: &mut Backoff) {
    let Some(journal) = &node.journal else { return };
    let m = &sh.metrics;
    match journal.log.done_after(shard, *after).await {
        Ok((keys, last)) => {
            backoff.ok(&BrokerReports(m));
            *after = last;
            let urls = journal.inherit_late(shard, keys) as u64;
            if urls > 0 {
                ShardLogLateDone { shard, urls }.emit(m);
            }
        }
        Err(e) => backoff.failed(&e, &BrokerReports(m), LATE_DONE_EVERY),
    }
}

/// [`late_done`] every [`LATE_DONE_EVERY`] for [`LATE_DONE_WINDOW`].
async fn watch_late_done(sh: Arc<Shared>, node: Arc<Node>, shard: u32, mut after: u64) {
    let mut backoff = Backoff::new("intake", format!("shard {shard} log"));
    let until = tokio::time::Instant::now() + LATE_DONE_WINDOW;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(LATE_DONE_EVERY).await;
        late_done(&sh, &node, shard, &mut after, &mut backoff).await;
    }
    if let Some(j) = &node.journal {
        j.end_late_watch(shard);
    }
}

/// What [`read_log`] read.
#[derive(Debug, Default, Clone, Copy)]
struct LogRead {
    /// The log's last sequence number read.
    last_sequence: u64,
    /// The broker failed the first reads.
    retried: bool,
}

/// Read `shard`'s log when it is taken: queue its pending URLs (`replay`: taken from
/// another node) and keep its done keys. Retried until the broker answers (the shard's
/// consumer waits: its URLs must be checked against the done keys).
async fn read_log(
    sh: &Arc<Shared>,
    node: &Arc<Node>,
    shard: u32,
    replay: bool,
    backoff: &mut Backoff,
) -> LogRead {
    let Some(journal) = &node.journal else {
        return LogRead::default();
    };
    let m = &sh.metrics;
    let mut retried = false;
    let folded = loop {
        match journal.log.read(shard).await {
            Ok(f) => break f,
            Err(e) => {
                retried = true;
                backoff.pause(&e, &BrokerReports(m)).await
            }
        }
    };
    backoff.ok(&BrokerReports(m));
    let mut queued = 0;
    let mut robots = 0;
    if replay && !folded.robots.is_empty() {
        // before the URLs: their hosts obey the rules from their first request
        let f = sh.frontier.clone();
        let entries = folded.robots.clone();
        let adopted = tokio::task::spawn_blocking(move || {
            let answers: Vec<(&str, frontier::RobotsFetchOutcome, u64)> = entries
                .iter()
                .map(|r| (r.origin.as_str(), r.outcome(), r.fetched_ms))
                .collect();
            f.adopt_robots(&answers, now_ms())
        })
        .await;
        let what = "taking the robots.txt answers of a shard's log";
        match adopted {
            Ok(Ok(n)) => robots = n as u64,
            Ok(Err(e)) => {
                let error = format!("{e:#}");
                ClusterTaskError::ShardLog {
                    shard,
                    what,
                    error: &error,
                }
                .emit(m);
            }
            Err(e) => ClusterTaskError::ShardLog {
                shard,
                what,
                error: &e,
            }
            .emit(m),
        }
    }
    // visited under a recrawl schedule: due one interval after their last fetch; those this
    // node's [recrawl] does not revisit are done
    let mut done = folded.done.clone();
    let mut revisits = Vec::new();
    for (r, due) in folded.revisits(&sh.frontier.config().recrawl) {
        match due {
            Some(at) => revisits.push(EnqueueItem {
                refetch_at_ms: Some(at),
                ..EnqueueItem::from(r)
            }),
            None => {
                done.insert(cluster::url_key(&r.url));
            }
        }
    }
    if replay && !(folded.pending.is_empty() && revisits.is_empty()) {
        let pending = folded.pending.clone();
        let map = node.ownership.shard_map();
        let f = sh.frontier.clone();
        // after any sweep in progress: one that read these hosts' queues before the shard
        // came back deletes what the log has, and must do so before it is queued again
        let _no_sweep = node.handoffs.lock().await;
        let done = tokio::task::spawn_blocking(move || {
            // what this node still has queued (it held the shard and could not hand it
            // off) is not queued twice
            let fresh = cluster::pending_not_queued_here(&f, &map, shard, pending)?;
            let mut items: Vec<EnqueueItem> = fresh.into_iter().map(EnqueueItem::from).collect();
            items.append(&mut revisits);
            // queued even if seen here: this node may have held the shard before
            f.enqueue_again(&items, now_ms())
        })
        .await;
        match done {
            Ok(Ok(results)) => {
                queued = results
                    .iter()
                    .filter(|r| matches!(r, frontier::EnqueueResult::Queued))
                    .count() as u64;
                sh.pipeline.kick();
            }
            Ok(Err(e)) => {
                let error = format!("{e:#}");
                let what = "queueing the pending URLs of a shard's log";
                ClusterTaskError::ShardLog {
                    shard,
                    what,
                    error: &error,
                }
                .emit(m);
            }
            Err(e) => {
                let what = "queueing the pending URLs of a shard's log";
                ClusterTaskError::ShardLog {
                    shard,
                    what,
                    error: &e,
                }
                .emit(m);
            }
        }
    }
    if replay && !folded.hosts.is_empty() {
        // after the URLs: their hosts are in memory now
        let f = sh.frontier.clone();
        let waits: Vec<(String, u64)> = folded
            .hosts
            .iter()
            .map(|h| (h.key.clone(), h.wait_ms))
            .collect();
        let held = tokio::task::spawn_blocking(move || {
            let waits: Vec<(&str, u64)> = waits.iter().map(|(k, w)| (k.as_str(), *w)).collect();
            f.hold_hosts_for(&waits, now_ms())
        })
        .await;
        if let Err(e) = held {
            let what = "holding the hosts of a shard's log";
            ClusterTaskError::ShardLog {
                shard,
                what,
                error: &e,
            }
            .emit(m);
        }
    }
    journal.inherit(shard, done);
    if replay {
        // watched for late done entries from here on (watch_late_done)
        journal.start_late_watch(shard);
    }
    ShardLogRead {
        shard,
        folded: &folded,
        queued,
        robots,
    }
    .emit(m);
    LogRead {
        last_sequence: folded.last_sequence,
        retried,
    }
}

/// Append what the frontier just queued to the shards' logs (retried until the broker
/// takes it), then say whether this node still holds `shard` inside its fence: only then
/// may the messages be acknowledged (the URLs are in the log before the shard can move).
async fn logged_within_fence(
    sh: &Arc<Shared>,
    node: &Arc<Node>,
    shard: u32,
    backoff: &mut Backoff,
) -> bool {
    let m = &sh.metrics;
    loop {
        match node.append_journal().await {
            Ok(n) => {
                ShardLogAppended {
                    entries: n.entries as u64,
                }
                .emit(m);
                break;
            }
            Err(e) => {
                backoff.pause(&e, &BrokerReports(m)).await;
                if !node.ownership.fenced_in(shard) {
                    return false;
                }
            }
        }
    }
    node.ownership.fenced_in(shard)
}

/// Fold and rewrite `shard`'s log (an error waits for the next time).
async fn compact_log(sh: &Arc<Shared>, node: &Arc<Node>, shard: u32) {
    let Some(journal) = &node.journal else { return };
    if !node.ownership.fenced_in(shard) {
        return;
    }
    match journal.log.compact(shard).await {
        Ok(compacted) => ShardLogCompacted { shard, compacted }.emit(&sh.metrics),
        Err(e) => {
            let what = "compacting a shard's log";
            ClusterTaskError::ShardLog {
                shard,
                what,
                error: &e,
            }
            .emit(&sh.metrics);
        }
    }
}

/// Route lists from `frontierd.intake` until the daemon stops. Every router shares one
/// durable consumer, so each list is routed by one of them.
pub async fn router_loop(sh: Arc<Shared>, node: Arc<Node>) {
    let m = &sh.metrics;
    let mut backoff = Backoff::new("router", cluster::INTAKE_SUBJECT);
    let router = loop {
        match IntakeRouter::open(&node.js, node.publisher.clone(), node.settings.lib.ack_wait).await
        {
            Ok(r) => break r,
            Err(e) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    };
    loop {
        // a pull request lost with the connection is never answered: give it up (a list
        // taken and not acknowledged comes back after the ack wait)
        let routed = tokio::time::timeout(
            SHARD_WAIT + ROUTER_GRACE,
            router.route_once(ROUTER_BATCH, SHARD_WAIT),
        )
        .await
        .unwrap_or_else(|_| {
            Err(IntakeError::Broker(cluster::BrokerError::IntakeFetch {
                source: format!("no answer within {:?}", SHARD_WAIT + ROUTER_GRACE).into(),
            }))
        });
        match routed {
            Ok(report) => {
                backoff.ok(&BrokerReports(m));
                report_routed(&sh, &report);
            }
            Err(IntakeError::Publish(failure)) => {
                report_routed(&sh, &failure.report);
                backoff.pause(&*failure, &BrokerReports(m)).await;
            }
            Err(e @ IntakeError::Broker(_)) => backoff.pause(&e, &BrokerReports(m)).await,
        }
    }
}

fn report_routed(sh: &Shared, report: &cluster::IntakeReport) {
    let m = &sh.metrics;
    for (sequence, rejected) in &report.rejected {
        BrokerLineRejected {
            source: "intake",
            sequence: *sequence,
            error: rejected,
        }
        .emit(m);
    }
    for (_, e) in &report.unroutable {
        Unroutable { error: e }.emit(m);
    }
    if report.messages > 0 {
        IntakeListsRouted {
            lists: report.messages as u64,
            urls: report.routed as u64,
        }
        .emit(m);
    }
}
