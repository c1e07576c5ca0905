//! One type per observable event of the daemon, in the shape of Vector's `internal_events`:
//! an event's [`InternalEvent::emit`] writes its log line and updates its metric in one
//! place, so the two can never disagree. Labels come from typed values (a
//! [`crawl::FetchClass`], a [`crawl::Outcome`], a [`SpoolResult`], ...), each mapped to its
//! label text once, here. The metrics themselves are registered in metrics.rs and described
//! in docs/metrics.md.
//!
//! - fetch.rs: leases, page and robots.txt fetches, retries, redirect chains
//! - intake.rs: URLs offered and rejected, spool entries
//! - output.rs: crawl log lines and reopening, WARC exchanges and failures
//! - admin.rs: admin API connections, refusals and timeouts
//! - lifecycle.rs: the crawl draining
//! - sitemap.rs: sitemaps parsed or cut, their URLs offered, robots.txt sitemaps refused
//! - network.rs: DNS failures of fetches, hosts joining IP groups
//! - cluster.rs: `[cluster]`: broker pauses, shard deliveries, link routing, events
//! - daemon.rs: the daemon's start, listeners and stop; frontier calls of the pipeline that failed
//! - grpc.rs: the url-frontier gRPC API's events, counted, and the server failing
//! - disk.rs: the free-space watch: space low and back, refused submissions

pub mod admin;
pub mod cluster;
pub mod daemon;
pub mod disk;
pub mod fetch;
pub mod grpc;
pub mod intake;
pub mod lifecycle;
pub mod network;
pub mod output;
pub mod sitemap;

use crate::metrics::{Labels, Metrics};

/// Something that happened which the operator can see in the log and in `/metrics`.
pub trait InternalEvent {
    /// Log it and count it.
    fn emit(self, metrics: &Metrics);
}

/// A one-label set.
fn label(key: &str, value: &'static str) -> Labels {
    vec![(key.to_string(), value.to_string())]
}

/// An error with its causes, `a: b: c` (what `{:#}` shows for anyhow).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests;
