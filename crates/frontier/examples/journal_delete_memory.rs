//! What deleting a checkpointed host journal costs sled, by how many records one call
//! deletes.
//!
//! `cargo run --release -p frontier --example journal_delete_memory -- PER_CALL [RECORDS
//! [HOSTS]]`: writes HOSTS host-sized records (default 1M, 120 bytes, in key order) and
//! RECORDS journal records (default 43 690 of 6 KiB: the 256 MiB at which a checkpoint is
//! forced), each its own call with a few host records between them as a crawl writes them,
//! so the journal's leaves are long out of sled's 64 MiB cache; then deletes the journal
//! oldest first in calls of PER_CALL records (one `Store::apply` each) and prints the time,
//! the longest call, and the rise of VmRSS (sampled every 5 ms) over the deletion. With
//! glibc malloc (this example) the heap reuses what the writes freed and the rise reads 0;
//! under the daemon's mimalloc it shows (docs/benchmarks.md, "The store under sled").
//! Before session 16 a checkpoint deleted its whole journal in one `Store::apply` (sled
//! calls of 1 024) under the scheduler lock; now 64 per call.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use frontier::store::Batch;
use frontier::{keys, SledConfig, SledStore, Store};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let (per_call, records, hosts) = (arg(1, 64).max(1), arg(2, 43_690), arg(3, 1_000_000));
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = SledStore::open(dir.path(), &SledConfig::default()).expect("open sled");
    let host = |i: u64| keys::host(&format!("http://h{i}.test"));
    let started = Instant::now();
    let mut batch = Batch::new();
    for i in 0..hosts {
        batch.put(host(i), vec![7; 120]);
        batch.cut();
        if i % 1024 == 1023 {
            store.apply(std::mem::take(&mut batch)).expect("apply");
        }
    }
    store.apply(batch).expect("apply");
    store.flush().expect("flush");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for seq in 0..records {
        let mut batch = Batch::new();
        batch.put(keys::journal(seq), vec![(seq % 251) as u8; 6 * 1024 - 100]);
        batch.cut();
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            batch.put(host(x % hosts), vec![(x % 255) as u8; 120]);
        }
        store.apply(batch).expect("apply");
        if seq % 64 == 63 {
            store.flush().expect("flush");
        }
    }
    store.flush().expect("flush");
    println!(
        "{hosts} host records and {records} journal records written in {:.1} s, VmRSS {} MB",
        started.elapsed().as_secs_f64(),
        rss_kib() / 1024
    );
    let base = rss_kib();
    let peak = Arc::new(AtomicU64::new(base));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let started = Instant::now();
    let mut longest = Duration::ZERO;
    let mut seq = 0;
    while seq < records {
        let upto = records.min(seq + per_call);
        let mut batch = Batch::new();
        for s in seq..upto {
            batch.del(keys::journal(s));
            batch.cut();
        }
        let call = Instant::now();
        store.apply(batch).expect("apply");
        longest = longest.max(call.elapsed());
        seq = upto;
    }
    store.flush().expect("flush");
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    println!(
        "{records} journal records deleted {per_call} per call in {:.2} s (longest call {:.1} ms): \
         VmRSS {} MB before, +{} MB at most during it",
        took.as_secs_f64(),
        longest.as_secs_f64() * 1000.0,
        base / 1024,
        (peak.load(Ordering::Relaxed).saturating_sub(base)) / 1024
    );
}
