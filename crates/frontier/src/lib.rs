//! frontier: storage and scheduling for frontierd.
//!
//! It owns: canonical URLs ([`canon`]), the exact seen-set, one durable FIFO queue per
//! politeness key (host, registrable domain, or origin), per-host records (next-allowed instant,
//! in-flight count, back-off, crawl-delay, last response time, counters), robots records
//! (stored as robots-policy's encoded bytes, decoded states cached in a bounded
//! cache), the politeness scheduler with a global rate quota (a token bucket on the caller's clock), leases with
//! at-least-once delivery across crashes, group-commit enqueue, and the robots gate that
//! asks robots-policy about every URL before it is handed out.
//!
//! It must never perform network I/O, read the clock (every call takes `now_ms`, unix
//! milliseconds, from its caller), hand out a URL whose origin's robots verdict is not
//! allow, hand two requests to one host inside its gap, or acknowledge a URL, a lease or a
//! robots state before it is durable.
//!
//! The house: [`sched`] holds the rules (pure, no store), [`store`] what is durable (the
//! engine, keys, encodings, journal, recovery); `intake.rs`, `dispatch.rs` and
//! `complete.rs` join the two for each call of the public API (`api.rs`).

mod api;
pub mod canon;
mod census;
mod complete;
mod complete_robots;
pub mod config;
pub mod crawl;
mod crawl_ops;
mod dispatch;
mod done;
mod error;
pub mod events;
mod external;
mod fold;
mod gauges;
mod hand_over;
mod intake;
mod lastmod;
mod open;
mod pack;
mod recrawl;
mod resolve;
pub mod sched;
mod seen;
pub mod store;
mod views;
mod work;

#[cfg(test)]
mod crash_gap_tests;
#[cfg(test)]
mod deferred_tests;
#[cfg(test)]
mod fold_tests;
#[cfg(test)]
mod ipgroup_tests;
#[cfg(test)]
mod liveness_tests;
#[cfg(test)]
mod pack_tests;
#[cfg(test)]
mod robots_batch_tests;
#[cfg(test)]
mod robots_spare_tests;
#[cfg(test)]
mod tests;

pub use api::Frontier;
pub use canon::{canonicalize, CanonicalUrl, PolitenessKeyMode, Rejection};
pub use config::{CrawlDelayOverCap, FrontierConfig};
pub use crawl::{CrawlQueue, DEFAULT_CRAWL};
pub use error::{FrontierError, Result};
pub use events::{FrontierEvent, FrontierStats, HostTotals, OriginView, QueueGauges};
pub use gauges::GAUGE_AGE_MS_PER_1000_HOSTS;
pub use lastmod::LastmodResult;
pub use resolve::ResolveRequest;
pub use sched::aside::QueueBreakdown;
pub use sched::failure::{FailureScope, NetworkFailure, PageOutcome};
pub use sched::gate::DispatchGate;
pub use sched::recrawl::{
    RecrawlConfig, RevisitRecord, UrlPattern, Validators, Visit, VisitOutcome,
};
pub use sched::robots_gate::{OriginState, RobotsDecision, RobotsEngine, RobotsFetchOutcome};
pub use store::codec::{DropReason, DropRecord, HostCounters, HostRecord, QueueEntry};
pub use store::control::QueueControl;
pub use store::{keys, MemStore, SledConfig, SledStore, Store, StoreError};
pub use views::HostRank;
pub use work::{
    url_hash, ChangeFreq, EnqueueItem, EnqueueResult, EntryKind, LeaseId, PageLease, RobotsLease,
    SitemapHints, SitemapSource, WorkItem,
};
