//! frontier: storage and scheduling for frontierd.
//!
//! It owns: canonical URLs ([`canon`]), the exact seen-set, one durable FIFO queue per
//! politeness key (host, registrable domain, or origin), per-host records (next-allowed instant,
//! in-flight count, back-off, crawl-delay, last response time, counters), robots records
//! (stored as the robots backend's encoded bytes, decoded states cached in a bounded
//! cache), the politeness scheduler with a global rate quota (`governor`), leases with
//! at-least-once delivery across crashes, group-commit enqueue, and the robots gate that
//! asks robots-policy about every URL before it is handed out.
//!
//! It must never perform network I/O, read the clock (every call takes `now_ms`, unix
//! milliseconds, from its caller), hand out a URL whose origin's robots verdict is not
//! allow, hand two requests to one host inside its gap, or acknowledge a URL, a lease or a
//! robots state before it is durable.

pub mod canon;
pub mod codec;
pub mod commit;
pub mod config;
pub mod failure;
mod frontier;
pub mod packed;
pub mod robots;
pub mod store;

pub use canon::{canonicalize, CanonicalUrl, PolitenessKeyMode, Rejection};
pub use codec::{DropReason, DropRecord, HostCounters, HostRecord, QueueEntry};
pub use config::{CrawlDelayOverCap, FrontierConfig};
pub use failure::{FailureScope, NetworkFailure, PageOutcome};
pub use frontier::{
    keys, url_hash, EnqueueItem, EnqueueResult, Frontier, FrontierError, FrontierStats, LeaseId,
    PageLease, QueueBreakdown, Result, RobotsLease, WorkItem,
};
pub use robots::{PolicyRobots, RobotsBackend, RobotsDecision, RobotsFetchOutcome};
pub use store::{SledConfig, SledStore, Store, StoreError};
