//! The send gate: a request to a host its gate closed for is not sent, whether the gate
//! closed before the fetch, between the connection opening and the write, or while a
//! connection to the host sat in the pool.

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fetcher::{FetchError, FetchOutcome, Fetcher, FetcherConfig, SendGate};
use support::*;

/// Closed for the hosts in `closed`; and for every host once it has been asked `open_for`
/// times (when set).
#[derive(Default)]
struct TestGate {
    closed: Mutex<HashSet<String>>,
    asked: AtomicUsize,
    open_for: Option<usize>,
}

impl TestGate {
    fn close(&self, host: &str) {
        self.closed.lock().unwrap().insert(host.to_string());
    }
}

impl SendGate for TestGate {
    fn may_send(&self, origin: &str) -> bool {
        let asked = self.asked.fetch_add(1, Ordering::SeqCst);
        let host = origin
            .trim_start_matches("http://")
            .split(':')
            .next()
            .unwrap();
        !self.closed.lock().unwrap().contains(host) && self.open_for.is_none_or(|n| asked < n)
    }
}

fn gated(gate: &Arc<TestGate>) -> Fetcher {
    let f = Fetcher::new(FetcherConfig {
        resolve: loopback_table(&["a.test", "b.test"]),
        ..test_config()
    })
    .expect("fetcher");
    assert!(f.set_send_gate(gate.clone()));
    f
}

async fn ok_server() -> HttpServer {
    HttpServer::start(|_req| async { respond(200, &[("content-type", "text/plain")], "ok") }).await
}

fn url(server: &HttpServer, host: &str, path: &str) -> url::Url {
    url::Url::parse(&format!("http://{host}:{}{path}", server.port())).unwrap()
}

fn withheld_origin<T>(result: Result<T, FetchError>) -> String {
    match result {
        Err(FetchError::Withheld { withheld, .. }) => withheld.origin,
        Err(other) => panic!("expected the request withheld, got {other}"),
        Ok(_) => panic!("expected the request withheld, it was sent"),
    }
}

#[tokio::test]
async fn a_host_the_gate_is_closed_for_gets_no_request_and_others_do() {
    let server = ok_server().await;
    let gate = Arc::new(TestGate::default());
    gate.close("a.test");
    let f = gated(&gate);
    let a = f.fetch_page(&url(&server, "a.test", "/p")).await;
    assert_eq!(
        withheld_origin(a),
        format!("http://a.test:{}", server.port())
    );
    let b = f.fetch_page(&url(&server, "b.test", "/p")).await.unwrap();
    assert!(matches!(b.outcome, FetchOutcome::Success { .. }));
    let seen: Vec<_> = server
        .seen()
        .iter()
        .map(|s| s.headers["host"].clone())
        .collect();
    assert_eq!(seen.len(), 1, "only b.test was asked: {seen:?}");
    assert!(seen[0].to_str().unwrap().starts_with("b.test"));
}

/// The case a frozen node meets: the fetch began while the gate was open, and it closed
/// before the request was written.
#[tokio::test]
async fn a_gate_that_closes_after_the_connection_opened_withholds_the_request() {
    let server = ok_server().await;
    // yes to the connect, no to the write
    let gate = Arc::new(TestGate {
        open_for: Some(1),
        ..TestGate::default()
    });
    let f = gated(&gate);
    let a = f.fetch_page(&url(&server, "a.test", "/p")).await;
    assert!(withheld_origin(a).starts_with("http://a.test:"));
    assert!(
        gate.asked.load(Ordering::SeqCst) >= 2,
        "asked at the write too"
    );
    assert!(server.seen().is_empty(), "nothing reached the server");
}

#[tokio::test]
async fn a_kept_connection_sends_nothing_once_its_host_is_closed() {
    let server = ok_server().await;
    let gate = Arc::new(TestGate::default());
    let f = gated(&gate);
    let first = f.fetch_page(&url(&server, "a.test", "/1")).await.unwrap();
    assert!(matches!(first.outcome, FetchOutcome::Success { .. }));
    assert!(f.open_connections() >= 1, "the connection is kept");
    gate.close("a.test");
    let second = f.fetch_page(&url(&server, "a.test", "/2")).await;
    assert!(withheld_origin(second).starts_with("http://a.test:"));
    let paths: Vec<_> = server.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/1"]);
}

#[tokio::test]
async fn robots_txt_is_withheld_for_its_own_host_but_follows_a_hop_elsewhere() {
    let server = HttpServer::start(|req| async move {
        let host = req.headers()["host"].to_str().unwrap().to_string();
        if host.starts_with("a.test") {
            let to = format!(
                "http://b.test:{}/robots.txt",
                host.rsplit(':').next().unwrap()
            );
            respond(301, &[("location", to.as_str())], "")
        } else {
            respond(200, &[], "User-agent: *\nDisallow: /x\n")
        }
    })
    .await;
    let gate = Arc::new(TestGate::default());
    let f = gated(&gate);
    // the gate answers for the host whose robots.txt it is, not for where it moved
    gate.close("b.test");
    let fetched = f.fetch_robots(&url(&server, "a.test", "/")).await.unwrap();
    assert_eq!(fetched.hops, 1);
    assert!(matches!(fetched.outcome, FetchOutcome::Success { .. }));
    assert_eq!(server.seen().len(), 2);
    gate.close("a.test");
    let withheld = f.fetch_robots(&url(&server, "a.test", "/")).await;
    assert!(withheld_origin(withheld).starts_with("http://a.test:"));
    assert_eq!(server.seen().len(), 2, "nothing more was sent");
}
