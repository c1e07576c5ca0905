//! What the admin API needs from the daemon it serves, and what it tells it: the daemon
//! implements [`Backend`]; the API decides nothing about the crawl.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use frontier::Frontier;

use crate::url_list::{Batch, Rejection};

/// A boxed future, as [`Backend::submit`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why `POST /v1/urls` takes nothing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntakeRefusal {
    /// The daemon is stopping (503).
    Stopping,
    /// Free space is low (507); the reason names the filesystem.
    Storage(String),
}

/// What one submitted list came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// URLs new to the frontier, queued durably.
    pub accepted: u64,
    /// URLs it already held.
    pub duplicate: u64,
    /// Refused lines, in line order.
    pub rejected: Vec<Rejection>,
}

impl Tally {
    /// Add what another part of the same list came to.
    pub fn add(&mut self, other: Tally) {
        self.accepted += other.accepted;
        self.duplicate += other.duplicate;
        self.rejected.extend(other.rejected);
    }
}

/// An operator paused or resumed a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseChange<'a> {
    /// The politeness key.
    pub host: &'a str,
    /// What the request named.
    pub requested: &'a str,
    /// `pause` or `resume`.
    pub action: &'a str,
    /// Whether it changed anything (pausing a paused host does not).
    pub changed: bool,
    /// Paused ahead of its first URL (`?create=true`).
    pub created: bool,
}

/// Which timeout cut a connection off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timeout {
    /// No complete request head within `admin.header_read_timeout`.
    Header,
    /// A request (body and answer) not complete within `admin.request_timeout`.
    Request {
        /// The request's method.
        method: hyper::Method,
    },
}

/// What happened to a connection or a host: the daemon logs and counts each one.
#[derive(Debug)]
pub enum ServerEvent<'a> {
    /// Accepting a connection failed (out of file descriptors, ...): retried after 100 ms.
    AcceptFailed { error: &'a std::io::Error },
    /// A connection over `max_connections` was answered 503 and closed; `log` is true for
    /// at most one refusal every few seconds.
    Refused {
        peer: SocketAddr,
        max_connections: usize,
        log: bool,
    },
    /// A connection was accepted.
    Opened { peer: SocketAddr },
    /// A connection ended (`error` when not cleanly).
    Closed {
        peer: SocketAddr,
        error: Option<&'a hyper::Error>,
    },
    /// A connection or a request was cut off by its timeout (`path`: the request's).
    TimedOut {
        peer: SocketAddr,
        timeout: Timeout,
        path: &'a str,
        limit: Duration,
    },
    /// A host was paused or resumed.
    PauseChanged(PauseChange<'a>),
}

/// The daemon behind the API.
pub trait Backend: Send + Sync + 'static {
    /// The frontier the read-only views and pause/resume act on.
    fn frontier(&self) -> &Frontier;
    /// The daemon's clock, unix ms.
    fn now_ms(&self) -> u64;
    /// Why the daemon is not healthy (`/healthz` answers 503 with it), if it is not.
    fn unhealthy(&self) -> Option<String>;
    /// Why `POST /v1/urls` takes nothing now, if so.
    fn intake_refusal(&self) -> Option<IntakeRefusal>;
    /// Whether a list may hold `"kind": "sitemap"` elements.
    fn sitemaps_enabled(&self) -> bool;
    /// Queue a list durably; answered once it is.
    fn submit(&self, batch: Batch) -> BoxFuture<'_, Result<Tally, String>>;
    /// The last crawl-log records, newest first (`GET /v1/recent`).
    fn recent(&self) -> crate::answers::RecentAnswer;
    /// The `/v1/stats` answer (refreshes the gauges the frontier feeds).
    fn stats(&self) -> serde_json::Value;
    /// Refresh the gauges computed from the frontier (may block on the frontier).
    fn refresh_gauges(&self);
    /// The `/metrics` exposition for this `Accept` header: content type and body.
    fn metrics(&self, accept: Option<&str>) -> (String, Vec<u8>);
    /// The fetch loop should look at the frontier again (a host was resumed).
    fn wake(&self);
    /// Log and count `event`.
    fn event(&self, event: ServerEvent<'_>);
}
