//! What the gauges show about the queues: totals over the hosts and the queued URLs split by
//! what they wait for, from one walk over the hosts in memory, reused while it is young.
//!
//! The walk touches every host in memory (a cache miss each: 0.1-0.3 µs a host here), under
//! the scheduler lock. At a million hosts that is a third of a second during which nothing
//! is handed out or completed, so a client polling stats twice a second halved the crawl
//! (docs/benchmarks.md, "Admin API while crawling"). A walk is therefore reused for
//! [`GAUGE_AGE_MS_PER_1000_HOSTS`] per thousand hosts: at most ~3 % of the lock's time.

use crate::api::{Frontier, Inner};
use crate::error::Result;
use crate::events::{HostTotals, QueueGauges};
use crate::sched::aside::QueueBreakdown;

/// How long (ms) a walk is reused, per thousand hosts in memory: 10 s at a million, 1 s at
/// 100 000, never below a few hundred hosts.
pub const GAUGE_AGE_MS_PER_1000_HOSTS: u64 = 10;

impl Frontier {
    /// Totals and the queue breakdown for gauges, as of the last walk over the hosts if that
    /// is younger than [`GAUGE_AGE_MS_PER_1000_HOSTS`] per thousand hosts at `now_ms` (see
    /// `computed_at_ms`), else from a new walk. [`Frontier::queue_breakdown`] and
    /// [`Frontier::host_totals`] always walk.
    pub fn queue_gauges(&self, now_ms: u64) -> Result<QueueGauges> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let max_age_ms = inner.sched.host_count() as u64 * GAUGE_AGE_MS_PER_1000_HOSTS / 1000;
        if let Some(g) = &inner.gauges {
            let age = now_ms.checked_sub(g.computed_at_ms);
            if age.is_some_and(|a| a < max_age_ms) {
                return Ok(g.clone());
            }
        }
        let (totals, breakdown) = self.walk_hosts(inner, now_ms)?;
        let g = QueueGauges {
            totals,
            breakdown,
            computed_at_ms: now_ms,
        };
        inner.gauges = Some(g.clone());
        Ok(g)
    }

    /// Queued URLs split by what they wait for at `now_ms`, from the hosts in memory. The
    /// robots state of an origin holding URLs is the census's (an origin without a record
    /// is unknown), not decoded from the store: at a million hosts waiting for robots.txt,
    /// decoding each one's record made every metrics scrape hold the scheduler for most
    /// of a second.
    pub fn queue_breakdown(&self, now_ms: u64) -> Result<QueueBreakdown> {
        let mut guard = self.inner.lock();
        Ok(self.walk_hosts(&mut guard, now_ms)?.1)
    }

    fn walk_hosts(&self, inner: &mut Inner, now_ms: u64) -> Result<(HostTotals, QueueBreakdown)> {
        self.refresh_census(inner, now_ms)?;
        let inner = &*inner;
        let mut totals = HostTotals {
            paused: inner.sched.paused_count() as u64,
            ..HostTotals::default()
        };
        let mut out = QueueBreakdown::default();
        let robots_kind = |origin: &str| {
            inner
                .census
                .kind_of(origin)
                .unwrap_or(robots_policy::state::RobotsStateKind::Unknown)
                .as_str()
        };
        let held_by_robots = |origin: &str, n: u64, out: &mut QueueBreakdown| {
            if n > 0 {
                *out.robots.entry(robots_kind(origin)).or_default() += n;
            }
        };
        for h in inner.sched.hosts().map(|(_, h)| h) {
            let queued = h.rec.counters.queued;
            totals.queued += queued;
            totals.in_flight += u64::from(h.rec.in_flight);
            if h.rec.backoff_until_ms > now_ms {
                totals.in_backoff += 1;
            }
            if inner.sched.is_paused(&h.key) {
                out.paused += queued;
                continue;
            }
            let mut rest = queued;
            for (origin, p) in h.aside().parked.iter() {
                let n = (p.seqs.len() as u64).min(rest);
                if crate::crawl::is_limit_park(origin) {
                    // a client's crawl limit holds them, as a pause would
                    out.paused += n;
                    rest -= n;
                    continue;
                }
                held_by_robots(origin, n, &mut out);
                rest -= n;
            }
            let delayed = (h.aside().delayed.len() as u64).min(rest);
            out.politeness += delayed;
            rest -= delayed;
            let blocking_origin = h.robots_pending_origin().or_else(|| {
                h.aside()
                    .held_origin
                    .as_deref()
                    .filter(|_| h.hold_until_ms() > now_ms)
            });
            if let Some(origin) = blocking_origin {
                held_by_robots(origin, rest, &mut out);
                continue;
            }
            let ready = h.rec.next_allowed_ms.max(h.rec.backoff_until_ms);
            let ip_busy = h.ip.is_some_and(|ip| {
                inner.sched.ip_gate(ip, now_ms) != crate::sched::ipgroup::IpGate::Go
            });
            if ready > now_ms
                || ip_busy
                || u64::from(h.rec.in_flight) >= self.cfg.max_in_flight_per_host
            {
                out.politeness += rest;
            } else {
                out.eligible += rest;
            }
        }
        Ok((totals, out))
    }
}

#[cfg(test)]
mod tests {
    use crate::*;

    const T0: u64 = 1_700_000_000_000;

    fn open(dir: &std::path::Path) -> Frontier {
        Frontier::open(FrontierConfig::new(dir).without_gaps()).unwrap()
    }

    /// With a few hosts the gauges are walked at every call; with thousands a walk is
    /// reused for 10 ms a thousand hosts, then walked again, and says when it was made.
    #[test]
    fn a_gauge_walk_is_reused_only_while_it_is_young() {
        let dir = tempfile::tempdir().unwrap();
        let f = open(dir.path());
        f.enqueue_batch(&["http://a.test/1"], T0).unwrap();
        assert_eq!(f.queue_gauges(T0).unwrap().totals.queued, 1);
        f.enqueue_batch(&["http://a.test/2"], T0).unwrap();
        let g = f.queue_gauges(T0).unwrap();
        assert_eq!(g.totals.queued, 2, "one host: walked again at once");
        assert_eq!(g.breakdown.total(), 2);

        let urls: Vec<String> = (0..3_000).map(|h| format!("http://h{h}.test/")).collect();
        f.enqueue_batch(&urls, T0).unwrap();
        let first = f.queue_gauges(T0 + 100).unwrap();
        assert_eq!(first.totals.queued, 3_002);
        f.enqueue_batch(&["http://a.test/3"], T0 + 101).unwrap();
        // 3 001 hosts: reused for 30 ms
        let reused = f.queue_gauges(T0 + 129).unwrap();
        assert_eq!(reused.totals.queued, 3_002);
        assert_eq!(reused.computed_at_ms, T0 + 100);
        let fresh = f.queue_gauges(T0 + 130).unwrap();
        assert_eq!(fresh.totals.queued, 3_003);
        assert_eq!(fresh.breakdown.total(), 3_003);
        assert_eq!(fresh.computed_at_ms, T0 + 130);
        // the exact calls always walk
        f.enqueue_batch(&["http://a.test/4"], T0 + 131).unwrap();
        assert_eq!(f.host_totals(T0 + 131).queued, 3_004);
        assert_eq!(f.queue_breakdown(T0 + 131).unwrap().total(), 3_004);
        // ... while the gauges reuse the walk made at T0 + 130, unless the clock went back
        assert_eq!(f.queue_gauges(T0 + 131).unwrap().totals.queued, 3_003);
        assert_eq!(f.queue_gauges(T0).unwrap().totals.queued, 3_004);
    }
}
