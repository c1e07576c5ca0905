//! What the daemon says about its progress: the periodic INFO `progress` line (with the
//! systemd status and watchdog), and "crawl drained: nothing queued, nothing in flight",
//! logged (and counted) once each time the crawl runs out of work, again only after new
//! work arrived and drained too. URLs held back by robots.txt, back-off or a pause are
//! still queued: drained means nothing is left to do until new URLs come in.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use frontierd_pipeline::drain::DrainAnnouncer;

use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::lifecycle::{CrawlDrained, Progress};
use crate::internal_events::InternalEvent;

/// How often the frontier is looked at. Cheap: the full count of queued URLs is redone
/// only when the frontier's counters moved since the last count.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Counters that move whenever a URL enters, leaves or changes state in a queue.
fn activity(sh: &Shared) -> [u64; 8] {
    let s = sh.frontier.stats();
    [
        s.enqueued,
        s.recovered_leases,
        s.dispatched,
        s.robots_fetches,
        s.completed,
        s.dropped,
        s.given_up,
        s.retried,
    ]
}

/// Whether nothing is queued (held URLs included) and nothing in flight.
fn is_drained(sh: &Shared) -> bool {
    if sh.in_flight.load(Ordering::SeqCst) > 0 || sh.frontier.next_ready_at().is_some() {
        return false;
    }
    // no host is scheduled, but paused or robots-held hosts may still have URLs (read
    // from memory: every host with work is there)
    let t = sh.frontier.host_totals(now_ms());
    t.queued == 0 && t.in_flight == 0
}

pub async fn drain_watch(sh: Arc<Shared>) {
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut announcer = DrainAnnouncer::default();
    // (counters, workers busy) at the last full look, and what it found
    let mut last: Option<(([u64; 8], u64), bool)> = None;
    loop {
        tick.tick().await;
        if sh.stopping.load(Ordering::SeqCst) {
            return;
        }
        let now = (activity(&sh), sh.in_flight.load(Ordering::SeqCst));
        let drained = match last {
            Some((before, drained)) if before == now => drained,
            _ => is_drained(&sh),
        };
        last = Some((now, drained));
        if announcer.observe(drained, now.0[0] + now.0[1]) {
            CrawlDrained {
                fetched: sh.metrics.pages_completed.get(),
            }
            .emit(&sh.metrics);
        }
    }
}

pub async fn stats_loop(sh: Arc<Shared>) {
    let every = sh.settings.raw.log.stats_interval.0;
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    let mut last_pages = 0u64;
    let mut last_bytes = 0u64;
    let mut watchdog_usec = 0u64;
    let watchdog = sd_notify::watchdog_enabled(false, &mut watchdog_usec);
    let wd_every = Duration::from_micros(watchdog_usec / 2).max(Duration::from_millis(500));
    let mut wd_tick = tokio::time::interval(wd_every);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let s = sh.snapshot();
                let pages = s.pages_fetched;
                let bytes = s.bytes_fetched;
                let secs = every.as_secs_f64();
                let pps = (pages - last_pages) as f64 / secs;
                let bps = (bytes - last_bytes) as f64 / secs;
                last_pages = pages;
                last_bytes = bytes;
                Progress {
                    pages_per_s: pps,
                    bytes_per_s: bps,
                    snapshot: &s,
                }
                .emit(&sh.metrics);
                let status = format!(
                    "{pps:.1} pages/s, {} queued, {} fetched",
                    s.queued, pages
                );
                let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Status(&status)]);
            }
            _ = wd_tick.tick(), if watchdog => {
                let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
            }
        }
    }
}
