//! End-to-end suite: starts the real `frontierd` binary against local sites and talks to it only as a user would.
//!
//! The harness: [`Site`] is an HTTP server on a 127.0.0.1 ephemeral port that records every
//! request it receives (time, host, path, when the answer was fully sent) and answers through
//! a handler that may misbehave ([`Reply`]). [`Env`] is a temp directory with a config file
//! (`[resolve]` maps `*.site.test` to 127.0.0.1, so the Host header names the site);
//! [`Daemon`] is the running binary (killed on drop). [`crawl_log`], [`warc_records`] and
//! [`wait_until`] read its output and poll with a deadline.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub mod fs_faults;
/// The shared nats-server harness (crates/nats-harness).
pub use nats_harness as nats;
mod site;

// ------------------------------------------------------------------ the binary

/// The `frontierd` binary of this build: `target/<profile>/frontierd` next to the test
/// executable (`target/<profile>/deps/<test>`), built with `cargo build -p frontierd` once per
/// test process so that it is never stale. `FRONTIERD_BIN` overrides.
pub fn frontierd_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("FRONTIERD_BIN") {
            let p = PathBuf::from(p);
            assert!(p.is_file(), "FRONTIERD_BIN={} is not a file", p.display());
            return p;
        }
        let exe = std::env::current_exe().expect("current_exe");
        let deps = exe.parent().expect("test executable has a parent");
        let profile_dir = if deps.file_name().is_some_and(|n| n == "deps") {
            deps.parent().expect("deps has a parent").to_path_buf()
        } else {
            deps.to_path_buf()
        };
        let bin = profile_dir.join(format!("frontierd{}", std::env::consts::EXE_SUFFIX));
        let target_dir = profile_dir.parent().expect("profile dir has a parent");
        let profile = profile_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("debug")
            .to_string();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        // the variables cargo sets for this test process would change the build's
        // fingerprint and rebuild the binary every time: drop them
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if (k.starts_with("CARGO_") && k != "CARGO_HOME") || k == "OUT_DIR" {
                cmd.env_remove(&k);
            }
        }
        cmd.args(["build", "--quiet", "-p", "frontierd", "--bin", "frontierd"])
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile.as_str() {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        let built = cmd.status();
        assert!(
            bin.is_file(),
            "the frontierd binary is missing at {} (cargo build -p frontierd: {built:?}); \
             build it first or set FRONTIERD_BIN",
            bin.display()
        );
        bin
    })
    .clone()
}

pub use site::{Hit, Reply, Req, Site};

// ------------------------------------------------------------------ the daemon

/// A temp directory with `data/`, the spool directories and a config file.
/// `frontierd config check FILE`, run to the end.
pub fn config_check(config: &Path) -> std::process::Output {
    Command::new(frontierd_bin())
        .args(["config", "check"])
        .arg(config)
        .output()
        .expect("run frontierd config check")
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub data: PathBuf,
    pub config: PathBuf,
}

