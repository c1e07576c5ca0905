//! Resident memory of a store of many hosts through its host-journal checkpoints.
//!
//! `MALLOC_ARENA_MAX=2 cargo run --release -p frontier --example checkpoint_memory -- HOSTS
//! URLS_PER_HOST`: enqueues HOSTS x URLS_PER_HOST URLs (URL k on host k mod HOSTS) into a
//! fresh sled store in batches of 10 000, sets every host's robots.txt to allow-all, then
//! dispatches and completes everything, printing VmRSS / VmHWM (MB) whenever VmRSS moved by
//! more than 40 MB since the last line. At 1M hosts x 10 URLs the journal reaches its
//! 256 MiB cap during the dispatch and a checkpoint writes 1M host records in one call
//! (benchmarks.md, "The store under sled").
use frontier::*;

fn rss_mb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let (hosts, per_host) = (arg(1, 1_000_000), arg(2, 10));
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut cfg = FrontierConfig::new(dir.path()).without_gaps();
    cfg.seed = Some(1);
    let f = Frontier::open(cfg).expect("open the frontier");
    let t0 = 1_700_000_000_000u64;
    let started = std::time::Instant::now();
    let mut last = 0u64;
    let mut report = |what: &str, force: bool| {
        let (rss, hwm) = rss_mb();
        if force || rss > last + 40 || rss + 40 < last {
            let secs = started.elapsed().as_secs_f64();
            println!("{secs:7.1} s  {what:<28} VmRSS {rss:>6} MB  VmHWM {hwm:>6} MB");
            last = rss;
        }
    };
    let batch = 10_000;
    for b in 0..hosts * per_host / batch {
        let urls: Vec<String> = (b * batch..(b + 1) * batch)
            .map(|k| format!("http://h{}.test:8080/p/{k}", k % hosts))
            .collect();
        f.enqueue_batch(&urls, t0).expect("enqueue");
        report(&format!("enqueue batch {b}"), false);
    }
    report("enqueued", true);
    for b in 0..hosts.div_ceil(batch) {
        let origins: Vec<String> = (b * batch..((b + 1) * batch).min(hosts))
            .map(|k| format!("http://h{k}.test:8080"))
            .collect();
        let outcomes: Vec<(&str, RobotsFetchOutcome)> = origins
            .iter()
            .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
            .collect();
        f.set_robots(&outcomes, t0).expect("set robots");
        report(&format!("robots batch {b}"), false);
    }
    report("robots.txt set", true);
    let mut b = 0;
    loop {
        let items = f.next_batch(t0 + 1, batch).expect("next batch");
        if items.is_empty() {
            break;
        }
        let done: Vec<(LeaseId, PageOutcome)> = items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 5 })),
                WorkItem::Robots(_) => None,
            })
            .collect();
        f.complete_batch(&done, t0 + 1).expect("complete");
        b += 1;
        report(&format!("dispatch batch {b}"), false);
    }
    report("dispatched", true);
}
