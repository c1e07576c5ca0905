//! frontierd as the benchmark runs it: the release binary in a fresh temp data dir, zero
//! politeness delay (per host and per IP address), `[resolve] "*.test"` to loopback, WARC (gzip) and crawl log on.
//!
//! Progress is read from the crawl log (one line per URL outcome), not from `/v1/stats`:
//! the stats handler walks every host and robots record, so polling it would load the
//! daemon being measured.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::procfs;

pub struct DaemonConfig {
    pub exe: PathBuf,
    pub workers: usize,
    /// extra TOML appended to the generated config (`--daemon-config` file contents)
    pub extra_toml: String,
    /// `key = value` lines added to the generated `[store]` table (`--store-toml`)
    pub store_toml: String,
    /// `key = value` lines added to the generated `[fetch]` table (`--fetch-toml`)
    pub fetch_toml: String,
}

/// A running frontierd; SIGKILLed on drop if still running.
pub struct Daemon {
    child: Child,
    pub dir: tempfile::TempDir,
    pub admin: String,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn crawl_log(&self) -> PathBuf {
        self.dir.path().join("data/crawl.log.jsonl")
    }

    pub fn start(cfg: &DaemonConfig, seeds: Option<&Path>) -> Result<Daemon> {
        if !cfg.exe.exists() {
            bail!(
                "{} not found: build it with `cargo build --release -p frontierd` or pass --frontierd",
                cfg.exe.display()
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("daemon-bench-frontierd-")
            .tempdir()
            .context("creating the daemon's temp dir")?;
        let data = dir.path().join("data");
        let conf = format!(
            r#"[store]
data_dir = "{data}"
{store}

[fetch]
workers = {workers}
{fetch}
# a contact that is not a placeholder (the daemon warns about example.org)
user_agent = "frontierd-bench/0.1 (+https://daemon-bench.test/contact)"

[politeness]
min_delay = "0s"
delay_factor = 0.0
# every host is on 127.0.0.1: the per-IP budget would measure ip_delay, not the daemon
# (a binary from before IP groups refuses these two keys)
max_in_flight_per_ip = 100000
ip_delay = "0s"

[admin]
listen = "127.0.0.1:0"

[log]
level = "warn"

# the sites are on loopback, which the address policy refuses unless allowed
[addresses]
allow = ["127.0.0.0/8"]
[resolve]
"*.test" = ["127.0.0.1"]

{extra}
"#,
            data = data.display(),
            workers = cfg.workers,
            extra = cfg.extra_toml,
            store = cfg.store_toml,
            fetch = cfg.fetch_toml,
        );
        let conf_path = dir.path().join("frontierd.toml");
        fs::write(&conf_path, conf)?;
        Self::spawn(&cfg.exe, dir, seeds)
    }

    /// Start the daemon on the config file and data dir in `dir`.
    fn spawn(exe: &Path, dir: tempfile::TempDir, seeds: Option<&Path>) -> Result<Daemon> {
        let conf_path = dir.path().join("frontierd.toml");
        let data = dir.path().join("data");
        let addr_file = data.join("admin.addr");
        let _ = fs::remove_file(&addr_file);
        let mut cmd = Command::new(exe);
        cmd.arg("run").arg("--config").arg(&conf_path);
        if let Some(s) = seeds {
            cmd.arg("--seeds").arg(s);
        }
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("frontierd.stderr"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        let mut d = Daemon {
            child,
            dir,
            admin: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            if let Ok(a) = fs::read_to_string(&addr_file) {
                if a.ends_with('\n') {
                    d.admin = a.trim().to_string();
                    return Ok(d);
                }
            }
            if let Ok(Some(st)) = d.child.try_wait() {
                bail!(
                    "frontierd exited at start ({st}): {}",
                    fs::read_to_string(d.dir.path().join("frontierd.stderr")).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                bail!("frontierd wrote no admin.addr within 600 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop the daemon (SIGTERM, up to `grace`) and start `exe` again on the same config
    /// and data dir.
    pub fn restart(mut self, exe: &Path, grace: Duration) -> Result<Daemon> {
        self.terminate(grace);
        // the data dir goes to the new daemon; `self` keeps an empty one to drop
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir()?);
        Self::spawn(exe, dir, None)
    }

    /// SIGTERM, then wait (SIGKILL after `grace`).
    fn terminate(&mut self, grace: Duration) {
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait (SIGKILL after `grace`). Returns the daemon's stderr tail.
    pub fn stop(mut self, grace: Duration) -> String {
        self.terminate(grace);
        let err = fs::read_to_string(self.dir.path().join("frontierd.stderr")).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// GET an admin API path, the body as text.
    pub fn get_text(&self, path: &str) -> Result<String> {
        let (status, body) = self.request("GET", path, None)?;
        if status != 200 {
            bail!("GET {path}: status {status}: {body:.200}");
        }
        Ok(body)
    }

    /// One request to the admin API (Connection: close): (status, body).
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<(u16, String)> {
        let mut s = TcpStream::connect(&self.admin)
            .with_context(|| format!("connecting to the admin API {}", self.admin))?;
        s.set_read_timeout(Some(Duration::from_secs(300)))?;
        let body = body.unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.admin,
            body.len()
        )?;
        s.write_all(body)?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text.split_once("\r\n\r\n").context("no HTTP body")?;
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .context("no HTTP status")?;
        Ok((status, body.to_string()))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads the crawl log as it grows.
pub struct LogTail {
    path: PathBuf,
    pos: u64,
    partial: Vec<u8>,
    /// final outcomes seen (one per URL)
    pub lines: u64,
    pub fetched: u64,
    pub other: u64,
    /// first other outcome, for the report
    pub other_example: Option<String>,
    /// crawl-log time of the first and the last fetched page
    pub first_time: Option<SystemTime>,
    pub last_time: Option<SystemTime>,
}

impl LogTail {
    pub fn new(path: PathBuf) -> Self {
        LogTail {
            path,
            pos: 0,
            partial: Vec::new(),
            lines: 0,
            fetched: 0,
            other: 0,
            other_example: None,
            first_time: None,
            last_time: None,
        }
    }

    pub fn poll(&mut self) -> Result<()> {
        let Ok(mut f) = fs::File::open(&self.path) else {
            return Ok(());
        };
        f.seek(SeekFrom::Start(self.pos))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        self.pos += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.lines += 1;
            let v: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
            if v["outcome"] == "fetched" {
                self.fetched += 1;
                let t = v["time"]
                    .as_str()
                    .and_then(|t| humantime::parse_rfc3339_weak(t).ok());
                if self.first_time.is_none() {
                    self.first_time = t;
                }
                if t.is_some() {
                    self.last_time = t;
                }
            } else {
                self.other += 1;
                if self.other_example.is_none() {
                    self.other_example = Some(String::from_utf8_lossy(line).into_owned());
                }
            }
        }
        Ok(())
    }

    /// First page to last page, from the crawl log's millisecond times.
    pub fn span_secs(&self) -> Option<f64> {
        let (a, b) = (self.first_time?, self.last_time?);
        Some(b.duration_since(a).ok()?.as_secs_f64())
    }
}

/// `perf <args> -o <out> -p <pid>` (record, stat or trace), until [`stop_perf`].
fn start_perf(out: &Path, args: &str, pid: u32) -> Result<Child> {
    Command::new("perf")
        .args(args.split_whitespace())
        .arg("-o")
        .arg(out)
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting perf")
}

/// SIGINT ends a perf session and makes it write its output.
fn stop_perf(perf: Option<Child>) {
    if let Some(mut p) = perf {
        unsafe {
            libc::kill(p.id() as libc::pid_t, libc::SIGINT);
        }
        let _ = p.wait();
    }
}

pub struct CrawlRun {
    pub pages: u64,
    pub other: u64,
    pub other_example: Option<String>,
    /// first page to last page
    pub secs: f64,
    /// CPU (user + sys) per page between the bench seeing the first and the last page
    pub cpu_per_page: f64,
    /// CPU seconds per wall second over the same span
    pub cores: f64,
    pub vm_hwm: u64,
    pub stderr_tail: String,
}

impl CrawlRun {
    pub fn rate(&self) -> f64 {
        self.pages as f64 / self.secs.max(1e-9)
    }
}

/// Start frontierd with `seeds` and wait until every URL has a crawl log line.
pub fn crawl(
    cfg: &DaemonConfig,
    seeds: &Path,
    urls: u64,
    timeout: Duration,
    perf_out: Option<(&Path, &str)>,
) -> Result<CrawlRun> {
    let d = Daemon::start(cfg, Some(seeds))?;
    let pid = d.pid();
    let mut tail = LogTail::new(d.crawl_log());
    let deadline = Instant::now() + timeout;
    let mut first: Option<(u64, f64, Instant)> = None;
    let mut perf: Option<Child> = None;
    loop {
        tail.poll()?;
        if first.is_none() && tail.fetched > 0 {
            first = Some((
                tail.fetched,
                procfs::cpu_secs(pid).unwrap_or(0.0),
                Instant::now(),
            ));
            if let Some((out, args)) = perf_out {
                perf = Some(start_perf(out, args, pid)?);
            }
        }
        if tail.lines >= urls {
            break;
        }
        if Instant::now() > deadline {
            let err = d.stop(Duration::from_secs(10));
            bail!(
                "timeout: {} of {urls} URLs done after {timeout:?} ({} fetched); frontierd stderr: {err}",
                tail.lines,
                tail.fetched
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let cpu_end = procfs::cpu_secs(pid).unwrap_or(0.0);
    let t_end = Instant::now();
    stop_perf(perf);
    let vm_hwm = procfs::vm_hwm(pid).unwrap_or(0);
    let (n0, cpu0, t0) = first.unwrap_or((0, cpu_end, t_end));
    let counted = tail.fetched.saturating_sub(n0).max(1);
    let cpu = (cpu_end - cpu0).max(0.0);
    let secs = tail
        .span_secs()
        .unwrap_or_else(|| t_end.duration_since(t0).as_secs_f64());
    let stderr_tail = d.stop(Duration::from_secs(60));
    Ok(CrawlRun {
        pages: tail.fetched,
        other: tail.other,
        other_example: tail.other_example.clone(),
        secs,
        cpu_per_page: cpu / counted as f64,
        cores: cpu / t_end.duration_since(t0).as_secs_f64().max(1e-9),
        vm_hwm,
        stderr_tail,
    })
}

pub struct IngestRun {
    pub lines: u64,
    pub accepted: u64,
    pub secs: f64,
    pub write_bytes: u64,
    pub wchar: u64,
    pub cpu_secs: f64,
    pub vm_hwm: u64,
    pub pages_during: u64,
    /// robots.txt fetches completed when the submit returned
    pub robots_fetches: u64,
    /// file descriptors the daemon holds when the submit returned (sockets mostly)
    pub open_fds: usize,
    pub submit_status: String,
    /// With `then_crawl`: the crawl that went on after the submit.
    pub after: Option<CrawlAfter>,
}

/// The crawl after an ingest, until every host's robots.txt was fetched and a checkpoint
/// of the host journal ended, or time ran out.
pub struct CrawlAfter {
    pub secs: f64,
    pub robots_fetches: u64,
    /// Checkpoints of the host journal ended since the daemon started, and the host
    /// records they wrote.
    pub checkpoints: u64,
    pub checkpoint_hosts: u64,
    pub pages: u64,
    pub vm_hwm: u64,
    pub vm_rss: u64,
    pub open_fds: usize,
    /// Completed WARC files deleted meanwhile (`ship_warc`), and their bytes.
    pub warc_shipped: (u64, u64),
    /// The store's bytes on disk at the end (the data dir without WARC files and the crawl
    /// log).
    pub store_bytes: u64,
}

/// The crawl after an ingest ([`ingest`]): until robots.txt is known for `hosts` hosts and
/// a checkpoint ended, at least `at_least`, at most `limit`.
#[derive(Clone, Copy)]
pub struct CrawlAfterPlan {
    pub hosts: u64,
    pub limit: Duration,
    pub at_least: Duration,
    /// Delete each completed WARC file as an operator's shipper would, so that a crawl of
    /// tens of millions of pages fits on the disk (the `.open` file being written stays).
    pub ship_warc: bool,
}

/// Delete the completed WARC files under `dir` (not the `.open` one being written):
/// (files, bytes).
fn ship_warc_files(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let Ok(entries) = fs::read_dir(dir) else {
        return (0, 0);
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            let (f, b) = ship_warc_files(&path);
            files += f;
            bytes += b;
        } else if path.to_string_lossy().ends_with(".warc.gz") {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            if fs::remove_file(&path).is_ok() {
                files += 1;
                bytes += len;
            }
        }
    }
    (files, bytes)
}

/// Bytes of the files under `dir`, but WARC files and the crawl log.
fn store_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            let name = path.to_string_lossy();
            if path.is_dir() {
                store_bytes(&path)
            } else if name.contains(".warc") || name.contains("crawl.log") {
                0
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}

/// `frontierd submit` of the list to a freshly started daemon (crawling meanwhile).
pub fn ingest(
    cfg: &DaemonConfig,
    list: &Path,
    lines: u64,
    perf_out: Option<(&Path, &str)>,
    then_crawl: Option<CrawlAfterPlan>,
) -> Result<IngestRun> {
    let d = Daemon::start(cfg, None)?;
    let pid = d.pid();
    let perf = match perf_out {
        Some((out, args)) => Some(start_perf(out, args, pid)?),
        None => None,
    };
    let wb0 = procfs::write_bytes(pid).unwrap_or(0);
    let wc0 = procfs::wchar(pid).unwrap_or(0);
    let cpu0 = procfs::cpu_secs(pid).unwrap_or(0.0);
    let t0 = Instant::now();
    let status = Command::new(&cfg.exe)
        .arg("submit")
        .arg(list)
        .arg("--admin")
        .arg(&d.admin)
        .stdout(Stdio::null())
        .status()
        .context("running frontierd submit")?;
    let secs = t0.elapsed().as_secs_f64();
    stop_perf(perf);
    let open_fds = fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    let write_bytes = procfs::write_bytes(pid).unwrap_or(0).saturating_sub(wb0);
    let wchar = procfs::wchar(pid).unwrap_or(0).saturating_sub(wc0);
    let cpu_secs = procfs::cpu_secs(pid).unwrap_or(0.0) - cpu0;
    let vm_hwm = procfs::vm_hwm(pid).unwrap_or(0);
    let mut tail = LogTail::new(d.crawl_log());
    tail.poll()?;
    // from /metrics, which answers whatever the frontier is doing (/v1/stats waits for
    // it, and a fold of millions of hosts can hold it past the admin API's 10 s)
    let metrics = d.get_text("/metrics")?;
    let accepted = metric_sum(&metrics, &["urls_accepted_total"]);
    let robots_fetches = metric_sum(&metrics, &["robots_fetches_total"]);
    let pages_during = tail.fetched;
    // memory is judged while crawling with robots.txt known for every host: crawl on until
    // each host's robots.txt was fetched (or the time is up)
    let after = match then_crawl {
        None => None,
        Some(CrawlAfterPlan {
            hosts,
            limit,
            at_least,
            ship_warc,
        }) => {
            // ... and on until a checkpoint of the host journal (every host record
            // changed meanwhile rewritten) has ended: at 1M hosts it is the crawl's
            // largest single step, so its memory belongs in the figure
            let t1 = Instant::now();
            let mut robots = robots_fetches;
            let (mut checkpoints, mut checkpoint_hosts) = (0, 0);
            let mut shipped = (0, 0);
            while (robots < hosts || checkpoints == 0 || t1.elapsed() < at_least)
                && t1.elapsed() < limit
            {
                std::thread::sleep(Duration::from_secs(1));
                // a slow answer is not the end of an hour's run: asked again next second
                let Ok(metrics) = d.get_text("/metrics") else {
                    continue;
                };
                robots = metric_sum(&metrics, &["robots_fetches_total"]);
                checkpoints = metric_sum(&metrics, &["store_journal_checkpoints_total"]);
                checkpoint_hosts = metric_sum(&metrics, &["store_journal_checkpoint_hosts_total"]);
                if ship_warc {
                    let (f, b) = ship_warc_files(d.dir.path());
                    shipped = (shipped.0 + f, shipped.1 + b);
                }
            }
            tail.poll()?;
            Some(CrawlAfter {
                secs: t1.elapsed().as_secs_f64(),
                robots_fetches: robots,
                checkpoints,
                checkpoint_hosts,
                pages: tail.fetched,
                vm_hwm: procfs::vm_hwm(pid).unwrap_or(0),
                vm_rss: procfs::vm_rss(pid).unwrap_or(0),
                open_fds: fs::read_dir(format!("/proc/{pid}/fd"))
                    .map(|d| d.count())
                    .unwrap_or(0),
                warc_shipped: shipped,
                store_bytes: store_bytes(&d.dir.path().join("data")),
            })
        }
    };
    d.stop(Duration::from_secs(60));
    Ok(IngestRun {
        lines,
        accepted,
        secs,
        write_bytes,
        wchar,
        cpu_secs,
        vm_hwm,
        pages_during,
        robots_fetches,
        open_fds,
        submit_status: status.to_string(),
        after,
    })
}

/// Sum of every sample of the counters named `names` in a Prometheus text exposition.
pub(crate) fn metric_sum(text: &str, names: &[&str]) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            let name = l.split(['{', ' ']).next().unwrap_or("");
            names.iter().any(|n| name.ends_with(n))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
