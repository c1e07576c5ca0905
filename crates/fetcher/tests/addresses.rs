//! The address policy, end to end through the client: a refused address gets no
//! connection attempt at all. Every server here is on loopback; a refused address is
//! proved by the refusal and by a listener on it that never sees a connection (these
//! tests never connect outside 127.0.0.0/8).

mod support;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use fetcher::{AddressPolicy, AddressRule, FetchError, FetchOutcome, Fetcher, FetcherConfig};
use support::*;
use tokio::net::TcpListener;

/// A listener that only counts the connections it accepts (it never answers).
struct CountingListener {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingListener {
    async fn start(ip: &str) -> CountingListener {
        let listener = TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        CountingListener {
            addr,
            accepted,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for CountingListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn with_policy(addresses: AddressPolicy, resolve: fetcher::ResolveTable) -> Fetcher {
    Fetcher::new(FetcherConfig {
        addresses,
        resolve,
        ..test_config()
    })
    .expect("fetcher")
}

fn refusal(result: Result<fetcher::PageFetch, FetchError>) -> fetcher::AddressRefused {
    match result {
        Err(FetchError::AddressRefused { refused, .. }) => refused,
        Err(other) => panic!("expected an address refusal, got {other}"),
        Ok(fetch) => panic!(
            "expected an address refusal, got {:?}",
            fetch.outcome.status()
        ),
    }
}

#[tokio::test]
async fn default_policy_refuses_an_ip_literal_without_connecting() {
    let target = CountingListener::start("127.0.0.1").await;
    let f = with_policy(AddressPolicy::default(), Default::default());
    let url = fetcher::Url::parse(&format!("http://{}/admin", target.addr)).unwrap();
    let refused = refusal(f.fetch_page(&url).await);
    assert_eq!(refused.rule, AddressRule::Loopback);
    assert_eq!(refused.addr, target.addr);
    // IPv4-mapped IPv6 spelling of the same address: judged as the IPv4 address
    let mapped = fetcher::Url::parse(&format!(
        "http://[::ffff:127.0.0.1]:{}/admin",
        target.addr.port()
    ))
    .unwrap();
    assert_eq!(
        refusal(f.fetch_page(&mapped).await).rule,
        AddressRule::Loopback
    );
    assert_eq!(target.accepted(), 0, "a refused address got a connection");
}

#[tokio::test]
async fn resolve_table_name_on_a_refused_address_is_refused() {
    let target = CountingListener::start("127.0.0.1").await;
    let f = with_policy(AddressPolicy::default(), loopback_table(&["internal.test"]));
    let url =
        fetcher::Url::parse(&format!("http://internal.test:{}/", target.addr.port())).unwrap();
    let refused = refusal(f.fetch_page(&url).await);
    assert_eq!(refused.rule, AddressRule::Loopback);
    // robots.txt goes through the same check
    match f.fetch_robots(&url).await {
        Err(FetchError::AddressRefused { refused, .. }) => {
            assert_eq!(refused.rule, AddressRule::Loopback)
        }
        other => panic!(
            "robots.txt of a refused host: {:?}",
            other.map(|f| f.outcome)
        ),
    }
    assert_eq!(target.accepted(), 0);
}

#[tokio::test]
async fn allowed_loopback_is_fetched() {
    let server = HttpServer::start(|_req| async move { respond(200, &[], "ok") }).await;
    let f = with_policy(AddressPolicy::allowing_loopback(), Default::default());
    let fetch = f.fetch_page(&server.url("/")).await.expect("fetch");
    assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
    assert_eq!(server.seen().len(), 1);
}

/// A name with several addresses: the refused ones are dropped from the answer and the
/// connection goes to an allowed one.
#[tokio::test]
async fn refused_addresses_are_dropped_from_a_mixed_answer() {
    let server = HttpServer::start(|_req| async move { respond(200, &[], "ok") }).await;
    // the same port on 127.0.0.2, which the policy below refuses
    let refused_side = TcpListener::bind(("127.0.0.2", server.port()))
        .await
        .expect("bind the same port on 127.0.0.2");
    let policy = AddressPolicy::default().allowing("127.0.0.1/32".parse().unwrap());
    let mut table = fetcher::ResolveTable::new();
    table
        .insert(
            "mixed.test",
            ["127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap()],
        )
        .unwrap();
    let f = with_policy(policy, table);
    let url = fetcher::Url::parse(&format!("http://mixed.test:{}/", server.port())).unwrap();
    for _ in 0..3 {
        let fetch = f.fetch_page(&url).await.expect("fetch");
        assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
        assert_eq!(fetch.peer_addr, Some(server.addr));
    }
    // a connection made during the fetches would be waiting in the refused side's backlog
    let pending =
        tokio::time::timeout(std::time::Duration::from_millis(50), refused_side.accept()).await;
    assert!(pending.is_err(), "127.0.0.2 got a connection");
}

/// robots.txt on an allowed address redirecting to a refused one: the hop is refused
/// before any connection.
#[tokio::test]
async fn robots_redirect_to_a_refused_address_is_refused() {
    let target = CountingListener::start("127.0.0.2").await;
    let location = format!("http://{}/robots.txt", target.addr);
    let server = HttpServer::start(move |_req| {
        let location = location.clone();
        async move { respond(301, &[("location", location.as_str())], "") }
    })
    .await;
    let policy = AddressPolicy::default().allowing("127.0.0.1/32".parse().unwrap());
    let f = with_policy(policy, Default::default());
    match f.fetch_robots(&server.url("/")).await {
        Err(FetchError::AddressRefused { refused, .. }) => {
            assert_eq!(refused.rule, AddressRule::Loopback);
            assert_eq!(refused.addr, target.addr);
        }
        other => panic!("expected a refusal, got {:?}", other.map(|f| f.outcome)),
    }
    assert_eq!(server.seen().len(), 1, "the allowed first hop was asked");
    assert_eq!(target.accepted(), 0);
}

#[tokio::test]
async fn own_listener_is_never_fetched_even_when_allowed() {
    let target = CountingListener::start("127.0.0.1").await;
    let f = with_policy(
        AddressPolicy::allowing_loopback(),
        loopback_table(&["me.test"]),
    );
    f.add_own_listener(target.addr);
    for url in [
        format!("http://{}/metrics", target.addr),
        format!("http://me.test:{}/v1/stats", target.addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/v1/stats", target.addr.port()),
    ] {
        let refused = refusal(f.fetch_page(&fetcher::Url::parse(&url).unwrap()).await);
        assert_eq!(refused.rule, AddressRule::OwnListener, "{url}");
    }
    assert_eq!(target.accepted(), 0);
}
