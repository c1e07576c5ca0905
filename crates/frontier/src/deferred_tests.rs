//! URLs submitted with a `refetch_at` in the future wait in the due index (sled), not in
//! memory: their hashes are folded into the stored seen-set like any queued URL's, so the
//! in-memory part stays bounded by the intake buffer and they stay known across a reopen.

use crate::*;

const T0: u64 = 1_700_000_000_000;
const MONTH_MS: u64 = 30 * 24 * 3600 * 1000;

fn open(dir: &std::path::Path, intake_buffer_bytes: u64) -> Frontier {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(5);
    c.intake_buffer_bytes = intake_buffer_bytes;
    Frontier::open(c).unwrap()
}

fn scheduled(from: usize, n: usize) -> Vec<EnqueueItem> {
    (from..from + n)
        .map(|k| EnqueueItem {
            refetch_at_ms: Some(T0 + MONTH_MS),
            ..EnqueueItem::seed(format!("http://h{}.test/p/{k}", k % 97))
        })
        .collect()
}

#[test]
fn scheduled_urls_do_not_pile_up_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    // a 16 KiB intake buffer: a fold every ~200 scheduled URLs
    let f = open(dir.path(), 16 * 1024);
    let (batches, per_batch) = (40, 250);
    for b in 0..batches {
        let r = f
            .enqueue_items(&scheduled(b * per_batch, per_batch), T0)
            .unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
    }
    let in_memory = f.inner.lock().seen.recent.len();
    // the hashes not yet folded are at most about one buffer's worth (one batch here),
    // not the 10 000 URLs scheduled
    assert!(
        in_memory <= per_batch,
        "{in_memory} of {} scheduled URL hashes held in memory",
        batches * per_batch
    );
}

#[test]
fn a_scheduled_url_is_still_known_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let f = open(dir.path(), 1);
        let r = f.enqueue_items(&scheduled(0, 300), T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
        // not due for a month: nothing to fetch
        assert!(f.next_batch(T0, 10).unwrap().is_empty());
    }
    let f = open(dir.path(), 1);
    let again = f.enqueue_items(&scheduled(0, 300), T0).unwrap();
    let queued = again
        .iter()
        .filter(|x| **x == EnqueueResult::Queued)
        .count();
    assert_eq!(queued, 0, "scheduled URLs accepted again after a reopen");
}

/// sled stops charging a leaf to its page cache once the leaf is written as a blob (over a
/// quarter of a log segment), so such leaves stay in memory for good: the packed values
/// must stay small enough that no leaf of 17 of them gets there.
#[test]
fn packed_values_stay_small_enough_for_the_page_cache_to_evict() {
    use crate::store::packed::VALUE_TARGET_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path(), 256 * 1024);
    // scheduled in batches of 5 000 (one due second each) and queued over 3 hosts (long
    // queue segments), with folds growing the seen buckets past their split size
    for b in 0..8 {
        let r = f.enqueue_items(&scheduled(b * 5000, 5000), T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
        let queued: Vec<EnqueueItem> = (0..5000)
            .map(|k| EnqueueItem::seed(format!("http://q{}.test/page/{b}/{k}", k % 3)))
            .collect();
        f.enqueue_items(&queued, T0).unwrap();
    }
    let mut longest_entry = 0;
    for kv in f.store.scan_prefix(b"N") {
        let (_, v) = kv.unwrap();
        for (_, e) in crate::store::revisit::decode_due(&v).unwrap() {
            longest_entry = longest_entry.max(e.len() + 12);
        }
    }
    let mut counts = Vec::new();
    for prefix in [b"B", b"N", b"q", b"J", b"W"] {
        let mut n = 0;
        for kv in f.store.scan_prefix(prefix) {
            let (k, v) = kv.unwrap();
            n += 1;
            assert!(
                v.len() <= VALUE_TARGET_BYTES + longest_entry,
                "{} bytes under key {:?}",
                v.len(),
                String::from_utf8_lossy(&k[..1])
            );
        }
        counts.push(n);
    }
    // every kind was written (the assertion above judged something)
    assert!(counts[..3].iter().all(|&n| n > 1), "{counts:?}");
}
