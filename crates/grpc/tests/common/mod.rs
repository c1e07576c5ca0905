//! What the in-process service tests share: a sled frontier served by
//! `frontier_grpc::serve`, robots.txt answered at once by the test hooks, a tonic client.

// (each test file uses some of these)
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use frontier::{Frontier, FrontierConfig, RobotsFetchOutcome, RobotsLease};
use frontier_grpc::pb::url_frontier_client::UrlFrontierClient;
use frontier_grpc::pb::{self, url_item::Item};
use frontier_grpc::{GrpcEvent, GrpcSettings, Hooks, LogLevel};
use tonic::transport::Channel;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// robots.txt: 404 (allow all) for every origin, except /private on robots.test.
pub struct TestHooks {
    pub frontier: Arc<Frontier>,
    pub events: Mutex<Vec<String>>,
    /// Set: intake refused with this reason (as the daemon does while its disk is low).
    pub refuse: Mutex<Option<String>>,
}

impl Hooks for TestHooks {
    fn fetch_robots(&self, lease: RobotsLease) {
        let outcome = if lease.origin.contains("robots.test") {
            RobotsFetchOutcome::Success {
                status: 200,
                body: b"User-agent: *\nDisallow: /private\n".to_vec(),
                max_age: None,
            }
        } else {
            RobotsFetchOutcome::ClientError { status: 404 }
        };
        self.frontier
            .complete_robots(&lease, &outcome, 1, now_ms())
            .unwrap();
    }
    fn intake_refusal(&self) -> Option<String> {
        self.refuse.lock().unwrap().clone()
    }
    fn event(&self, event: GrpcEvent<'_>) {
        self.events.lock().unwrap().push(format!("{event:?}"));
    }
    fn set_log_level(&self, target: &str, level: LogLevel) -> Result<String, String> {
        if target.contains('.') {
            return Err(format!("not a tracing target: {target}"));
        }
        self.events
            .lock()
            .unwrap()
            .push(format!("log {target}={}", level.as_str()));
        Ok(format!("{target}={}", level.as_str()))
    }
}

pub struct Server {
    pub _dir: tempfile::TempDir,
    pub addr: std::net::SocketAddr,
    pub hooks: Arc<TestHooks>,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

pub async fn start(token: Option<&str>, tune: impl FnOnce(&mut FrontierConfig)) -> Server {
    start_tls(token, None, tune).await
}

pub async fn start_tls(
    token: Option<&str>,
    tls: Option<frontier_grpc::TlsPem>,
    tune: impl FnOnce(&mut FrontierConfig),
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = FrontierConfig::new(dir.path()).without_gaps();
    tune(&mut cfg);
    let frontier = Arc::new(Frontier::open(cfg).unwrap());
    let hooks = Arc::new(TestHooks {
        frontier: frontier.clone(),
        events: Mutex::new(Vec::new()),
        refuse: Mutex::new(None),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let settings = GrpcSettings {
        token: token.map(str::to_string),
        node_address: addr.to_string(),
        expiry_tick: Duration::from_millis(50),
        tls,
        ..GrpcSettings::default()
    };
    let h: Arc<dyn Hooks> = hooks.clone();
    tokio::spawn(frontier_grpc::serve(
        listener,
        frontier,
        h,
        settings,
        async {
            let _ = rx.await;
        },
    ));
    Server {
        _dir: dir,
        addr,
        hooks,
        stop: Some(tx),
    }
}

pub async fn client(s: &Server) -> UrlFrontierClient<Channel> {
    UrlFrontierClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap()
}

pub fn info(url: &str, meta: &[(&str, &[&str])]) -> pb::UrlInfo {
    pb::UrlInfo {
        url: url.to_string(),
        key: String::new(),
        metadata: meta
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    pb::StringList {
                        values: v.iter().map(|s| s.to_string()).collect(),
                    },
                )
            })
            .collect(),
        crawl_id: String::new(),
    }
}

pub fn discovered(i: pb::UrlInfo) -> pb::UrlItem {
    pb::UrlItem {
        item: Some(Item::Discovered(pb::DiscoveredUrlItem { info: Some(i) })),
        id: String::new(),
        creation_date: 0,
    }
}

pub fn known(url: &str, refetch: u64) -> pb::UrlItem {
    pb::UrlItem {
        item: Some(Item::Known(pb::KnownUrlItem {
            info: Some(info(url, &[])),
            refetchable_from_date: refetch,
        })),
        id: format!("known:{url}"),
        creation_date: 0,
    }
}

/// PutURLs of `items`, all acks read; a stream that stalls fails after 120 s instead of
/// holding the suite until CI's limit.
pub async fn put(
    c: &mut UrlFrontierClient<Channel>,
    items: Vec<pb::UrlItem>,
) -> Vec<pb::AckMessage> {
    let n = items.len();
    let all = async {
        let mut s = c
            .put_ur_ls(tokio_stream::iter(items))
            .await
            .unwrap()
            .into_inner();
        let mut out = Vec::new();
        while let Some(a) = s.message().await.unwrap() {
            out.push(a);
        }
        out
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), all)
        .await
        .unwrap_or_else(|_| panic!("PutURLs of {n} items: not all acked after 120 s"))
}

pub fn params(delay: u32) -> pb::GetParams {
    pb::GetParams {
        max_urls_per_queue: 0,
        max_queues: 0,
        key: String::new(),
        delay_requestable: delay,
        item: None,
    }
}

pub async fn get(c: &mut UrlFrontierClient<Channel>, p: pb::GetParams) -> Vec<pb::UrlInfo> {
    let mut s = c.get_ur_ls(p).await.unwrap().into_inner();
    let mut out = Vec::new();
    while let Some(u) = s.message().await.unwrap() {
        out.push(u);
    }
    out
}

/// GetURLs until `pred` holds for what came back, or panic at the deadline.
pub async fn get_until(
    c: &mut UrlFrontierClient<Channel>,
    p: pb::GetParams,
    pred: impl Fn(&[pb::UrlInfo]) -> bool,
) -> Vec<pb::UrlInfo> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut all = Vec::new();
    loop {
        all.extend(get(c, p.clone()).await);
        if pred(&all) {
            return all;
        }
        assert!(Instant::now() < deadline, "condition not met; got {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