/// The test defaults; `overrides` are `(section, key, raw TOML value)`; an empty value
/// leaves the key out (the binary's default then).
pub fn config_text(data: &Path, overrides: &[(&str, &str, &str)]) -> String {
    let mut c: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut set = |s: &str, k: &str, v: &str| {
        c.entry(s.to_string())
            .or_default()
            .insert(k.to_string(), v.to_string());
    };
    set(
        "store",
        "data_dir",
        &format!("{:?}", data.display().to_string()),
    );
    set(
        "fetch",
        "user_agent",
        "\"frontierd-test/0.1 (+https://example.org/bot)\"",
    );
    set("fetch", "workers", "8");
    set("fetch", "connect_timeout", "\"2s\"");
    set("fetch", "total_timeout", "\"5s\"");
    set("fetch", "shutdown_grace", "\"5s\"");
    set("politeness", "min_delay", "\"0s\"");
    set("politeness", "max_delay", "\"0s\"");
    set("politeness", "delay_factor", "0.0");
    set("politeness", "backoff_base", "\"1s\"");
    set("politeness", "backoff_max", "\"2s\"");
    set("intake", "poll_interval", "\"100ms\"");
    set("admin", "listen", "\"127.0.0.1:0\"");
    set("log", "stats_interval", "\"1s\"");
    // Every site of the suite listens on 127.0.0.1, and most tests are about per-host
    // rules: the address's shared budget would slow them all to its pace. The IP-group
    // tests (ip_groups.rs) set these keys themselves.
    set("politeness", "max_in_flight_per_ip", "100000");
    set("politeness", "ip_delay", "\"0s\"");
    set("resolve", "\"*.site.test\"", "[\"127.0.0.1\"]");
    // the suite's sites are on loopback, which the address policy refuses by default; a
    // test of the default policy sets this key to "" (left out)
    set("addresses", "allow", "[\"127.0.0.0/8\", \"::1\"]");
    for (s, k, v) in overrides {
        set(s, k, v);
    }
    for (s, k, v) in overrides {
        if v.is_empty() {
            if let Some(kv) = c.get_mut(*s) {
                kv.remove(*k);
            }
        }
    }
    let mut out = String::new();
    for (section, kv) in &c {
        out.push_str(&format!("[{section}]\n"));
        for (k, v) in kv {
            out.push_str(&format!("{k} = {v}\n"));
        }
        out.push('\n');
    }
    out
}

