//! A real `nats-server -js` for the tests: a free loopback port, a temporary store directory,
//! killed (SIGKILL) on drop. Needs the `nats-server` binary (Debian: `apt-get install
//! nats-server`; `.ci/run` installs it). Without it a test prints SKIPPED and returns, except
//! under `CI=1`, where the missing binary is a failure. `NATS_SERVER=/path` picks a binary.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{ClusterConfig, ClusterSettings};
use frontier::PolitenessKeyMode;

pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: tempfile::TempDir,
    child: Option<Child>,
    starts: u32,
}

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

impl NatsServer {
    /// Start a server, or `None` (after printing why) when the binary is absent outside CI.
    pub fn start() -> Option<NatsServer> {
        let Some(binary) = find_binary() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "nats-server not found (apt-get install nats-server, or set NATS_SERVER)"
            );
            eprintln!("SKIPPED: nats-server not found (apt-get install nats-server, or set NATS_SERVER=/path/to/nats-server)");
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = NatsServer {
            binary,
            port,
            store: tempfile::tempdir().expect("temp dir"),
            child: None,
            starts: 0,
        };
        server.restart();
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Settings of a node owning `owned` of `shards` shards on this server.
    pub fn settings(&self, node: &str, shards: u32, owned: &str) -> ClusterSettings {
        let mut c = ClusterConfig::single_node(node, &self.url(), shards);
        c.owned_shards = owned.into();
        c.validate(PolitenessKeyMode::Host)
            .expect("valid test config")
    }

    /// SIGKILL the server (no clean shutdown) and wait for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// (Re)start on the same port and store, and wait until it serves JetStream.
    pub fn restart(&mut self) {
        self.kill();
        self.starts += 1;
        let log = self
            .store
            .path()
            .join(format!("server-{}.log", self.starts));
        let child = Command::new(&self.binary)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.store.path().join("js"))
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nats-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = std::fs::read_to_string(&log)
                .map(|t| t.contains("Server is ready"))
                .unwrap_or(false);
            if ready && TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "nats-server exited ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "nats-server not ready after 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Poll `check` until it returns `Some`, failing after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
