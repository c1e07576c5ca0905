//! `--scheduled`: N URLs submitted to a fresh daemon as scheduled URLs (`POST /v1/urls`
//! JSON objects with a `refetch_at` 30 days ahead), to show that the schedule lives on disk
//! (issue 14: "10M known URLs with due times must not change the daemon's memory bound").
//!
//! One daemon, measured three times: idle with nothing submitted (the baseline), right
//! after the last batch was acknowledged, and after running on for a while (the due scan
//! runs; nothing is due, so nothing may be fetched: the server counts its requests), then
//! once more after a restart on the same data dir (what a store of N scheduled URLs costs
//! a daemon that did not write them).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::daemon::{Daemon, DaemonConfig};
use crate::procfs;

/// Memory, disk and fetch counts at one moment.
pub struct Snapshot {
    pub vm_hwm: u64,
    pub vm_rss: u64,
    /// bytes allocated on disk under the data dir (st_blocks)
    pub disk: u64,
    /// requests the bench server answered (robots.txt and pages)
    pub server_requests: u64,
    /// `page_fetches_total` + `robots_fetches_total` of the daemon's /metrics
    pub daemon_fetches: u64,
}

pub struct ScheduledRun {
    pub idle: Snapshot,
    pub submitted: Snapshot,
    pub after: Snapshot,
    pub after_secs: f64,
    /// the daemon restarted on the same data dir, after as long again: what it holds
    /// resident for a store of N scheduled URLs, without what the submit left behind
    pub reopened: Snapshot,
    /// from the restart until the admin API answered
    pub reopen_secs: f64,
    pub urls: u64,
    pub accepted: u64,
    pub submit_secs: f64,
    pub submit_cpu_secs: f64,
    pub stderr_tail: String,
}

/// Bytes allocated under `dir`, recursively.
fn disk_usage(dir: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn snapshot(d: &Daemon, port: u16) -> Result<Snapshot> {
    let pid = d.pid();
    let metrics = d.get_text("/metrics")?;
    Ok(Snapshot {
        vm_hwm: procfs::vm_hwm(pid).unwrap_or(0),
        vm_rss: procfs::vm_rss(pid).unwrap_or(0),
        disk: disk_usage(&d.dir.path().join("data")),
        server_requests: crate::server::requests(port)?,
        daemon_fetches: crate::daemon::metric_sum(
            &metrics,
            &["page_fetches_total", "robots_fetches_total"],
        ),
    })
}

/// Submit `urls` URLs over `hosts` hosts of the server on `port`, `batch` per request,
/// `conns` requests at once, each with `refetch_at` = now + 30 days.
#[allow(clippy::too_many_arguments)]
pub fn run(
    cfg: &DaemonConfig,
    port: u16,
    urls: u64,
    hosts: u64,
    batch: u64,
    conns: usize,
    idle: Duration,
    after: Duration,
) -> Result<ScheduledRun> {
    let d = Daemon::start(cfg, None)?;
    let pid = d.pid();
    std::thread::sleep(idle);
    let idle_snap = snapshot(&d, port)?;
    let refetch_at =
        humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(30 * 24 * 3600))
            .to_string();
    let next = AtomicU64::new(0);
    let accepted = AtomicU64::new(0);
    let cpu0 = procfs::cpu_secs(pid).unwrap_or(0.0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let t0 = Instant::now();
    let batch = batch.max(1);
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..conns.max(1))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let mut body = Vec::with_capacity(batch as usize * 80);
                    loop {
                        let from = next.fetch_add(batch, Ordering::Relaxed);
                        if from >= urls {
                            return Ok(());
                        }
                        body.clear();
                        body.push(b'[');
                        for k in from..(from + batch).min(urls) {
                            if k > from {
                                body.push(b',');
                            }
                            use std::io::Write;
                            write!(
                                body,
                                r#"{{"url":"http://h{}.test:{port}/p/{k}","refetch_at":"{refetch_at}"}}"#,
                                k % hosts
                            )?;
                        }
                        body.push(b']');
                        let (status, text) = d.request("POST", "/v1/urls", Some(&body))?;
                        if status != 200 {
                            bail!("POST /v1/urls (URLs {from}..): status {status}: {text:.300}");
                        }
                        let v: serde_json::Value = serde_json::from_str(&text)
                            .with_context(|| format!("POST /v1/urls answer: {text:.200}"))?;
                        accepted.fetch_add(v["accepted"].as_u64().unwrap_or(0), Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // memory as the schedule grows: a line every 10 s until the submit is done
        let monitor = s.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() >= Duration::from_secs(10) {
                    last = Instant::now();
                    println!(
                        "  {:>6.0} s: {} URLs accepted, VmRSS {:.0} MB, VmHWM {:.0} MB",
                        t0.elapsed().as_secs_f64(),
                        accepted.load(Ordering::Relaxed),
                        procfs::vm_rss(pid).unwrap_or(0) as f64 / 1e6,
                        procfs::vm_hwm(pid).unwrap_or(0) as f64 / 1e6
                    );
                }
            }
        });
        let mut result = Ok(());
        for w in workers {
            let r = w
                .join()
                .map_err(|_| anyhow::anyhow!("a submit thread panicked"))
                .and_then(|r| r);
            if result.is_ok() {
                result = r;
            }
        }
        done.store(true, Ordering::Relaxed);
        let _ = monitor.join();
        result
    })?;
    let submit_secs = t0.elapsed().as_secs_f64();
    let submit_cpu_secs = procfs::cpu_secs(pid).unwrap_or(0.0) - cpu0;
    let submitted = snapshot(&d, port)?;
    let t1 = Instant::now();
    std::thread::sleep(after);
    let after_snap = snapshot(&d, port)?;
    let after_secs = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let d = d.restart(&cfg.exe, Duration::from_secs(120))?;
    let reopen_secs = t2.elapsed().as_secs_f64();
    std::thread::sleep(after);
    let reopened = snapshot(&d, port)?;
    let stderr_tail = d.stop(Duration::from_secs(120));
    Ok(ScheduledRun {
        idle: idle_snap,
        submitted,
        after: after_snap,
        after_secs,
        reopened,
        reopen_secs,
        urls,
        accepted: accepted.into_inner(),
        submit_secs,
        submit_cpu_secs,
        stderr_tail,
    })
}
