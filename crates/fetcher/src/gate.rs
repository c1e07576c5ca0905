//! The send gate: the caller's last word on whether a request may go to an origin, asked at
//! the last moment it can be, on the connection itself (before it is opened and before each
//! write on it), not when the fetch starts.
//!
//! A caller whose right to ask a host can lapse while a request waits (a cluster node
//! frozen by SIGSTOP or a stalled VM between deciding to fetch and writing the request)
//! checks that right itself before fetching; this narrows what is left, the time between
//! that check and the bytes leaving, from a connect and several task hops to one
//! `poll_write`.

use std::io;
use std::sync::{Arc, OnceLock};

/// Answers whether a request may be sent to an origin this instant.
pub trait SendGate: Send + Sync {
    /// `origin` is `scheme://host[:port]` as in the request's URI (the host lowercase, an
    /// IPv6 literal in brackets, the port only when the URL gave one).
    fn may_send(&self, origin: &str) -> bool;
}

/// The gate a fetcher's gated connections ask; set at most once (a fetcher without one
/// sends everything).
pub(crate) type SharedGate = Arc<OnceLock<Arc<dyn SendGate>>>;

/// Why nothing (more) was sent to `origin`: its gate said no.
#[derive(Debug, Clone, thiserror::Error)]
#[error("request to {origin} withheld: the send gate is closed for it")]
pub struct Withheld {
    /// The origin the request was for, as given to [`SendGate::may_send`].
    pub origin: String,
}

/// A gated connection's origin and the gate it asks.
#[derive(Clone)]
pub(crate) struct Gated {
    gate: SharedGate,
    origin: Box<str>,
}

impl std::fmt::Debug for Gated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gated")
            .field("origin", &self.origin)
            .finish()
    }
}

impl Gated {
    /// For connections to `uri`'s scheme and authority.
    pub(crate) fn new(gate: SharedGate, uri: &http::Uri) -> Self {
        let origin = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.as_str())
        );
        Gated {
            gate,
            origin: origin.into(),
        }
    }

    /// `Ok` when no gate is set or it says yes now.
    pub(crate) fn check(&self) -> Result<(), Withheld> {
        match self.gate.get() {
            Some(g) if !g.may_send(&self.origin) => Err(Withheld {
                origin: self.origin.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// [`Gated::check`] as the I/O error a write returns (hyper carries it up; the
    /// fetcher finds it in the chain).
    pub(crate) fn check_io(&self) -> io::Result<()> {
        self.check().map_err(io::Error::other)
    }
}
