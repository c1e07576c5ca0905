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

/// The run's size and store settings, from the environment.
struct Params {
    /// URLs to ingest and dispatch.
    n: usize,
    hosts: usize,
    /// URLs per enqueue_batch, next_batch and raw sled batch.
    batch: usize,
    cache_mb: usize,
    intake_mb: usize,
}

impl Params {
    fn from_env() -> Params {
        Params {
            n: env_usize("FRONTIER_BENCH_URLS", 1_000_000),
            hosts: env_usize("FRONTIER_BENCH_HOSTS", 100_000),
            batch: 10_000,
            // sled's resident memory is several times its cache_capacity (its node
            // accounting undercounts): 64 MiB keeps the whole process under 500 MB at 1M URLs
            cache_mb: env_usize("FRONTIER_BENCH_CACHE_MB", 64),
            intake_mb: env_usize("FRONTIER_BENCH_INTAKE_MB", 64),
        }
    }
}

/// Wall-clock and CPU seconds of one phase.
#[derive(Clone, Copy)]
struct Timed {
    s: f64,
    cpu: f64,
}

/// Runs `f`, timing it on the wall clock and in CPU seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Timed) {
    let t = Instant::now();
    let c = cpu_s();
    let out = f();
    let s = t.elapsed().as_secs_f64();
    (
        out,
        Timed {
            s,
            cpu: cpu_s() - c,
        },
    )
}

fn env_is(k: &str, v: &str) -> bool {
    std::env::var(k).is_ok_and(|x| x == v)
}

/// A store in `dir` with no politeness gaps, and robots cache room for every origin.
fn bench_config(p: &Params, dir: &std::path::Path) -> FrontierConfig {
    let mut cfg = FrontierConfig::new(dir.join("frontier")).without_gaps();
    cfg.sled.cache_bytes = p.cache_mb as u64 * 1024 * 1024;
    cfg.intake_buffer_bytes = p.intake_mb as u64 * 1024 * 1024;
    // the working set of origins: every host is dispatched once per round
    cfg.robots_cache_origins = p.hosts.max(2) * 2;
    cfg
}

/// Every origin's robots.txt preset to allow-all (a 404), so dispatch hands out pages only.
fn preset_robots(f: &Frontier, hosts: usize) {
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
}

/// Enqueues the run's URLs, spread round-robin over its hosts; returns how many were queued.
fn ingest(f: &Frontier, p: &Params) -> usize {
    let mut queued = 0usize;
    let mut i = 0usize;
    while i < p.n {
        let urls: Vec<String> = (i..(i + p.batch).min(p.n))
            .map(|k| format!("http://host{}.example/page/{}", k % p.hosts, k))
            .collect();
        i += urls.len();
        let r = f.enqueue_batch(&urls, T0).expect("enqueue");
        queued += r.iter().filter(|x| **x == EnqueueResult::Queued).count();
    }
    queued
}

/// With FRONTIER_BENCH_REOPEN=1, the store closed and opened again, timed: what an operator
/// waits for after a stop with everything queued. Off by default: two stores opened one
/// after the other in one process raise its peak RSS (freed memory is not returned to the
/// system), so the standard run's peak RSS is measured without it.
fn reopen_if_asked(f: Frontier, cfg: &FrontierConfig) -> (Frontier, Option<f64>) {
    if !env_is("FRONTIER_BENCH_REOPEN", "1") {
        return (f, None);
    }
    drop(f);
    let t = Instant::now();
    let f = Frontier::open(cfg.clone()).expect("reopen");
    (f, Some(t.elapsed().as_secs_f64()))
}

/// Dispatches and completes every queued URL, moving the clock on only when nothing is
/// ready.
fn dispatch_all(f: &Frontier, p: &Params) {
    let mut dispatched = 0usize;
    let mut now = T0 + 1;
    while dispatched < p.n {
        let items = f.next_batch(now, p.batch).expect("next");
        if items.is_empty() {
            now += 1;
            continue;
        }
        let done: Vec<(LeaseId, PageOutcome)> = items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Page(page) => Some((page.id, PageOutcome::Done { response_ms: 0 })),
                WorkItem::Robots(_) => None,
            })
            .collect();
        dispatched += done.len();
        f.complete_batch(&done, now).expect("complete");
    }
}

/// Raw sled reference: the same number of keys, laid out as queue keys, values the size of
/// a queue entry, inserted then removed in batches (one flush each).
fn raw_sled_reference(dir: &std::path::Path, cfg: &FrontierConfig, p: &Params) -> (Timed, Timed) {
    let raw = SledStore::open(&dir.join("raw"), &cfg.sled).expect("raw open");
    let db = raw.db();
    let value = vec![7u8; 45];
    let chunks = p.n.div_ceil(p.batch);
    let keys_of = |c: usize| {
        ((c * p.batch)..((c + 1) * p.batch).min(p.n))
            .map(|k| keys::queued((k % p.hosts) as u64, k as u64))
    };
    let ((), insert) = timed(|| {
        for c in 0..chunks {
            let mut b = sled::Batch::default();
            for k in keys_of(c) {
                b.insert(k, value.clone());
            }
            db.apply_batch(b).expect("raw insert");
            db.flush().expect("flush");
        }
    });
    let ((), remove) = timed(|| {
        for c in 0..chunks {
            let mut b = sled::Batch::default();
            for k in keys_of(c) {
                b.remove(k);
            }
            db.apply_batch(b).expect("raw remove");
            db.flush().expect("flush");
        }
    });
    (insert, remove)
}

