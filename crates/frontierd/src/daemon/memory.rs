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

/// Blocks at least this large get their own mapping, given back to the system when freed.
/// glibc starts at 128 KiB and raises the threshold to the size of each mapped block freed
/// (up to 32 MiB), after which sled's node copies (tens of KiB, churned by every fold) are
/// carved from the heap and leave it fragmented: a fixed 32 KiB lowered the peak of a
/// 3M-URL intake by a sixth (docs/benchmarks.md, "Issue 13, session 7").
pub const MALLOC_MMAP_THRESHOLD: i32 = 32 * 1024;

/// The glibc malloc settings the daemon makes, each unless the operator's environment
/// already sets it (glibc reads those variables itself, and they win).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MallocTuning {
    /// `M_ARENA_MAX`, unless `MALLOC_ARENA_MAX` is set.
    pub arena_max: Option<i32>,
    /// `M_MMAP_THRESHOLD`, unless `MALLOC_MMAP_THRESHOLD_` is set.
    pub mmap_threshold: Option<i32>,
}

impl MallocTuning {
    fn for_env(arena_max: Option<&OsStr>, mmap_threshold: Option<&OsStr>) -> MallocTuning {
        MallocTuning {
            arena_max: arena_max.is_none().then_some(MALLOC_ARENAS),
            mmap_threshold: mmap_threshold.is_none().then_some(MALLOC_MMAP_THRESHOLD),
        }
    }
}

/// Limit glibc's arenas to [`MALLOC_ARENAS`] and fix its mmap threshold at
/// [`MALLOC_MMAP_THRESHOLD`], each unless the environment sets it. Call before any thread
/// starts (arenas already made stay). Returns what was set.
pub fn tune_malloc() -> MallocTuning {
    let wanted = MallocTuning::for_env(
        std::env::var_os("MALLOC_ARENA_MAX").as_deref(),
        std::env::var_os("MALLOC_MMAP_THRESHOLD_").as_deref(),
    );
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets a glibc tunable; called before other threads exist.
        let set =
            |param, value: Option<i32>| value.filter(|&v| unsafe { libc::mallopt(param, v) } == 1);
        MallocTuning {
            arena_max: set(libc::M_ARENA_MAX, wanted.arena_max),
            mmap_threshold: set(libc::M_MMAP_THRESHOLD, wanted.mmap_threshold),
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = wanted;
        MallocTuning {
            arena_max: None,
            mmap_threshold: None,
        }
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
    fn an_operators_malloc_settings_win_over_the_daemons() {
        let ours = MallocTuning::for_env(None, None);
        assert_eq!(ours.arena_max, Some(MALLOC_ARENAS));
        assert_eq!(ours.mmap_threshold, Some(MALLOC_MMAP_THRESHOLD));
        let theirs = MallocTuning::for_env(Some(OsStr::new("8")), Some(OsStr::new("1048576")));
        assert_eq!(theirs.arena_max, None);
        assert_eq!(theirs.mmap_threshold, None);
    }

    /// After a large block was freed, glibc's own threshold would rise and put later
    /// 64 KiB blocks on the heap, where freeing them gives nothing back until a trim. With
    /// the fixed threshold each is mapped, and freeing it returns its pages at once.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn blocks_over_the_fixed_threshold_are_given_back_when_freed() {
        let _turn = RESIDENT_SIZE.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(
            tune_malloc().mmap_threshold,
            std::env::var_os("MALLOC_MMAP_THRESHOLD_")
                .is_none()
                .then_some(MALLOC_MMAP_THRESHOLD)
        );
        // what raises glibc's dynamic threshold to 1 MiB
        drop(std::hint::black_box(vec![1u8; 1 << 20]));
        // each followed by a small block that stays, so the heap's top cannot shrink
        let (blocks, pins): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (0..3000)
            .map(|i| (vec![(i % 251) as u8; 64 << 10], vec![1u8; 100]))
            .unzip();
        let held = rss_kib();
        drop(blocks);
        let freed = rss_kib();
        assert!(
            freed + 150_000 < held,
            "192 MB of 64 KiB blocks stayed resident when freed: {held} -> {freed} KiB"
        );
        assert!(pins.iter().all(|p| p[0] == 1));
    }

    /// The tests that read the process's resident size take turns.
    static RESIDENT_SIZE: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
        let _turn = RESIDENT_SIZE.lock().unwrap_or_else(|e| e.into_inner());
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
