//! Giving freed heap back to the system.
//!
//! glibc malloc keeps the memory of freed small blocks in its heaps and hands back only
//! what is free at a heap's top. A fold, a burst of intake or sled's node copies free
//! hundreds of megabytes in the middle of the heap, and without this the resident size
//! stays at its peak for good (measured in docs/benchmarks.md, "10M scheduled URLs").
//! `malloc_trim` returns the free pages of every arena.

use std::ffi::OsStr;
use std::time::Duration;

/// glibc malloc arenas the daemon allows itself. glibc's default is eight per core, and
/// every thread that frees into its own arena keeps that arena's pages: with two, the peak
/// of a large intake is about halved (measured in docs/benchmarks.md, "10M scheduled URLs",
/// "Session 6").
pub const MALLOC_ARENAS: i32 = 2;

/// The arena limit to set: none when the operator set `MALLOC_ARENA_MAX` (glibc reads it
/// itself, and it wins).
fn arena_limit(env: Option<&OsStr>) -> Option<i32> {
    env.is_none().then_some(MALLOC_ARENAS)
}

/// Limit glibc's arenas to [`MALLOC_ARENAS`] unless `MALLOC_ARENA_MAX` is set. Call before
/// any thread starts (arenas already made stay). Returns the limit set, if any.
pub fn limit_arenas() -> Option<i32> {
    let n = arena_limit(std::env::var_os("MALLOC_ARENA_MAX").as_deref())?;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets a glibc tunable; called before other threads exist.
        (unsafe { libc::mallopt(libc::M_ARENA_MAX, n) } == 1).then_some(n)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = n;
        None
    }
}

/// How often the heap is trimmed: often enough that a peak does not linger, rarely enough
/// that the walk over the arenas (milliseconds for a heap of gigabytes) costs nothing.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Give the free pages of every malloc arena back to the system. Returns whether any
/// memory was released. Does nothing on a libc other than glibc.
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes
        // no pointers and may be called from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Trim the heap every [`TRIM_EVERY`] (on the blocking pool) until the runtime stops.
pub async fn trim_loop() {
    let mut tick = tokio::time::interval(TRIM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let _ = tokio::task::spawn_blocking(trim_heap).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_malloc_arena_max_wins_over_the_daemons_limit() {
        assert_eq!(arena_limit(None), Some(MALLOC_ARENAS));
        assert_eq!(arena_limit(Some(OsStr::new("8"))), None);
    }

    fn rss_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Memory freed in the middle of the heap stays resident until trimmed: 300 MB of
    /// small blocks freed behind one that is kept (so the heap's top cannot shrink) are
    /// given back by `trim_heap`.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_blocks_in_the_middle_of_the_heap_are_given_back() {
        let blocks: Vec<Vec<u8>> = (0..300_000).map(|i| vec![(i % 251) as u8; 1000]).collect();
        let pin = vec![1u8; 1000];
        let held = rss_kib();
        drop(blocks);
        let freed = rss_kib();
        assert!(
            freed + 100_000 > held,
            "glibc kept the freed blocks resident ({held} -> {freed} KiB) before the trim"
        );
        assert!(trim_heap(), "something was released");
        let trimmed = rss_kib();
        assert!(
            trimmed + 200_000 < freed,
            "after the trim: {freed} -> {trimmed} KiB"
        );
        assert_eq!(pin[0], 1);
    }
}
