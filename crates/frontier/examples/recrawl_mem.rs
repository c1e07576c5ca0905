use frontier::*;
fn hwm() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let recrawl = args[1] == "on";
    let n: usize = args[2].parse().unwrap();
    let hosts = n / 10;
    let dir = tempfile::tempdir().unwrap();
    let mut c = FrontierConfig::new(dir.path());
    c.min_delay_ms = 0;
    c.max_delay_ms = 0;
    c.max_in_flight_per_host = 100;
    if recrawl {
        c.recrawl.default_interval_ms = Some(3_600_000);
    }
    let f = Frontier::open(c).unwrap();
    let origins: Vec<String> = (0..hosts).map(|h| format!("http://h{h}.test")).collect();
    for chunk in origins.chunks(10000) {
        let r: Vec<(&str, RobotsFetchOutcome)> = chunk
            .iter()
            .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
            .collect();
        f.set_robots(&r, 1_700_000_000_000).unwrap();
    }
    let t0 = 1_700_000_000_000u64;
    for start in (0..n).step_by(10000) {
        let urls: Vec<String> = (start..(start + 10000).min(n))
            .map(|i| format!("http://h{}.test/p{}", i % hosts, i / hosts))
            .collect();
        f.enqueue_batch(&urls, t0).unwrap();
    }
    let mut done = 0;
    let start = std::time::Instant::now();
    while done < n {
        let items = f.next_batch(t0, 512).unwrap();
        let c: Vec<(LeaseId, PageOutcome)> = items
            .iter()
            .filter_map(|w| match w {
                WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 1 })),
                _ => None,
            })
            .collect();
        if c.is_empty() {
            panic!("stuck at {done}");
        }
        done += c.len();
        f.complete_batch(&c, t0).unwrap();
    }
    println!(
        "mode={} n={n} due={} hosts_in_memory={} rss_kib={} hwm_kib={} secs={:.1} disk={}",
        args[1],
        f.due_count().unwrap(),
        f.hosts_in_memory(),
        rss(),
        hwm(),
        start.elapsed().as_secs_f64(),
        f.size_on_disk().unwrap()
    );
}
