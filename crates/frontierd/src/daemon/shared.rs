//! The state every task of `frontierd run` shares, and what they do through it: offer URLs
//! to the frontier, write crawl log lines, archive exchanges.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use crawl::{Archived, FollowRules, Found, LogLine, Outcome};
use fetcher::Fetcher;
use frontier::{Frontier, FrontierEvent};
use frontierd_outputs::{AppendFailed, Appended, CrawlLog, WarcOutput};
use tokio::sync::Notify;
use warc::Exchange;

use crate::config::Settings;
use crate::internal_events::cluster::EventDropped;
use crate::internal_events::daemon::{FrontierCall, FrontierCallFailed};
use crate::internal_events::lifecycle::{JournalCheckpointed, LeasesReturned, RobotsTransition};
use crate::internal_events::network::HostAddressChanged;
use crate::internal_events::output::{
    CrawlLogLinesWritten, CrawlLogWriteFailed, ExchangeArchived, OutputWritesResumed,
    WarcWriteFailed,
};
use crate::internal_events::InternalEvent;
use crate::metrics::Metrics;

/// Crawl log lines handed in outside a batch of completions (URLs refused at submission,
/// a quiet crawl) reach the file within this.
pub const CRAWL_LOG_FLUSH_TICK: Duration = Duration::from_millis(100);

pub use crate::daemon::now_ms;

/// State shared by every task.
pub struct Shared {
    pub frontier: Arc<Frontier>,
    pub settings: Settings,
    pub fetcher: Fetcher,
    pub warc: WarcOutput,
    /// The crawl log file, with its last records (`GET /v1/recent`, the status page).
    pub crawl_log: CrawlLog,
    pub metrics: Metrics,
    /// Dispatcher and completer between the frontier and the workers.
    pub pipeline: Arc<frontierd_pipeline::Pipeline>,
    pub shutdown: Notify,
    pub stopping: AtomicBool,
    pub in_flight: AtomicU64,
    /// What a fetched page leads to (`[scope]`).
    pub follow: FollowRules,
    pub token: Option<String>,
    pub started: Instant,
    /// `[cluster]` on: this node's broker side.
    pub cluster: Option<Arc<cluster::Node>>,
    /// The free-space watch's verdict (`[disk]`).
    pub disk: DiskGate,
}

/// A lookup task's answer for its host: (host id, its address), no address if the task
/// died.
fn lookup_answer(
    joined: Result<(tokio::task::Id, Option<std::net::IpAddr>), tokio::task::JoinError>,
    host_of_task: &mut std::collections::HashMap<tokio::task::Id, u64>,
) -> Option<(u64, Option<std::net::IpAddr>)> {
    let (task, ip) = match joined {
        Ok(done) => done,
        Err(died) => (died.id(), None),
    };
    host_of_task.remove(&task).map(|host_id| (host_id, ip))
}

impl Shared {
    /// A host's fetch connected to a new address (see [`Frontier::note_address`]).
    pub fn address_changed(
        &self,
        host_id: u64,
        before: Option<std::net::IpAddr>,
        ip: std::net::IpAddr,
    ) {
        let host = self.frontier.host_key_of(host_id).unwrap_or_default();
        HostAddressChanged {
            host: &host,
            before,
            ip,
        }
        .emit(&self.metrics);
    }

    /// Resolve new hosts before their first robots.txt (through the fetcher's resolve
    /// table and DNS cache, as their fetch would) and report each answer to the frontier
    /// as it comes: the host then waits for its IP group. A failure is reported too: the
    /// host's robots.txt fetch goes and fails as a fetch does.
    pub fn resolve_hosts(self: &Arc<Self>, asked: Vec<frontier::ResolveRequest>) {
        let sh = self.clone();
        tokio::spawn(async move {
            // the names are looked up concurrently; the answers are reported to the
            // frontier in batches (whatever has come in each time one comes in), not one
            // scheduler lock, store write and dispatcher wake-up per host: with 100k new
            // hosts that per-host round trip halved the intake rate
            let mut lookups = tokio::task::JoinSet::new();
            // each lookup's host, so that one whose task died is answered too (as not
            // resolved: its robots.txt fetch looks the name up again): an answer never
            // given holds the host and its robots.txt slot for the process's life
            let mut host_of_task = std::collections::HashMap::new();
            for req in asked {
                let sh = sh.clone();
                let host_id = req.host_id;
                let task = lookups.spawn(async move {
                    let answer = match req.host.parse::<std::net::IpAddr>() {
                        Ok(ip) => Ok(ip),
                        Err(_) => match sh.fetcher.lookup(&req.host).await {
                            Ok(ips) => ips.first().copied().ok_or_else(|| "no address".to_string()),
                            Err((result, detail)) => Err(format!("{result}: {detail}")),
                        },
                    };
                    crate::internal_events::network::HostResolved {
                        host: &req.host,
                        answer: answer.as_ref().map(|ip| *ip).map_err(String::as_str),
                    }
                    .emit(&sh.metrics);
                    answer.ok()
                });
                host_of_task.insert(task.id(), host_id);
            }
            let mut answers = Vec::new();
            while let Some(first) = lookups.join_next_with_id().await {
                answers.extend(lookup_answer(first, &mut host_of_task));
                while let Some(more) = lookups.try_join_next_with_id() {
                    answers.extend(lookup_answer(more, &mut host_of_task));
                }
                sh.report_resolved(std::mem::take(&mut answers)).await;
            }
        });
    }

