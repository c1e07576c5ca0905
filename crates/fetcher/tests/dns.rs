//! The DNS cache against a real DNS server: dnsmasq (Debian `dnsmasq-base`) on a free
//! loopback port, answering from a hosts file with a TTL of its own. An answer is kept for
//! its TTL and then asked again (a changed address is seen), `max_ttl` cuts a long TTL, a
//! name that does not exist is answered from the negative cache until `negative_ttl`, and a
//! page fetch goes to the address the server gave.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fetcher::{DnsConfig, DnsResult, FetchOutcome, Fetcher, FetcherConfig, Url};
use support::*;

/// dnsmasq on 127.0.0.1:<port>, killed when dropped.
struct Dnsmasq {
    child: Child,
    port: u16,
    hosts: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_udp_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind udp");
    s.local_addr().expect("addr").port()
}

impl Dnsmasq {
    /// Answers `hosts` (a hosts file's text) with TTL `ttl_s`; `nx.dns.test` is NXDOMAIN.
    fn start(hosts: &str, ttl_s: u32) -> Dnsmasq {
        let bin = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
            .into_iter()
            .find(|p| Path::new(p).exists());
        let Some(bin) = bin else {
            panic!("dnsmasq is not installed (apt-get install dnsmasq-base; .ci/run does)");
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let hosts_path = dir.path().join("hosts");
        std::fs::write(&hosts_path, hosts).unwrap();
        // a free UDP port may be taken for TCP, or by a parallel test: try another
        let mut last_error = String::new();
        for _ in 0..10 {
            let port = free_udp_port();
            let mut child = Command::new(bin)
                .args([
                    "--keep-in-foreground",
                    "--conf-file=/dev/null",
                    "--no-resolv",
                    "--no-hosts",
                    "--bind-interfaces",
                    "--listen-address=127.0.0.1",
                    "--user=root",
                    "--pid-file=",
                    "--address=/nx.dns.test/",
                ])
                .arg(format!("--port={port}"))
                .arg(format!("--local-ttl={ttl_s}"))
                .arg(format!("--addn-hosts={}", hosts_path.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start dnsmasq");
            // listening once it answers over TCP (it opens UDP and TCP at start)
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Dnsmasq {
                        child,
                        port,
                        hosts: hosts_path,
                        _dir: dir,
                    };
                }
                if let Ok(Some(status)) = child.try_wait() {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut e, &mut err);
                    }
                    last_error = format!("port {port}: {status}: {err}");
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_error = format!("port {port}: not listening after 10 s");
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("dnsmasq did not start: {last_error}");
    }

    /// New hosts-file text, read again on SIGHUP.
    fn change(&self, hosts: &str) {
        std::fs::write(&self.hosts, hosts).unwrap();
        let ok = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

fn fetcher(dns: &Dnsmasq, tune: impl FnOnce(&mut DnsConfig)) -> Fetcher {
    let mut cfg = DnsConfig {
        servers: vec![dns.addr()],
        min_ttl: Duration::ZERO,
        ..DnsConfig::default()
    };
    tune(&mut cfg);
    Fetcher::new(FetcherConfig {
        dns: cfg,
        ..test_config()
    })
    .expect("fetcher")
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test]
async fn an_answer_is_kept_for_its_ttl_then_asked_again() {
    let dns = Dnsmasq::start("127.0.0.1 a.dns.test\n", 2);
    let f = fetcher(&dns, |_| {});
    let t0 = Instant::now();
    assert_eq!(f.lookup("a.dns.test").await, Ok(vec![ip("127.0.0.1")]));
    assert_eq!(f.dns_stats().lookups_of(DnsResult::Resolved), 1);
    // the server changes its answer; the cache keeps the old one for the TTL (2 s)
    dns.change("127.0.0.2 a.dns.test\n");
    assert_eq!(f.lookup("A.dns.test.").await, Ok(vec![ip("127.0.0.1")]));
    assert_eq!(f.dns_stats().lookups_of(DnsResult::Cached), 1);
    let seen_new = loop {
        let got = f.lookup("a.dns.test").await;
        if got == Ok(vec![ip("127.0.0.2")]) {
            break t0.elapsed();
        }
        assert_eq!(got, Ok(vec![ip("127.0.0.1")]));
        assert!(t0.elapsed() < Duration::from_secs(15), "never asked again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        seen_new >= Duration::from_millis(1_900),
        "asked again after {seen_new:?}, inside the 2 s TTL"
    );
    assert_eq!(f.dns_stats().lookups_of(DnsResult::Resolved), 2);
    assert_eq!(f.dns_stats().cache_entries, 1);
}

#[tokio::test]
async fn max_ttl_cuts_a_long_ttl() {
    let dns = Dnsmasq::start("127.0.0.1 long.dns.test\n", 3600);
    let f = fetcher(&dns, |c| c.max_ttl = Duration::from_millis(500));
    let t0 = Instant::now();
    assert!(f.lookup("long.dns.test").await.is_ok());
    dns.change("127.0.0.3 long.dns.test\n");
    loop {
        if f.lookup("long.dns.test").await == Ok(vec![ip("127.0.0.3")]) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the hour-long TTL was obeyed past max_ttl"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(t0.elapsed() >= Duration::from_millis(450));
}

#[tokio::test]
async fn a_missing_name_is_cached_as_missing_for_the_negative_ttl() {
    let dns = Dnsmasq::start("127.0.0.1 a.dns.test\n", 60);
    let f = fetcher(&dns, |c| c.negative_ttl = Duration::from_secs(1));
    let t0 = Instant::now();
    let first = f.lookup("nx.dns.test").await.unwrap_err();
    assert_eq!(first.0, DnsResult::NxDomain, "{first:?}");
    let again = f.lookup("nx.dns.test").await.unwrap_err();
    assert_eq!(again.0, DnsResult::NxDomain);
    let s = f.dns_stats();
    assert_eq!(s.lookups_of(DnsResult::NxDomain), 1, "{s:?}");
    assert_eq!(s.lookups_of(DnsResult::CachedFailure), 1, "{s:?}");
    // after negative_ttl the server is asked again
    while f.dns_stats().lookups_of(DnsResult::NxDomain) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10), "never asked again");
        let _ = f.lookup("nx.dns.test").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(t0.elapsed() >= Duration::from_millis(950));
}

#[tokio::test]
async fn a_page_is_fetched_from_the_address_dns_gave_and_a_dns_failure_is_an_outcome() {
    let server = HttpServer::start(|_req| async move { respond(200, &[], "hello") }).await;
    let dns = Dnsmasq::start("127.0.0.1 page.dns.test\n", 60);
    let f = fetcher(&dns, |_| {});
    let url = Url::parse(&format!("http://page.dns.test:{}/x", server.port())).unwrap();
    let page = f.fetch_page(&url).await.unwrap();
    assert!(
        matches!(page.outcome, FetchOutcome::Success { .. }),
        "{:?}",
        page.outcome
    );
    assert_eq!(page.peer_addr.map(|a| a.ip()), Some(ip("127.0.0.1")));
    let nx = Url::parse(&format!("http://nx.dns.test:{}/x", server.port())).unwrap();
    let failed = f.fetch_page(&nx).await.unwrap();
    match &failed.outcome {
        FetchOutcome::Network { kind, detail } => {
            assert_eq!(*kind, fetcher::NetworkErrorKind::Dns);
            assert!(detail.contains("nxdomain"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(failed.peer_addr, None);
}
