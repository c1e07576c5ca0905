//! What can go wrong in the frontier.

use crate::store::codec::CodecError;
use crate::store::StoreError;
use crate::work::LeaseId;

/// Frontier failure.
#[derive(Debug, thiserror::Error)]
pub enum FrontierError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record could not be decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A stored robots record could not be decoded.
    #[error("robots record: {0}")]
    Robots(#[from] robots_policy::state::DecodeError),
    /// The lease is not (or no longer) in flight, e.g. it returned to its queue at restart.
    #[error("unknown lease {0:?}")]
    UnknownLease(LeaseId),
    /// A robots lease for an origin that has no robots fetch in flight.
    #[error("no robots fetch in flight for {0}")]
    UnknownRobotsLease(String),
}

impl FrontierError {
    /// Whether the store failed because its disk is full or read-only (see
    /// [`StoreError::disk_unavailable`]).
    pub fn disk_unavailable(&self) -> bool {
        matches!(self, FrontierError::Store(e) if e.disk_unavailable())
    }
}

/// Result alias.
pub type Result<T, E = FrontierError> = std::result::Result<T, E>;
