//! The daemon's heap: mimalloc (the binary sets it as the global allocator), how soon it
//! gives freed memory back to the system, and a periodic collection so that memory freed by
//! a burst of intake goes back even when no thread allocates afterwards.
//!
//! Why mimalloc: with glibc malloc a large intake while crawling spent about a fifth of
//! the daemon's CPU in the allocator (a large, fragmented heap), and glibc's own knobs did
//! not close the gap; the figures are in docs/benchmarks.md, "The allocator".
//!
//! It owns the allocator's settings and the collection; it never sets the global allocator
//! (the binary does), overrides an operator's `MIMALLOC_*` variable, logs or counts.

use std::ffi::OsStr;
use std::time::Duration;

/// mimalloc's `mi_option_purge_delay` (libmimalloc-sys pins mimalloc 3.3: the 16th entry of
/// `mi_option_e`, default 1000 ms; the crate exports no constant for it). A test checks
/// the default it reports, which no other option shares.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory stays committed before mimalloc gives it back (ms). mimalloc 3
/// waits a second, which raised the intake's peak; 0 cost more CPU per URL for about the
/// same peak (docs/benchmarks.md, "The allocator").
pub const PURGE_DELAY_MS: i64 = 10;

/// The allocator settings the daemon makes, each unless the operator's environment already
/// sets it (mimalloc reads its `MIMALLOC_*` variables itself, and they win).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatorTuning {
    /// mimalloc's purge delay (ms), unless `MIMALLOC_PURGE_DELAY` is set.
    pub purge_delay_ms: Option<i64>,
}

impl AllocatorTuning {
    fn for_env(purge_delay: Option<&OsStr>) -> AllocatorTuning {
        AllocatorTuning {
            purge_delay_ms: purge_delay.is_none().then_some(PURGE_DELAY_MS),
        }
    }
}

/// Set mimalloc's purge delay to [`PURGE_DELAY_MS`] unless the environment sets it. Call
/// before the runtime's threads start (mimalloc's options are not synchronized). Returns
/// what was set.
pub fn tune_allocator() -> AllocatorTuning {
    let wanted = AllocatorTuning::for_env(std::env::var_os("MIMALLOC_PURGE_DELAY").as_deref());
    if let Some(ms) = wanted.purge_delay_ms {
        // SAFETY: sets one of mimalloc's numeric options; no pointers, and no other thread
        // exists yet to read the option concurrently.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms as _) };
    }
    wanted
}

/// How often the heap is collected: often enough that a peak does not linger, rarely enough
/// that the walk costs nothing.
const COLLECT_EVERY: Duration = Duration::from_secs(10);

/// Give freed memory back to the system now: mimalloc's purges that are due (whatever
/// their delay), and glibc's free pages (the C libraries' allocations still use it).
pub fn release_free_memory() {
    // SAFETY: mi_collect only walks mimalloc's own heaps; callable from any thread.
    unsafe { libmimalloc_sys::mi_collect(true) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes
        // no pointers and may be called from any thread at any time.
        unsafe { libc::malloc_trim(0) };
    }
}

/// Collect the heap every [`COLLECT_EVERY`] (on the blocking pool) until the runtime stops.
pub async fn collect_loop() {
    let mut tick = tokio::time::interval(COLLECT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let _ = tokio::task::spawn_blocking(release_free_memory).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As in the daemon: the resident-size test measures mimalloc's heap.
    #[global_allocator]
    static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

    #[test]
    fn an_operators_allocator_settings_win_over_the_daemons() {
        let ours = AllocatorTuning::for_env(None);
        assert_eq!(ours.purge_delay_ms, Some(PURGE_DELAY_MS));
        let theirs = AllocatorTuning::for_env(Some(OsStr::new("250")));
        assert_eq!(theirs.purge_delay_ms, None);
    }

    /// The option index is the purge delay: before the daemon sets it, it reads mimalloc's
    /// default for that option (1000 ms, no other option's), and after, the daemon's. The
    /// only test that sets it.
    #[test]
    fn the_purge_delay_set_is_mimallocs_purge_delay() {
        let _turn = RESIDENT_SIZE.lock().unwrap_or_else(|e| e.into_inner());
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return; // the operator's value; nothing of ours to check
        }
        // SAFETY: reads one numeric option; the tests that set it hold RESIDENT_SIZE.
        let read = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) } as i64;
        let before = read();
        assert_eq!(
            before, 1000,
            "option {MI_OPTION_PURGE_DELAY} is not mimalloc's purge delay"
        );
        assert_eq!(tune_allocator().purge_delay_ms, Some(PURGE_DELAY_MS));
        assert_eq!(read(), PURGE_DELAY_MS);
    }

    /// Memory freed in the middle of the heap goes back to the system when collected,
    /// whatever the purge delay: 300 MB of small blocks freed behind one that is kept.
    #[test]
    fn freed_blocks_in_the_middle_of_the_heap_are_given_back() {
        let _turn = RESIDENT_SIZE.lock().unwrap_or_else(|e| e.into_inner());
        let blocks: Vec<Vec<u8>> = (0..300_000).map(|i| vec![(i % 251) as u8; 1000]).collect();
        let pin = vec![1u8; 1000];
        let held = rss_kib();
        drop(blocks);
        release_free_memory();
        let released = rss_kib();
        assert!(
            released + 200_000 < held,
            "300 MB of freed blocks stayed resident: {held} -> {released} KiB"
        );
        assert_eq!(pin[0], 1);
    }

    /// The tests that read the process's resident size or mimalloc's options take turns.
    static RESIDENT_SIZE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn rss_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}
