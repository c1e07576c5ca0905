//! `frontierd run`: the daemon's tasks, wired together. Every decision is the library
//! crates' (frontier: what to fetch when; crawl: what a fetch means; warc: the archive);
//! these files start tasks, pass data between them and report.
//!
//! - run.rs: start-up, the task set, the shutdown sequence
//! - shared.rs: the state every task shares; submitting URLs, the crawl log, WARC writing
//! - (between frontier and workers, the dispatcher and the completer are
//!   `frontierd_pipeline`'s; run.rs reports what they tell through its `Hooks`)
//! - worker.rs: fetch workers (take an item, fetch, archive, judge, log, report back)
//! - sitemaps.rs: sitemaps from robots.txt, config and submissions; a leased one parsed
//! - intake.rs: URL lists in (API batches, `--seeds`, the spool directory)
//! - stats.rs: the counters `/v1/stats`, `/metrics` and the progress line share
//! - progress.rs: the periodic progress line and "crawl drained"
//! - cluster/: `[cluster]`: shard consumers, link outbox, events, node status
//! - signals.rs: SIGTERM/SIGINT stop, SIGHUP reopens the crawl log

pub mod cluster;
pub mod disk;
pub mod intake;
pub mod offer;
pub mod open_files;
pub mod progress;
pub mod run;
pub mod shared;
pub mod signals;
pub mod sitemaps;
pub mod stats;
pub mod worker;

/// The frontier's clock: unix ms counted on the monotonic clock (frontierd-clock), so a
/// wall clock stepped under the daemon neither breaks a gap nor holds the hosts.
pub use frontierd_clock::now_ms;
/// The wall clock's unix ms: the time of day a log line carries.
pub use frontierd_clock::wall_ms;
