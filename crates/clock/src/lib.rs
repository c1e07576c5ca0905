//! frontierd-clock: the time the daemon gives its frontier (`now_ms`, unix milliseconds).
//!
//! It owns one reading of the wall clock, taken at the first call, and the monotonic clock
//! counted from it. A host's gap, a back-off or a lease deadline counted on this time is
//! the time that really passed, whatever happens to the wall clock under a running daemon
//! (NTP stepping it, a virtual machine resumed, an operator's `date -s`): on the wall clock
//! a step forward let every host's next page out at once, and a step back held every host
//! for as long as the clock went back. A restart reads the wall clock again, so stored
//! times stay unix times. (The monotonic clock does not count a suspended machine's sleep:
//! after one, this time is behind the wall clock by the sleep, which only makes gaps
//! longer.)
//!
//! It must never give a time that goes back, and never serve as the time of day a person
//! reads (the crawl log and the WARC records are dated by the wall clock itself: [`wall_ms`]).

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The wall clock read once, and the monotonic instant of that reading.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    wall_ms: u64,
    at: Instant,
}

impl Anchor {
    fn now() -> Anchor {
        Anchor {
            wall_ms: wall_ms(),
            at: Instant::now(),
        }
    }

    /// The unix ms of instant `t` (an instant before the anchor is the anchor's time).
    fn ms_at(&self, t: Instant) -> u64 {
        let elapsed = t.saturating_duration_since(self.at).as_millis();
        self.wall_ms
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

/// Unix time in milliseconds, counted on the monotonic clock from the first call's reading
/// of the wall clock: the frontier's clock (see the crate's documentation).
pub fn now_ms() -> u64 {
    ANCHOR.get_or_init(Anchor::now).ms_at(Instant::now())
}

/// Unix time in milliseconds as the wall clock says it now: the time of day a log line
/// carries (0 before 1970).
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn time_is_the_anchor_plus_the_monotonic_time_since() {
        let at = Instant::now();
        let a = Anchor {
            wall_ms: 1_700_000_000_000,
            at,
        };
        assert_eq!(a.ms_at(at), 1_700_000_000_000);
        assert_eq!(
            a.ms_at(at + Duration::from_millis(1_500)),
            1_700_000_001_500
        );
        // an instant taken before the anchor (another thread's) does not go back
        assert_eq!(
            a.ms_at(at.checked_sub(Duration::from_secs(1)).unwrap_or(at)),
            1_700_000_000_000
        );
    }

    #[test]
    fn the_clock_starts_at_the_wall_clock() {
        let wall = wall_ms();
        let first = now_ms();
        assert!(first.abs_diff(wall) < 60_000, "{first} against {wall}");
    }
}
