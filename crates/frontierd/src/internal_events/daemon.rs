//! The daemon's own life: start-up, listening, stopping and what the stop closes, and the
//! frontier calls of the pipeline that failed. The log lines are what operators and the
//! tests read ("admin API listening", "frontierd stopped", "store closed"): their text is
//! kept here, once.

use std::fmt::Display;
use std::path::Path;

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// A safety or etiquette warning about the configuration, at start.
pub struct ConfigWarning<'a> {
    pub warning: &'a dyn Display,
}

impl InternalEvent for ConfigWarning<'_> {
    fn emit(self, _: &Metrics) {
        tracing::warn!("{}", self.warning);
    }
}

/// The open-files limit at start, after raising the soft limit to the hard one
/// (daemon/open_files.rs).
#[derive(Debug, Clone, Copy)]
pub struct OpenFilesLimit {
    pub before: u64,
    pub now: u64,
}

impl InternalEvent for OpenFilesLimit {
    fn emit(self, _: &Metrics) {
        if self.now > self.before {
            tracing::info!(
                before = self.before,
                limit = self.now,
                "open-files limit raised to the hard limit"
            );
        } else {
            tracing::info!(limit = self.now, "open-files limit");
        }
    }
}

/// A WARC file an earlier run left `.open` was recovered at start.
pub struct WarcRecovered<'a> {
    pub result: &'a dyn Display,
}

impl InternalEvent for WarcRecovered<'_> {
    fn emit(self, _: &Metrics) {
        tracing::warn!(result = %self.result, "WARC file left open by an earlier run recovered");
    }
}

/// A listener serves: the admin API, or the url-frontier gRPC API.
pub enum Listening<'a> {
    Admin {
        addr: std::net::SocketAddr,
        data_dir: &'a Path,
    },
    Grpc {
        addr: std::net::SocketAddr,
    },
}

impl InternalEvent for Listening<'_> {
    fn emit(self, _: &Metrics) {
        match self {
            Listening::Admin { addr, data_dir } => {
                tracing::info!(admin_addr = %addr, data_dir = %data_dir.display(), "admin API listening")
            }
            Listening::Grpc { addr } => {
                tracing::info!(grpc_addr = %addr, "url-frontier gRPC API listening")
            }
        }
    }
}

/// Everything started.
pub struct Running {
    pub workers: u32,
}

impl InternalEvent for Running {
    fn emit(self, _: &Metrics) {
        tracing::info!(workers = self.workers, "frontierd running");
    }
}

/// Why the daemon stops.
pub enum StopCause {
    /// SIGTERM or SIGINT (logged by the signal handler).
    Signal,
    /// `[cluster]`: the cluster cannot be joined.
    ClusterFailed,
    /// The store failed a write and can be written again: it must be opened again.
    StoreFailed,
}

/// The stop begins: no new URLs handed out, in-flight fetches finishing.
pub struct Stopping {
    pub cause: StopCause,
}

impl InternalEvent for Stopping {
    fn emit(self, _: &Metrics) {
        match self.cause {
            StopCause::Signal => {}
            StopCause::ClusterFailed => {
                tracing::error!("stopping: the cluster cannot be joined")
            }
            StopCause::StoreFailed => {
                tracing::error!("stopping: the store failed a write and must be opened again")
            }
        }
        tracing::info!("stopping: no new URLs handed out, in-flight fetches finishing");
    }
}

/// Fetches still running when the grace period ended were abandoned.
pub struct LeasesAbandoned {
    pub count: usize,
}

impl InternalEvent for LeasesAbandoned {
    fn emit(self, _: &Metrics) {
        tracing::warn!(
            abandoned = self.count,
            "grace period over: unfinished leases return to their queues at the next start"
        );
    }
}

/// The WARC file was closed at the stop (renamed from `.open`), or could not be.
pub enum WarcClosed<'a> {
    Closed { file: &'a Path },
    Failed { error: &'a dyn Display },
}

impl InternalEvent for WarcClosed<'_> {
    fn emit(self, _: &Metrics) {
        match self {
            WarcClosed::Closed { file } => {
                tracing::info!(file = %file.display(), "WARC file closed")
            }
            WarcClosed::Failed { error } => {
                tracing::error!(error = %error, "closing the WARC file")
            }
        }
    }
}