    /// Report resolved addresses to the frontier (one call for the batch) and wake the
    /// dispatcher once.
    async fn report_resolved(self: &Arc<Self>, answers: Vec<(u64, Option<std::net::IpAddr>)>) {
        if answers.is_empty() {
            return;
        }
        let fr = self.frontier.clone();
        let n = answers.len();
        match tokio::task::spawn_blocking(move || fr.resolved(&answers)).await {
            Ok(Ok(changed)) => {
                for (host_id, before, ip) in changed {
                    self.address_changed(host_id, before, ip);
                }
            }
            Ok(Err(e)) => self.frontier_failed(FrontierCall::Resolved, &e, n),
            Err(e) => self.frontier_failed(FrontierCall::Task, &e, n),
        }
        self.pipeline.kick();
    }

    /// Append one crawl log line about a submitted URL that was not fetched (rejected).
    pub fn log_outcome(
        &self,
        url: &str,
        outcome: Outcome,
        status: Option<u16>,
        bytes: u64,
        duration_ms: u64,
        reason: &str,
    ) {
        self.log_line(&LogLine {
            status,
            bytes,
            duration_ms,
            ..LogLine::unfetched(url, outcome, reason, Found::SUBMITTED)
        });
    }

    /// A frontier call failed: logged and counted (`frontier_call_failures_total`).
    pub fn frontier_failed(&self, call: FrontierCall, error: &dyn std::fmt::Display, items: usize) {
        FrontierCallFailed { call, error, items }.emit(&self.metrics);
    }

    /// Hand in one crawl log line (fields: docs/crawl-log.md); it reaches the file at the
    /// next [`Shared::flush_crawl_log`].
    pub fn log_line(&self, line: &LogLine<'_>) {
        let written = self.crawl_log.write(line, crate::daemon::wall_ms());
        if let Some(node) = &self.cluster {
            if !node.publish_event(&written.json) {
                EventDropped.emit(&self.metrics);
            }
        }
        if written.flush_due {
            self.flush_crawl_log();
        }
    }

    /// Write the crawl log lines handed in since the last flush, in one write: before
    /// each batch of completions is applied (a URL's line is in the file before its
    /// outcome is stored), before drops are acknowledged, on the flush tick
    /// ([`CRAWL_LOG_FLUSH_TICK`]), before a reopen and at the stop.
    pub fn flush_crawl_log(&self) {
        let Some(flushed) = self.crawl_log.flush() else {
            return;
        };
        match flushed.result {
            Ok(resumed) => {
                if resumed {
                    OutputWritesResumed {
                        output: "crawl log",
                    }
                    .emit(&self.metrics);
                }
                CrawlLogLinesWritten {
                    outcomes: &flushed.outcomes,
                }
                .emit(&self.metrics)
            }
            Err((error, first_in_episode)) => CrawlLogWriteFailed {
                lines: flushed.outcomes.len(),
                first_url: &flushed.first_url,
                error: &error,
                first_in_episode,
            }
            .emit(&self.metrics),
        }
    }

