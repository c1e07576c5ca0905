//! A real `nats-server -js` for the tests that need a broker (crates/cluster/tests and the
//! end-to-end tests/tests/cluster.rs), shared by both: free loopback ports, a temporary
//! store, killed with SIGKILL on drop. It owns starting, readiness, kill and restart of the
//! server processes; it never talks NATS itself. One server, or three clustered
//! (routes between them, JetStream replicated over RAFT). The binary comes from `PATH`,
//! `/usr/sbin` (Debian's package) or `NATS_SERVER=/path`; without it [`NatsServer::start`]
//! prints SKIPPED and returns None, except under `CI=1`, where it fails.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn find_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_SERVER") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// `n` distinct loopback ports free now, below Linux's ephemeral range (32768-60999): a
/// port the kernel handed out for `bind(0)` may be handed out again, to another test's
/// listener or to an outgoing connection's local end, between our check and nats-server's
/// own bind. The listeners are held until all `n` are found, so no port comes twice.
fn free_ports(n: usize) -> Vec<u16> {
    use std::hash::{BuildHasher, RandomState};
    let seed = RandomState::new().hash_one(std::process::id());
    let mut held: Vec<TcpListener> = (0..4_096u64)
        .map(|i| 20_000 + (seed.wrapping_add(i.wrapping_mul(7_919)) % 12_000) as u16)
        .filter_map(|p| TcpListener::bind(("127.0.0.1", p)).ok())
        .take(n)
        .collect();
    while held.len() < n {
        held.push(TcpListener::bind("127.0.0.1:0").expect("a free loopback port"));
    }
    held.iter()
        .map(|l| l.local_addr().expect("a bound listener's address").port())
        .collect()
}

/// The binary, or None after saying why the test is skipped (a failure under `CI=1`).
fn binary_or_skip() -> Option<PathBuf> {
    let found = find_binary();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nats-server not found (apt-get install nats-server, or set NATS_SERVER=/path)"
        );
        eprintln!(
            "SKIPPED: nats-server not found (apt-get install nats-server, or set NATS_SERVER=/path/to/nats-server)"
        );
    }
    found
}

/// One server process of a [`NatsServer`].
struct Member {
    port: u16,
    cluster_port: u16,
    child: Option<Child>,
}

/// One nats-server, or a three-server cluster.
pub struct NatsServer {
    binary: PathBuf,
    store: tempfile::TempDir,
    members: Vec<Member>,
    starts: u32,
}

impl NatsServer {
    /// One server with JetStream, or None (SKIPPED) without the binary.
    pub fn start() -> Option<NatsServer> {
        NatsServer::start_n(1)
    }

    /// Three servers clustered with JetStream (streams may use `replicas = 3`).
    pub fn start_cluster() -> Option<NatsServer> {
        NatsServer::start_n(3)
    }

    fn start_n(n: usize) -> Option<NatsServer> {
        let binary = binary_or_skip()?;
        // nats-server 2.9 (Debian 12's) sometimes never elects a JetStream meta leader when
        // three fresh servers bootstrap at once on a loaded machine; the routes are up but
        // RAFT stays leaderless. A fresh cluster (new ports, new stores) forms normally, so
        // a cluster gets three attempts. A port found free can still be taken by another
        // process before nats-server binds it ("address already in use", CI of stop 50), so
        // one server gets three attempts too, each on new ports.
        let attempts = 3;
        let wait = Duration::from_secs(if n > 1 { 30 } else { 60 });
        let mut failures = Vec::new();
        for attempt in 1..=attempts {
            let mut s = NatsServer {
                binary: binary.clone(),
                store: tempfile::tempdir().expect("temp dir"),
                members: free_ports(2 * n)
                    .chunks(2)
                    .map(|ports| Member {
                        port: ports[0],
                        cluster_port: ports[1],
                        child: None,
                    })
                    .collect(),
                starts: 0,
            };
            for i in 0..n {
                s.spawn(i);
            }
            match (0..n).try_for_each(|i| s.wait_ready(i, wait)) {
                Ok(()) => return Some(s),
                Err(why) => {
                    eprintln!("nats-server start, attempt {attempt} of {attempts}: {why}");
                    let logs: Vec<String> = (0..n)
                        .map(|i| format!("--- server {i} ---\n{}", s.logs_of(i)))
                        .collect();
                    failures.push(format!("attempt {attempt}: {why}\n{}", logs.join("\n")));
                }
            }
        }
        panic!(
            "nats-server did not start in {attempts} attempt(s):\n{}",
            failures.join("\n")
        );
    }

    /// Client URLs of every server, comma-separated (as `cluster.nats_url` takes them).
    pub fn url(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("nats://127.0.0.1:{}", m.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.store
            .path()
            .join(format!("server{i}-{}.log", self.starts))
    }

    fn spawn(&mut self, i: usize) {
        self.starts += 1;
        let log = self.log_path(i);
        let m = &self.members[i];
        let mut cmd = Command::new(&self.binary);
        cmd.args(["-js", "-a", "127.0.0.1", "-p", &m.port.to_string(), "-sd"])
            .arg(self.store.path().join(format!("js{i}")))
            .arg("-l")
            .arg(&log);
        if self.members.len() > 1 {
            let routes: Vec<String> = self
                .members
                .iter()
                .map(|o| format!("nats-route://127.0.0.1:{}", o.cluster_port))
                .collect();
            cmd.args(["-n", &format!("s{i}"), "--cluster_name", "frontierd-test"])
                .arg("--cluster")
                .arg(format!("nats://127.0.0.1:{}", m.cluster_port))
                .arg("--routes")
                .arg(routes.join(","));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nats-server");
        self.members[i].child = Some(child);
    }

    /// Wait until server `i` says it is ready and takes connections (a cluster member is
    /// ready once JetStream has a meta leader); Err says what was missing.
    fn wait_ready(&mut self, i: usize, wait: Duration) -> Result<(), String> {
        let deadline = Instant::now() + wait;
        let port = self.members[i].port;
        loop {
            let logs = self.logs_of(i);
            let serving = logs.contains("Server is ready");
            let has_leader = self.members.len() == 1 || logs.contains("metadata leader");
            if serving && has_leader && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.members[i]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!("server {i} exited ({status})"));
            }
            if Instant::now() >= deadline {
                let missing = if !serving {
                    "not serving"
                } else if !has_leader {
                    "serving, but no JetStream metadata leader"
                } else {
                    "not accepting connections"
                };
                return Err(format!("server {i} after {wait:?}: {missing}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything server `i` logged, over all its runs.
    fn logs_of(&self, i: usize) -> String {
        let mut out = String::new();
        let prefix = format!("server{i}-");
        for e in std::fs::read_dir(self.store.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) {
                out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        out
    }

    /// SIGKILL server `i` (no clean shutdown) and wait for it to exit.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Restart server `i` on the same ports and store, and wait until it serves.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = self.members[i].port;
        let log = self.log_path(i);
        loop {
            let ready = std::fs::read_to_string(&log)
                .map(|t| t.contains("Server is ready"))
                .unwrap_or(false);
            if ready && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nats-server {i} not ready again after 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn store(&self) -> &Path {
        self.store.path()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