/// The store was closed (sled flushed and synced), left to the exit (abandoned fetches
/// still hold it), or its closing task failed.
pub enum StoreClosed<'a> {
    Closed { elapsed_ms: u64 },
    AtExit,
    Failed { error: &'a dyn Display },
}

impl InternalEvent for StoreClosed<'_> {
    fn emit(self, _: &Metrics) {
        match self {
            StoreClosed::Closed { elapsed_ms } => {
                tracing::info!(elapsed_ms, "store closed")
            }
            StoreClosed::AtExit => {
                tracing::debug!("store still in use by abandoned fetches: closed at exit")
            }
            StoreClosed::Failed { error } => tracing::error!(error = %error, "closing the store"),
        }
    }
}

/// The store could not be opened at start because its disk is full or read-only: the
/// daemon waits, trying again every `[disk] check_every`, its admin address answering why.
pub enum StoreOpenWaiting<'a> {
    Began { error: &'a anyhow::Error },
    Ended { waited: std::time::Duration },
}

impl InternalEvent for StoreOpenWaiting<'_> {
    fn emit(self, _: &Metrics) {
        match self {
            StoreOpenWaiting::Began { error } => tracing::error!(
                error = format!("{error:#}"),
                "the store cannot be opened (full or read-only disk): waiting for it, the admin API answers 503 meanwhile"
            ),
            StoreOpenWaiting::Ended { waited } => tracing::info!(
                waited_ms = waited.as_millis() as u64,
                "the store opened after waiting for its disk"
            ),
        }
    }
}

/// The last line of a stop.
pub struct Stopped;

impl InternalEvent for Stopped {
    fn emit(self, _: &Metrics) {
        tracing::info!("frontierd stopped");
    }
}

/// Which frontier call of the daemon failed: one of the pipeline's, or the daemon's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontierCall {
    /// A call of the dispatcher or the completer (its own names).
    Pipeline(frontierd_pipeline::Call),
    /// A blocking task that ran one of the calls below died.
    Task,
    /// Reporting the addresses new hosts' names resolved to.
    Resolved,
    /// Recording that drops were written to the crawl log (they are logged again after a
    /// crash otherwise).
    DropsLogged,
    /// Reading the queue gauges for /metrics and /v1/stats (they keep their last values).
    QueueGauges,
    /// Queueing the links a page led to.
    EnqueueDiscovered,
    /// Queueing the URLs a sitemap listed.
    EnqueueSitemap,
    /// Applying a sitemap's `lastmod` dates to known URLs.
    SitemapLastmod,
    /// Giving a lease back unsent (its shard closed before its request went).
    GiveBack,
}

impl From<frontierd_pipeline::Call> for FrontierCall {
    fn from(call: frontierd_pipeline::Call) -> FrontierCall {
        FrontierCall::Pipeline(call)
    }
}

impl FrontierCall {
    fn as_str(self) -> &'static str {
        match self {
            FrontierCall::Pipeline(call) => call.as_str(),
            FrontierCall::Task => "task",
            FrontierCall::Resolved => "resolved",
            FrontierCall::DropsLogged => "drops-logged",
            FrontierCall::QueueGauges => "queue-gauges",
            FrontierCall::EnqueueDiscovered => "enqueue-discovered",
            FrontierCall::EnqueueSitemap => "enqueue-sitemap",
            FrontierCall::SitemapLastmod => "sitemap-lastmod",
            FrontierCall::GiveBack => "give-back",
        }
    }
}

/// A frontier call of the daemon failed (the store failed a write, a lease it does not
/// know): what it was about is retried or returns at the next start.
pub struct FrontierCallFailed<'a> {
    pub call: FrontierCall,
    pub error: &'a dyn Display,
    /// The items the call carried.
    pub items: usize,
}

impl InternalEvent for FrontierCallFailed<'_> {
    fn emit(self, m: &Metrics) {
        match self.call {
            FrontierCall::Pipeline(frontierd_pipeline::Call::AfterStop) => tracing::warn!(
                what = %self.error,
                "outcome after the completer ended; it will be fetched again after the restart"
            ),
            call => tracing::error!(
                call = call.as_str(),
                error = %self.error,
                items = self.items,
                "frontier call failed"
            ),
        }
        m.frontier_call_failures
            .get_or_create(&label("call", self.call.as_str()))
            .inc();
    }
}