impl Env {
    pub fn new(overrides: &[(&str, &str, &str)]) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        for sub in ["incoming", "tmp"] {
            std::fs::create_dir_all(data.join("spool").join(sub)).unwrap();
        }
        let config = dir.path().join("frontierd.toml");
        std::fs::write(&config, config_text(&data, overrides)).unwrap();
        let check = config_check(&config);
        assert!(
            check.status.success(),
            "config check failed: {}{}\n{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr),
            std::fs::read_to_string(&config).unwrap()
        );
        Env { dir, data, config }
    }

    pub fn crawl_log_path(&self) -> PathBuf {
        self.data.join("crawl.log.jsonl")
    }

    pub fn crawl_log(&self) -> Vec<serde_json::Value> {
        crawl_log(&self.crawl_log_path())
    }

    pub fn warc_dir(&self) -> PathBuf {
        self.data.join("warc")
    }

    /// Write a spool file in `spool/tmp`, then rename it into `spool/incoming`.
    pub fn spool(&self, name: &str, content: &[u8]) {
        let tmp = self.data.join("spool").join("tmp").join(name);
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, self.data.join("spool").join("incoming").join(name)).unwrap();
    }

    pub fn daemon_log(&self) -> String {
        let mut s = String::new();
        for entry in std::fs::read_dir(self.dir.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("daemon") && name.ends_with(".log") {
                s.push_str(&format!("---- {name}\n"));
                s.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        s
    }

    /// How many lines of the daemon's log (all runs) contain `text`.
    pub fn daemon_log_count(&self, text: &str) -> usize {
        self.daemon_log()
            .lines()
            .filter(|l| l.contains(text))
            .count()
    }

    /// Start `frontierd run` on this environment and wait for its admin API.
    pub fn start(&self) -> Daemon {
        self.start_with(&[])
    }

    /// `IP:PORT` of the running daemon's gRPC listener (`[grpc] listen`), once it listens.
    pub fn grpc_addr(&self) -> String {
        let file = self.data.join("grpc.addr");
        let mut addr = String::new();
        wait_until("grpc.addr", Duration::from_secs(30), || {
            addr = std::fs::read_to_string(&file)
                .unwrap_or_default()
                .trim()
                .to_string();
            addr.parse::<SocketAddr>().is_ok()
        });
        addr
    }

    /// `frontierd SUBCOMMAND --config <this config>`, for the CLI clients (`submit`,
    /// `stats`, `hosts`); add arguments, then run it.
    pub fn cli(&self, subcommand: &str) -> Command {
        let mut c = Command::new(frontierd_bin());
        c.arg(subcommand).arg("--config").arg(&self.config);
        c
    }

    /// [`Env::start`] with more arguments for `frontierd run` (e.g. `--seeds FILE`).
    pub fn start_with(&self, args: &[&std::ffi::OsStr]) -> Daemon {
        self.start_with_env(args, &[])
    }

    /// [`Env::start_with`] with environment variables set for the daemon's process.
    pub fn start_with_env(
        &self,
        args: &[&std::ffi::OsStr],
        vars: &[(&str, &std::ffi::OsStr)],
    ) -> Daemon {
        static SERIAL: AtomicUsize = AtomicUsize::new(0);
        let addr_file = self.data.join("admin.addr");
        let _ = std::fs::remove_file(&addr_file);
        // written after admin.addr when [grpc] is on (see `Env::grpc_addr`)
        let _ = std::fs::remove_file(self.data.join("grpc.addr"));
        let n = SERIAL.fetch_add(1, Ordering::Relaxed);
        let log =
            std::fs::File::create(self.dir.path().join(format!("daemon-{n:03}.log"))).unwrap();
        let child = Command::new(frontierd_bin())
            .arg("run")
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn frontierd");
        let mut d = Daemon {
            child,
            admin: String::new(),
        };
        let start = Instant::now();
        loop {
            if let Some(a) = std::fs::read_to_string(&addr_file)
                .ok()
                .and_then(|s| s.trim().parse::<SocketAddr>().ok())
            {
                d.admin = a.to_string();
                break;
            }
            if let Some(status) = d.child.try_wait().unwrap() {
                panic!("frontierd exited at start: {status}\n{}", self.daemon_log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "frontierd did not write admin.addr within 60 s\n{}",
                self.daemon_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

/// The running binary; SIGKILLed and reaped on drop.
pub struct Daemon {
    pub child: Child,
    /// `IP:PORT` of the admin API.
    pub admin: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: plain kill(2) on our own child.
        let r = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(r, 0, "kill({}, {sig})", self.child.id());
    }

    /// SIGKILL and reap.
    pub fn kill9(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Wait for the exit, at most `deadline`.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if start.elapsed() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Peak resident set size (VmHWM) in KiB.
    pub fn vm_hwm_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status")
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http(&self.admin, "GET", path, b"")
    }

    /// POST /v1/urls; the parsed answer.
    pub fn submit(&self, urls: &[String]) -> serde_json::Value {
        let body = serde_json::to_vec(urls).unwrap();
        let (status, text) = http(&self.admin, "POST", "/v1/urls", &body);
        assert_eq!(status, 200, "POST /v1/urls: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// GET /metrics: the Prometheus text.
    pub fn metrics(&self) -> String {
        let (status, text) = self.get("/metrics");
        assert_eq!(status, 200, "GET /metrics: {text}");
        text
    }

    pub fn post(&self, path: &str) -> (u16, String) {
        http(&self.admin, "POST", path, b"")
    }

    pub fn healthy(&self) -> bool {
        try_http(&self.admin, "GET", "/healthz", b"").is_ok_and(|(s, _)| s == 200)
    }
}

/// One HTTP/1.1 request with `Connection: close`; (status, body).
pub fn try_http(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    exchange(addr, method, path, &[], body).map(|a| (a.status, a.body))
}

/// An HTTP answer with its headers (names lowercased).
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The first header of that (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request with extra headers and `Connection: close`.
pub fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut req = req.into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Answer {
        status,
        headers,
        body: body.to_string(),
    })
}

/// `s` percent-encoded for a URL path segment (everything but ASCII letters and digits).
pub fn path_segment(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    try_http(addr, method, path, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

// ------------------------------------------------------------------ output

/// The crawl log's complete lines.
pub fn crawl_log(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Does the crawl log have a line for `url` with this outcome?
pub fn logged(log: &[serde_json::Value], url: &str, outcome: &str) -> bool {
    log.iter()
        .any(|l| l["url"] == url && l["outcome"] == outcome)
}

/// The crawl log line(s) for a URL.
pub fn lines_for<'a>(log: &'a [serde_json::Value], url: &str) -> Vec<&'a serde_json::Value> {
    log.iter().filter(|l| l["url"] == url).collect()
}

/// The value of one sample (`name` with its labels as exposed, e.g.
/// `frontierd_page_fetches_total{class="2xx"}`) in Prometheus text; None if absent.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(' ')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Poll `f` every 50 ms until it is true; panic naming `what` after `deadline`.
pub fn wait_until(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Python interpreter the suite runs warcio with: `FRONTIERD_PYTHON` when set, else the
/// project venv `<repo>/.venv/bin/python3` when it exists (Debian 12's system Python refuses
/// `pip install`, PEP 668, so warcio lives in a venv), else `python3` from `PATH`.
/// Fail clearly, saying what to install, when grpcio-tools is missing from `py` (the gRPC
/// tests generate their Python client from the repository's .proto files).
pub fn require_grpcio(py: &Path) {
    let ok = Command::new(py)
        .args(["-c", "import grpc, grpc_tools.protoc"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} has no grpcio / grpcio-tools: `{} -m pip install grpcio grpcio-tools` (what .ci/run does), or set FRONTIERD_PYTHON",
        py.display(),
        py.display()
    );
}

pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("FRONTIERD_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = repo_root().join(".venv").join("bin").join("python3");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("python3")
}

/// The repository checkout this suite belongs to (`tests/` is one level below it).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Why `python` cannot run warcio, with the commands that fix it; None when it can.
pub fn warcio_problem(python: &Path) -> Option<String> {
    let why = match Command::new(python)
        .args(["-c", "import warcio.cli"])
        .output()
    {
        Ok(out) if out.status.success() => return None,
        Ok(out) => format!(
            "`{} -c \"import warcio.cli\"` failed ({}): {}",
            python.display(),
            out.status,
            // the traceback's last line says it: ModuleNotFoundError: No module named 'warcio'
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("")
        ),
        Err(e) => format!("cannot run {}: {e}", python.display()),
    };
    let venv = repo_root().join(".venv");
    Some(format!(
        "the end-to-end suite needs the Python package warcio (it validates the WARC output), \
         and the interpreter it found has none: {why}\n\
         The interpreter is $FRONTIERD_PYTHON if set, else {venv}/bin/python3 if it exists, else \
         python3 from PATH. Create the project venv (what .ci/run does):\n\
         \n    apt-get install -y python3-venv        # Debian/Ubuntu, as root\n    \
         python3 -m venv {venv}\n    \
         {venv}/bin/pip install warcio\n\n\
         or set FRONTIERD_PYTHON to a python3 that has warcio.",
        venv = venv.display()
    ))
}

/// Fail clearly, saying what to install, when warcio is missing. Probed once per process.
pub fn require_warcio() {
    static PROBLEM: OnceLock<Option<String>> = OnceLock::new();
    if let Some(problem) = PROBLEM.get_or_init(|| warcio_problem(&python())) {
        panic!("{problem}");
    }
}

/// Run `python -m warcio.cli ARGS FILE` (after [`require_warcio`]).
fn warcio(args: &[&str], file: &Path) -> std::process::Output {
    require_warcio();
    let python = python();
    Command::new(&python)
        .args(["-m", "warcio.cli"])
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("running {} -m warcio.cli: {e}", python.display()))
}

/// `*.warc.gz` files (closed ones) and `.open` ones in a directory.
pub fn warc_files(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut closed = Vec::new();
    let mut open = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let name = p.to_string_lossy().into_owned();
        if name.ends_with(".open") {
            open.push(p);
        } else if name.ends_with(".warc.gz") {
            closed.push(p);
        }
    }
    closed.sort();
    open.sort();
    (closed, open)
}

/// `warcio check -v FILE`: Err(output) when it fails.
pub fn warcio_check(file: &Path) -> Result<(), String> {
    let out = warcio(&["check", "-v"], file);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// (WARC-Type, WARC-Target-URI) of every record of a file, through `warcio index`.
pub fn warc_records(file: &Path) -> Vec<(String, String)> {
    let out = warcio(&["index", "-f", "warc-type,warc-target-uri"], file);
    assert!(
        out.status.success(),
        "warcio index {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            (
                v["warc-type"].as_str().unwrap_or("").to_string(),
                v["warc-target-uri"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The WARC record whose gzip member starts at `offset` in `file`: its header fields (names
/// lower-cased) and its block. Read with flate2 alone (no warcio needed): one member, as a
/// replay tool seeking to a CDX offset would.
pub fn warc_record_at(file: &Path, offset: u64) -> (BTreeMap<String, String>, Vec<u8>) {
    use std::io::Seek;
    let mut f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    f.seek(std::io::SeekFrom::Start(offset)).unwrap();
    let mut member = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut member)
        .unwrap_or_else(|e| panic!("no gzip member at {offset} in {}: {e}", file.display()));
    let end = member
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no WARC header at {offset} in {}", file.display()));
    let head = String::from_utf8_lossy(&member[..end]).into_owned();
    let mut lines = head.split("\r\n");
    assert_eq!(lines.next(), Some("WARC/1.1"), "record at {offset}");
    let fields: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect();
    let len: usize = fields
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .expect("Content-Length");
    let block = member[end + 4..end + 4 + len].to_vec();
    (fields, block)
}

/// A small deterministic generator (xorshift), seeded from the clock unless `E2E_SEED` is set;
/// the seed is printed so a failure can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        let seed = std::env::var("E2E_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("E2E_SEED={seed}");
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in `lo..hi` (ms).
    pub fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next_u64() % (hi - lo).max(1))
    }
}

impl Default for Rng {
    fn default() -> Self {
        Rng::new()
    }
}

/// Every request to `host` after the first waited at least `gap` after the answer before it
/// began (the site's own clock: a lower bound of the crawler's pause), `within` a few
/// milliseconds of timer slack; a request one of the `kills` cut off (asked before the kill,
/// answered after it or never) is judged from the kill instead, against `after_kill`
/// (what a restart knows of the host may be less than the crawl-delay robots.txt gave).
pub fn assert_gaps_across_kills(
    hits: &[site::Hit],
    host: &str,
    gap: Duration,
    after_kill: Duration,
    kills: &[Instant],
) {
    let slack = Duration::from_millis(5);
    for pair in hits.windows(2) {
        let (before, next) = (&pair[0], &pair[1]);
        let cut = kills
            .iter()
            .find(|k| before.start <= **k && before.sent.is_none_or(|s| s >= **k));
        let (from, what, min) = match (cut, before.sent) {
            (Some(k), _) => (*k, "the kill", after_kill),
            (None, Some(sent)) => (sent, "the answer", gap),
            (None, None) => continue,
        };
        let waited = next.start.saturating_duration_since(from);
        assert!(
            waited + slack >= min,
            "{host}{} asked {waited:?} after {what} to {} (gap {min:?})\n{hits:#?}",
            next.path,
            before.path,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_warcio_names_the_venv_commands() {
        // `false` runs and fails like a python3 without warcio
        let msg = warcio_problem(Path::new("false")).expect("false has no warcio");
        let venv = repo_root().join(".venv");
        assert!(msg.contains("apt-get install -y python3-venv"), "{msg}");
        assert!(
            msg.contains(&format!("python3 -m venv {}", venv.display())),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("{}/bin/pip install warcio", venv.display())),
            "{msg}"
        );
        assert!(msg.contains("FRONTIERD_PYTHON"), "{msg}");
    }

    #[test]
    fn unrunnable_interpreter_is_named() {
        let msg = warcio_problem(Path::new("/nonexistent/python3")).expect("cannot run");
        assert!(msg.contains("cannot run /nonexistent/python3"), "{msg}");
        assert!(msg.contains("pip install warcio"), "{msg}");
    }
}
