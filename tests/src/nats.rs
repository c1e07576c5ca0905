//! A real `nats-server -js` for the cluster tests (tests/tests/cluster.rs): free loopback
//! ports, a temporary store, killed with SIGKILL on drop. One server, or three clustered
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
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
        let mut s = NatsServer {
            binary,
            store: tempfile::tempdir().expect("temp dir"),
            members: (0..n)
                .map(|_| Member {
                    port: free_port(),
                    cluster_port: free_port(),
                    child: None,
                })
                .collect(),
            starts: 0,
        };
        for i in 0..n {
            s.spawn(i);
        }
        for i in 0..n {
            s.wait_ready(i);
        }
        Some(s)
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
    /// ready once JetStream has a meta leader).
    fn wait_ready(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = self.members[i].port;
        loop {
            let logs = self.logs_of(i);
            let ready = logs.contains("Server is ready")
                && (self.members.len() == 1 || logs.contains("metadata leader"));
            if ready && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            if let Some(status) = self.members[i]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("nats-server {i} exited ({status}): {logs}");
            }
            assert!(
                Instant::now() < deadline,
                "nats-server {i} not ready after 60 s: {logs}"
            );
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
