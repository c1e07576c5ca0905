//! Frontier benchmark: ingest N URLs over H hosts into a fresh store, then dispatch (and
//! complete) them all with zero politeness gaps and every origin's robots preset to
//! allow-all; then raw sled insert/remove of N keys as the reference.
//!
//! `cargo bench -p frontier --bench frontier`. Env: FRONTIER_BENCH_URLS, FRONTIER_BENCH_HOSTS,
//! FRONTIER_BENCH_CACHE_MB, FRONTIER_BENCH_INTAKE_MB, FRONTIER_BENCH_DIR;
//! FRONTIER_BENCH_RAW=0 skips the raw sled reference (one summary line instead of the
//! table); FRONTIER_BENCH_REOPEN=1 also times reopening the store with everything queued.
//! CPU seconds per phase are less sensitive to other load on the machine than the
//! wall-clock rates.

use std::time::Instant;

use frontier::*;

const T0: u64 = 1_700_000_000_000;

fn peak_rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for l in s.lines() {
        if let Some(v) = l.strip_prefix("VmHWM:") {
            let kb: f64 = v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0.0);
            return kb / 1024.0;
        }
    }
    0.0
}

/// CPU seconds (user + system) used by this process so far: less sensitive to other
/// processes on a loaded machine than wall-clock time.
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // fields after the command name (which is in parentheses)
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after the name
    (ticks(11) + ticks(12)) / 100.0
}

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn dir_size(p: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = match e.metadata() {
                Ok(m) => m,
                Err(_) => continue,
            };
            total += if m.is_dir() {
                dir_size(&e.path())
            } else {
                m.len()
            };
        }
    }
    total
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = env_usize("FRONTIER_BENCH_URLS", 1_000_000);
    let hosts = env_usize("FRONTIER_BENCH_HOSTS", 100_000);
    let batch = 10_000;
    let base = std::env::var("FRONTIER_BENCH_DIR").unwrap_or_else(|_| "/tmp".into());
    let dir = tempfile::tempdir_in(&base).expect("tempdir");
    let mut cfg = FrontierConfig::new(dir.path().join("frontier")).without_gaps();
    // sled's resident memory is several times its cache_capacity (its node accounting
    // undercounts): 64 MiB keeps the whole process under 500 MB at 1M URLs
    let cache_mb = env_usize("FRONTIER_BENCH_CACHE_MB", 64);
    cfg.sled.cache_bytes = cache_mb as u64 * 1024 * 1024;
    let intake_mb = env_usize("FRONTIER_BENCH_INTAKE_MB", 64);
    cfg.intake_buffer_bytes = intake_mb as u64 * 1024 * 1024;
    // the working set of origins: every host is dispatched once per round
    cfg.robots_cache_origins = hosts.max(2) * 2;
    let f = Frontier::open(cfg.clone()).expect("open");

    // robots preset (not timed)
    let origins: Vec<String> = (0..hosts)
        .map(|h| format!("http://host{h}.example"))
        .collect();
    for chunk in origins.chunks(10_000) {
        let outs: Vec<(&str, RobotsFetchOutcome)> = chunk
            .iter()
            .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
            .collect();
        f.set_robots(&outs, T0).expect("robots");
    }

    // ingest
    let t = Instant::now();
    let c = cpu_s();
    let mut queued = 0usize;
    let mut i = 0usize;
    while i < n {
        let urls: Vec<String> = (i..(i + batch).min(n))
            .map(|k| format!("http://host{}.example/page/{}", k % hosts, k))
            .collect();
        i += urls.len();
        let r = f.enqueue_batch(&urls, T0).expect("enqueue");
        queued += r.iter().filter(|x| **x == EnqueueResult::Queued).count();
    }
    let ingest_s = t.elapsed().as_secs_f64();
    let ingest_cpu = cpu_s() - c;
    assert_eq!(queued, n);
    let rss_ingest = peak_rss_mb();
    let disk_ingest = f.size_on_disk().expect("size");
    let disk_files = dir_size(dir.path());
    if std::env::var("FRONTIER_BENCH_INGEST_ONLY").is_ok_and(|v| v == "1") {
        println!(
            "ingest {:.0} URLs/s (CPU {ingest_cpu:.2} s), peak RSS {rss_ingest:.0} MB, {:.0} B/URL on disk",
            n as f64 / ingest_s,
            disk_files as f64 / n as f64
        );
        return;
    }

    // restart (with FRONTIER_BENCH_REOPEN=1): what an operator waits for after a stop with
    // everything queued. Off by default: two stores opened one after the other in one
    // process raise its peak RSS (freed memory is not returned to the system), so the
    // standard run's peak RSS is measured without it.
    let (f, reopen_s) = if std::env::var("FRONTIER_BENCH_REOPEN").is_ok_and(|v| v == "1") {
        drop(f);
        let t = Instant::now();
        let f = Frontier::open(cfg.clone()).expect("reopen");
        (f, Some(t.elapsed().as_secs_f64()))
    } else {
        (f, None)
    };
    let reopen = reopen_s.map_or("not measured".to_string(), |s| format!("{s:.2} s"));

    // dispatch + complete
    let t = Instant::now();
    let c = cpu_s();
    let mut dispatched = 0usize;
    let mut now = T0 + 1;
    while dispatched < n {
        let items = f.next_batch(now, batch).expect("next");
        if items.is_empty() {
            now += 1;
            continue;
        }
        let done: Vec<(LeaseId, PageOutcome)> = items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 0 })),
                WorkItem::Robots(_) => None,
            })
            .collect();
        dispatched += done.len();
        f.complete_batch(&done, now).expect("complete");
    }
    let dispatch_s = t.elapsed().as_secs_f64();
    let dispatch_cpu = cpu_s() - c;
    let rss_dispatch = peak_rss_mb();
    let hosts_left = f.hosts_in_memory();
    drop(f);

    if std::env::var("FRONTIER_BENCH_RAW").is_ok_and(|v| v == "0") {
        println!(
            "ingest {:.0} URLs/s (CPU {ingest_cpu:.2} s), reopen {reopen}, dispatch {:.0} URLs/s (CPU {dispatch_cpu:.2} s), peak RSS {rss_ingest:.0} MB after ingest, {rss_dispatch:.0} MB after dispatch, {:.0} B/URL on disk",
            n as f64 / ingest_s,
            n as f64 / dispatch_s,
            disk_ingest as f64 / n as f64
        );
        return;
    }
    // raw sled reference: same number of keys, keys laid out as queue keys, values the size
    // of a queue entry
    let raw = SledStore::open(&dir.path().join("raw"), &cfg.sled).expect("raw open");
    let db = raw.db();
    let value = vec![7u8; 45];
    let t = Instant::now();
    let c0 = cpu_s();
    for c in 0..n.div_ceil(batch) {
        let mut b = sled::Batch::default();
        for k in (c * batch)..((c + 1) * batch).min(n) {
            b.insert(keys::queued((k % hosts) as u64, k as u64), value.clone());
        }
        db.apply_batch(b).expect("raw insert");
        db.flush().expect("flush");
    }
    let raw_ins_s = t.elapsed().as_secs_f64();
    let raw_ins_cpu = cpu_s() - c0;
    let t = Instant::now();
    let c0 = cpu_s();
    for c in 0..n.div_ceil(batch) {
        let mut b = sled::Batch::default();
        for k in (c * batch)..((c + 1) * batch).min(n) {
            b.remove(keys::queued((k % hosts) as u64, k as u64));
        }
        db.apply_batch(b).expect("raw remove");
        db.flush().expect("flush");
    }
    let raw_rm_s = t.elapsed().as_secs_f64();
    let raw_rm_cpu = cpu_s() - c0;

    let rate = |s: f64| n as f64 / s;
    println!(
        "frontier benchmark: {n} URLs over {hosts} hosts, batches of {batch}, sled cache {cache_mb} MiB, intake buffer {intake_mb} MiB"
    );
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| ingest (enqueue_batch, durable) | {:.0} URLs/s ({ingest_s:.2} s, CPU {ingest_cpu:.2} s) |",
        rate(ingest_s)
    );
    println!(
        "| dispatch (next_batch + complete_batch, durable) | {:.0} URLs/s ({dispatch_s:.2} s, CPU {dispatch_cpu:.2} s) |",
        rate(dispatch_s)
    );
    println!("| reopen with everything queued (Frontier::open) | {reopen} |");
    println!("| peak RSS after ingest | {rss_ingest:.0} MB |");
    println!("| peak RSS after dispatch | {rss_dispatch:.0} MB |");
    println!(
        "| bytes on disk per URL after ingest (sled size_on_disk) | {:.0} |",
        disk_ingest as f64 / n as f64
    );
    println!(
        "| bytes on disk per URL after ingest (files) | {:.0} |",
        disk_files as f64 / n as f64
    );
    println!("| hosts in memory after dispatch | {hosts_left} |");
    println!(
        "| raw sled insert (apply_batch + flush per 10k) | {:.0} keys/s ({raw_ins_s:.2} s, CPU {raw_ins_cpu:.2} s) |",
        rate(raw_ins_s)
    );
    println!(
        "| raw sled remove (apply_batch + flush per 10k) | {:.0} keys/s ({raw_rm_s:.2} s, CPU {raw_rm_cpu:.2} s) |",
        rate(raw_rm_s)
    );
}
