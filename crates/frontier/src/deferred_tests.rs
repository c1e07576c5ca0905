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