/// What the frontier phases measured.
struct Measured {
    ingest: Timed,
    dispatch: Timed,
    /// The reopen's time, or "not measured".
    reopen: String,
    rss_ingest: f64,
    rss_dispatch: f64,
    /// sled's size_on_disk after ingest.
    disk_ingest: u64,
    /// The store's files after ingest.
    disk_files: u64,
    hosts_left: usize,
}

/// The full report: the frontier's phases and the raw sled reference, as a table.
fn print_table(p: &Params, m: &Measured, (raw_ins, raw_rm): (Timed, Timed)) {
    let Params {
        n,
        hosts,
        batch,
        cache_mb,
        intake_mb,
    } = *p;
    let rate = |s: f64| n as f64 / s;
    println!(
        "frontier benchmark: {n} URLs over {hosts} hosts, batches of {batch}, sled cache {cache_mb} MiB, intake buffer {intake_mb} MiB"
    );
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| ingest (enqueue_batch, durable) | {:.0} URLs/s ({:.2} s, CPU {:.2} s) |",
        rate(m.ingest.s),
        m.ingest.s,
        m.ingest.cpu
    );
    println!(
        "| dispatch (next_batch + complete_batch, durable) | {:.0} URLs/s ({:.2} s, CPU {:.2} s) |",
        rate(m.dispatch.s),
        m.dispatch.s,
        m.dispatch.cpu
    );
    println!(
        "| reopen with everything queued (Frontier::open) | {} |",
        m.reopen
    );
    println!("| peak RSS after ingest | {:.0} MB |", m.rss_ingest);
    println!("| peak RSS after dispatch | {:.0} MB |", m.rss_dispatch);
    println!(
        "| bytes on disk per URL after ingest (sled size_on_disk) | {:.0} |",
        m.disk_ingest as f64 / n as f64
    );
    println!(
        "| bytes on disk per URL after ingest (files) | {:.0} |",
        m.disk_files as f64 / n as f64
    );
    println!("| hosts in memory after dispatch | {} |", m.hosts_left);
    println!(
        "| raw sled insert (apply_batch + flush per 10k) | {:.0} keys/s ({:.2} s, CPU {:.2} s) |",
        rate(raw_ins.s),
        raw_ins.s,
        raw_ins.cpu
    );
    println!(
        "| raw sled remove (apply_batch + flush per 10k) | {:.0} keys/s ({:.2} s, CPU {:.2} s) |",
        rate(raw_rm.s),
        raw_rm.s,
        raw_rm.cpu
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let p = Params::from_env();
    let base = std::env::var("FRONTIER_BENCH_DIR").unwrap_or_else(|_| "/tmp".into());
    let dir = tempfile::tempdir_in(&base).expect("tempdir");
    let cfg = bench_config(&p, dir.path());
    let f = Frontier::open(cfg.clone()).expect("open");
    preset_robots(&f, p.hosts); // (not timed)
    let (queued, ingest) = timed(|| ingest(&f, &p));
    assert_eq!(queued, p.n);
    let n = p.n as f64;
    let rss_ingest = peak_rss_mb();
    let disk_ingest = f.size_on_disk().expect("size");
    let disk_files = dir_size(dir.path());
    if env_is("FRONTIER_BENCH_INGEST_ONLY", "1") {
        println!(
            "ingest {:.0} URLs/s (CPU {:.2} s), peak RSS {rss_ingest:.0} MB, {:.0} B/URL on disk",
            n / ingest.s,
            ingest.cpu,
            disk_files as f64 / n
        );
        return;
    }
    let (f, reopen_s) = reopen_if_asked(f, &cfg);
    let reopen = reopen_s.map_or("not measured".to_string(), |s| format!("{s:.2} s"));
    let ((), dispatch) = timed(|| dispatch_all(&f, &p));
    let rss_dispatch = peak_rss_mb();
    let hosts_left = f.hosts_in_memory();
    drop(f);
    if env_is("FRONTIER_BENCH_RAW", "0") {
        println!(
            "ingest {:.0} URLs/s (CPU {:.2} s), reopen {reopen}, dispatch {:.0} URLs/s (CPU {:.2} s), peak RSS {rss_ingest:.0} MB after ingest, {rss_dispatch:.0} MB after dispatch, {:.0} B/URL on disk",
            n / ingest.s,
            ingest.cpu,
            n / dispatch.s,
            dispatch.cpu,
            disk_ingest as f64 / n
        );
        return;
    }
    let raw = raw_sled_reference(dir.path(), &cfg, &p);
    let m = Measured {
        ingest,
        dispatch,
        reopen,
        rss_ingest,
        rss_dispatch,
        disk_ingest,
        disk_files,
        hosts_left,
    };
    print_table(&p, &m, raw);
}
