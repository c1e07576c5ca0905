//! spider-peer: the spider crate (spider-rs, as its users run it: one `Website` per site,
//! robots.txt obeyed) crawling daemon-bench's server, so frontierd's per-page cost is
//! compared with a peer's on the same server in the same run.
//!
//! `spider-peer BASE SITES PAGES CONCURRENCY`: SITES crawls of BASE, each from its own start
//! page and limited to PAGES pages (the bench page links 100 others), CONCURRENCY of them at
//! once with one request each, so CONCURRENCY requests are in flight like frontierd's
//! workers. Prints one line: `pages P secs S cpu_us C` (C: this process's user + system
//! time, from /proc/self/stat).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

fn cpu_us() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // fields after the command's closing parenthesis: utime and stime are the 12th and 13th
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // clock ticks are 100 per second on Linux
    ticks * 10_000
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: spider-peer BASE SITES PAGES CONCURRENCY");
        std::process::exit(2);
    }
    let base = args[1].trim_end_matches('/').to_string();
    let parse = |s: &str| -> u32 {
        s.parse().unwrap_or_else(|_| {
            eprintln!("spider-peer: not a number: {s}");
            std::process::exit(2)
        })
    };
    let (sites, pages, concurrency) = (parse(&args[2]), parse(&args[3]), parse(&args[4]));
    let slots = Arc::new(Semaphore::new(concurrency.max(1) as usize));
    let cpu_before = cpu_us();
    let start = Instant::now();
    let mut crawls = JoinSet::new();
    for site in 0..sites {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let start_url = format!("{base}/p/site{site}");
        crawls.spawn(async move {
            let mut website = spider::website::Website::new(&start_url);
            website
                .with_limit(pages)
                .with_respect_robots_txt(true)
                .with_concurrency_limit(Some(1));
            website.crawl().await;
            drop(slot);
            website.get_links().len() as u64
        });
    }
    let mut fetched = 0;
    while let Some(done) = crawls.join_next().await {
        fetched += done.unwrap_or(0);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "pages {fetched} secs {secs:.3} cpu_us {}",
        cpu_us().saturating_sub(cpu_before)
    );
}
