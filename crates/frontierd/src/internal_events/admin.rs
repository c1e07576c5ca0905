//! The admin API's connections: opened, closed, refused when full, cut off by a timeout.

use std::net::SocketAddr;
use std::time::Duration;

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// An admin API connection was accepted.
pub struct AdminConnectionOpened {
    pub peer: SocketAddr,
}

impl InternalEvent for AdminConnectionOpened {
    fn emit(self, m: &Metrics) {
        tracing::trace!(peer = %self.peer, "admin connection opened");
        m.admin_connections.inc();
    }
}

/// An admin API connection ended (`error` when it did not end cleanly).
pub struct AdminConnectionClosed<'a> {
    pub peer: SocketAddr,
    pub error: Option<&'a hyper::Error>,
}

impl InternalEvent for AdminConnectionClosed<'_> {
    fn emit(self, m: &Metrics) {
        if let Some(e) = self.error {
            tracing::debug!(peer = %self.peer, error = %e, "admin connection ended");
        }
        m.admin_connections.dec();
    }
}

/// A connection over `admin.max_connections` was answered 503 and closed. Every refusal is
/// counted; `log` says whether this one is also logged (the server logs at most one every
/// few seconds, so a flood cannot flood the log).
pub struct AdminConnectionRefused {
    pub peer: SocketAddr,
    pub max_connections: usize,
    pub log: bool,
}

impl InternalEvent for AdminConnectionRefused {
    fn emit(self, m: &Metrics) {
        m.admin_connections_refused.inc();
        if self.log {
            tracing::warn!(
                peer = %self.peer,
                max_connections = self.max_connections,
                refused_total = m.admin_connections_refused.get(),
                "admin connection refused: admin.max_connections are open"
            );
        }
    }
}

/// Which admin API timeout cut a connection off: the `phase` label of `admin_timeouts`.
pub use frontierd_admin::Timeout as AdminTimeout;

/// An admin API connection or request was cut off by its timeout.
pub struct AdminTimedOut<'a> {
    pub peer: SocketAddr,
    pub timeout: &'a AdminTimeout,
    /// For a request: its path.
    pub path: &'a str,
    pub limit: Duration,
}

impl InternalEvent for AdminTimedOut<'_> {
    fn emit(self, m: &Metrics) {
        let limit = humantime::format_duration(self.limit);
        let phase = match self.timeout {
            AdminTimeout::Header => {
                tracing::info!(
                    peer = %self.peer,
                    limit = %limit,
                    "admin connection sent no complete request head within admin.header_read_timeout: closed"
                );
                "header"
            }
            AdminTimeout::Request { method } => {
                tracing::warn!(
                    peer = %self.peer, method = %method, path = self.path, limit = %limit,
                    "admin request not complete within admin.request_timeout: cut off"
                );
                "request"
            }
        };
        m.admin_timeouts.get_or_create(&label("phase", phase)).inc();
    }
}

/// Accepting an admin API connection failed (out of file descriptors, ...): retried after
/// 100 ms.
pub struct AdminAcceptFailed<'a> {
    pub error: &'a std::io::Error,
}

impl InternalEvent for AdminAcceptFailed<'_> {
    fn emit(self, _: &Metrics) {
        tracing::warn!(error = %self.error, "admin accept failed");
    }
}

/// An operator paused or resumed a host through the API.
pub struct HostPauseChanged<'a> {
    pub host: &'a str,
    pub requested: &'a str,
    /// `pause` or `resume`.
    pub action: &'a str,
    /// Whether it changed anything (pausing a paused host does not).
    pub changed: bool,
    /// Paused ahead of its first URL (`?create=true`).
    pub created: bool,
}

impl InternalEvent for HostPauseChanged<'_> {
    fn emit(self, _: &Metrics) {
        tracing::info!(
            host = %self.host, requested = %self.requested, action = self.action,
            changed = self.changed, created = self.created,
            "host {} by operator", self.action
        );
    }
}

/// The admin API server's report of `event`, as this daemon's event.
pub fn server_event(event: frontierd_admin::ServerEvent<'_>, m: &Metrics) {
    use frontierd_admin::ServerEvent as E;
    match event {
        E::AcceptFailed { error } => AdminAcceptFailed { error }.emit(m),
        E::Refused {
            peer,
            max_connections,
            log,
        } => AdminConnectionRefused {
            peer,
            max_connections,
            log,
        }
        .emit(m),
        E::Opened { peer } => AdminConnectionOpened { peer }.emit(m),
        E::Closed { peer, error } => AdminConnectionClosed { peer, error }.emit(m),
        E::TimedOut {
            peer,
            timeout,
            path,
            limit,
        } => AdminTimedOut {
            peer,
            timeout: &timeout,
            path,
            limit,
        }
        .emit(m),
        E::PauseChanged(c) => HostPauseChanged {
            host: c.host,
            requested: c.requested,
            action: c.action,
            changed: c.changed,
            created: c.created,
        }
        .emit(m),
    }
}
