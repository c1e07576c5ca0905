//! `--spider BIN`: the spider crate (spider-rs) crawling the same server in the same run
//! (bench/spider-peer), so frontierd's lead over a peer is measured, not remembered.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// One spider-peer run.
pub struct PeerRun {
    pub pages: u64,
    pub secs: f64,
    pub cpu_us: u64,
}

impl PeerRun {
    pub fn pages_per_sec(&self) -> f64 {
        self.pages as f64 / self.secs.max(1e-9)
    }

    pub fn cpu_per_page_us(&self) -> f64 {
        self.cpu_us as f64 / self.pages.max(1) as f64
    }
}

/// spider-peer over `sites` crawls of the server on `port` (one per frontierd host),
/// `pages` pages each, `concurrency` requests at once; prints its line.
pub fn run_spider(
    bin: &Path,
    port: u16,
    sites: u64,
    pages: u64,
    concurrency: usize,
) -> Result<PeerRun> {
    let base = format!("http://127.0.0.1:{port}");
    let out = Command::new(bin)
        .args([
            base.as_str(),
            &sites.to_string(),
            &pages.to_string(),
            &concurrency.to_string(),
        ])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{} exited with {}: {}{}",
            bin.display(),
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let run = parse(&text).with_context(|| format!("reading spider-peer's line {text:?}"))?;
    println!(
        "spider (spider-rs), {concurrency} at once: {} pages in {:.2} s = {:.0} pages/s, {:.0} µs CPU/page",
        run.pages,
        run.secs,
        run.pages_per_sec(),
        run.cpu_per_page_us()
    );
    Ok(run)
}

/// `pages P secs S cpu_us C`.
fn parse(line: &str) -> Option<PeerRun> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |name: &str| {
        let at = words.iter().position(|w| *w == name)?;
        words.get(at + 1).copied()
    };
    Some(PeerRun {
        pages: field("pages")?.parse().ok()?,
        secs: field("secs")?.parse().ok()?,
        cpu_us: field("cpu_us")?.parse().ok()?,
    })
}

/// One worker count: frontierd's pages/s and CPU per page in µs (None: not run), spider's run.
pub struct Against {
    pub workers: usize,
    pub frontierd: Option<(f64, f64)>,
    pub spider: PeerRun,
}

/// frontierd next to spider, per worker count.
pub fn print_table(rows: &[Against]) {
    println!();
    println!("| workers | frontierd pages/s | frontierd CPU/page | spider pages/s | spider CPU/page | frontierd's lead (pages/s, CPU) |");
    println!("| ---: | ---: | ---: | ---: | ---: | --- |");
    for Against {
        workers: w,
        frontierd,
        spider,
    } in rows
    {
        let (ours, lead) = match frontierd {
            Some((fps, fcpu)) => (
                format!("{fps:.0} | {fcpu:.0} µs"),
                format!(
                    "{:.1}x, {:.1}x",
                    fps / spider.pages_per_sec().max(1e-9),
                    spider.cpu_per_page_us() / fcpu.max(1e-9)
                ),
            ),
            // --no-daemon
            None => ("- | -".to_string(), "-".to_string()),
        };
        println!(
            "| {w} | {ours} | {:.0} | {:.0} µs | {lead} |",
            spider.pages_per_sec(),
            spider.cpu_per_page_us(),
        );
    }
}
