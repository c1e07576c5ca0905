//! A gate over dispatch beside politeness: whether a host may be handed out at all right
//! now. A cluster node closes it for the hosts of shards it does not hold (or no longer
//! holds safely: its lease could not be renewed in time), and for a while on the hosts of
//! a shard it just took over, so that two nodes never fetch one host. The frontier knows
//! nothing of shards: it asks the gate by politeness key.

/// Asked by the scheduler for each host whose turn came, before anything is handed out.
pub trait DispatchGate: Send + Sync {
    /// `None`: the host may be visited now. `Some(ms)`: not now; the host keeps its place
    /// and is asked again after `ms` (at least 1).
    fn closed_for(&self, key: &str) -> Option<u64>;
}