    /// Take the frontier's events: drops go to the crawl log (then acknowledged, so they
    /// are not reported again after a crash), robots transitions, returned leases and
    /// journal checkpoints are logged and counted.
    pub(crate) fn drain_events(&self) {
        let mut drops = Vec::new();
        for event in self.frontier.drain_events() {
            match event {
                FrontierEvent::Dropped(d) => drops.push(d),
                FrontierEvent::RobotsTransition { origin, from, to } => RobotsTransition {
                    origin: &origin,
                    from,
                    to,
                }
                .emit(&self.metrics),
                FrontierEvent::LeasesReturned { count } => {
                    LeasesReturned { count }.emit(&self.metrics)
                }
                FrontierEvent::JournalCheckpointed {
                    hosts,
                    journal_bytes,
                } => JournalCheckpointed {
                    hosts,
                    journal_bytes,
                }
                .emit(&self.metrics),
            }
        }
        for d in &drops {
            let outcome = Outcome::of_drop(d.reason);
            let reason = format!("{}: {}", d.reason.code(), d.detail);
            let found = Found {
                depth: d.depth,
                via: d.via.as_deref(),
                hops: &d.hops,
            };
            self.log_line(&LogLine::unfetched(&d.url, outcome, &reason, found));
        }
        // in a cluster: the shard's next holder does not try a dropped URL again (a URL given
        // up after its last retry, or blocked by robots.txt)
        if let Some(node) = &self.cluster {
            if let Some(j) = &node.journal {
                for d in &drops {
                    j.done(&d.url, node.outbox.next_sequence());
                }
            }
        }
        // in the file: not to be reported again after a crash
        if !drops.is_empty() {
            self.flush_crawl_log();
        }
        if let Err(e) = self.frontier.drops_logged(&drops) {
            self.frontier_failed(FrontierCall::DropsLogged, &e, drops.len());
        }
    }

    /// Archive one exchange; where its response record went (None if not written).
    /// Waits for the writer's lock (a robots.txt answer, rare beside pages).
    pub(crate) fn write_warc(&self, ex: &Exchange<'_>) -> Result<Option<Archived>, String> {
        self.archived(ex, self.warc.append(ex, None))
    }

    /// Archive one exchange, its answer as a `revisit` record when `revisit` is given
    /// (else as a full response). `Ok(None)`: no WARC output; `Err`: why it failed (the
    /// file is cut back to its last whole exchange, see `warc`). A page's: when the
    /// writer is held, the exchange goes to its holder and the task waits, not the thread.
    pub(crate) async fn write_warc_as(
        &self,
        ex: &Exchange<'_>,
        revisit: Option<&warc::Revisit<'_>>,
    ) -> Result<Option<Archived>, String> {
        self.archived(ex, self.warc.append_async(ex, revisit).await)
    }

    /// Log and count an append's outcome.
    fn archived(
        &self,
        ex: &Exchange<'_>,
        appended: Result<Option<Appended>, AppendFailed>,
    ) -> Result<Option<Archived>, String> {
        match appended {
            Ok(None) => Ok(None),
            Ok(Some(appended)) => {
                if appended.resumed {
                    OutputWritesResumed { output: "WARC" }.emit(&self.metrics);
                }
                ExchangeArchived {
                    url: ex.target_uri,
                    bytes: appended.bytes,
                }
                .emit(&self.metrics);
                Ok(Some(appended.archived))
            }
            Err(failed) => {
                WarcWriteFailed {
                    url: ex.target_uri,
                    error: &failed.error,
                    first_in_episode: failed.first_in_episode,
                }
                .emit(&self.metrics);
                Err(failed.error.to_string())
            }
        }
    }
}

/// The watch's verdict, read by the intake doors, the dispatcher's owner and /healthz.
#[derive(Default)]
pub struct DiskGate {
    reason: Mutex<Option<String>>,
    /// The store's first failed write was reported.
    pub(crate) store_failed: AtomicBool,
    /// The store failed and can be written again: the daemon stops, to be started again
    /// on what was made durable (systemd's `Restart=on-failure`).
    pub restart: tokio::sync::Notify,
}

impl DiskGate {
    /// Why new URLs are refused, while free space is low.
    pub fn refusal(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set(&self, reason: Option<String>) {
        *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason;
    }
}

/// Flush the crawl log every [`CRAWL_LOG_FLUSH_TICK`]: lines handed in outside a batch of
/// completions reach the file within it. Aborted at the stop, which flushes the last.
pub async fn crawl_log_flush_loop(sh: Arc<Shared>) {
    let mut tick = tokio::time::interval(CRAWL_LOG_FLUSH_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sh.flush_crawl_log();
    }
}
