//! HTTPS: rustls with extra roots, HTTP/2 and HTTP/1.1 chosen by ALPN, certificate
//! failures.

mod support;

use fetcher::{FetchOutcome, Fetcher, FetcherConfig, NetworkErrorKind, Url};
use support::*;

const NAME: &str = "secure.test";

fn trusting(server: &TlsServer) -> Fetcher {
    Fetcher::new(FetcherConfig {
        resolve: loopback_table(&[NAME]),
        extra_root_certificates: vec![server.cert_der.clone()],
        ..test_config()
    })
    .expect("fetcher")
}

fn trusting_with_http2(server: &TlsServer) -> Fetcher {
    Fetcher::new(FetcherConfig {
        resolve: loopback_table(&[NAME]),
        extra_root_certificates: vec![server.cert_der.clone()],
        http2: true,
        ..test_config()
    })
    .expect("fetcher")
}

fn url(server: &TlsServer, path: &str) -> Url {
    Url::parse(&format!("https://{NAME}:{}{path}", server.addr.port())).unwrap()
}

/// By default only HTTP/1.1 is offered, so a server that prefers h2 answers in HTTP/1.1;
/// with `http2` it answers in h2.
#[tokio::test]
async fn https_offers_http2_by_alpn_only_when_asked() {
    let server = TlsServer::start(&[NAME], &[b"h2", b"http/1.1"], "hello").await;
    let fetch = trusting(&server)
        .fetch_page(&url(&server, "/p"))
        .await
        .unwrap();
    assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
    assert_eq!(fetch.request.version, http::Version::HTTP_11);
    assert_eq!(server.versions(), vec![http::Version::HTTP_11]);

    let server = TlsServer::start(&[NAME], &[b"h2", b"http/1.1"], "hello over h2").await;
    let fetch = trusting_with_http2(&server)
        .fetch_page(&url(&server, "/p"))
        .await
        .unwrap();
    match &fetch.outcome {
        FetchOutcome::Success { body, .. } => assert_eq!(&body[..], b"hello over h2"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fetch.request.version, http::Version::HTTP_2);
    assert_eq!(fetch.response.unwrap().version, http::Version::HTTP_2);
    assert_eq!(fetch.peer_addr, Some(server.addr));
    assert_eq!(server.versions(), vec![http::Version::HTTP_2]);
}

#[tokio::test]
async fn https_falls_back_to_http1_when_the_server_offers_only_that() {
    let server = TlsServer::start(&[NAME], &[b"http/1.1"], "User-agent: *\nDisallow:\n").await;
    let fetch = trusting_with_http2(&server)
        .fetch_robots(&url(&server, "/"))
        .await
        .unwrap();
    match &fetch.outcome {
        FetchOutcome::Success { body, .. } => assert_eq!(&body[..], b"User-agent: *\nDisallow:\n"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.versions(), vec![http::Version::HTTP_11]);
}

#[tokio::test]
async fn untrusted_certificate_is_tls() {
    let server = TlsServer::start(&[NAME], &[b"h2", b"http/1.1"], "secret").await;
    let fetcher = Fetcher::new(FetcherConfig {
        resolve: loopback_table(&[NAME]),
        ..test_config()
    })
    .unwrap();
    let fetch = fetcher.fetch_page(&url(&server, "/")).await.unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Tls),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn certificate_for_another_name_is_tls() {
    let server = TlsServer::start(&["other.test"], &[b"h2", b"http/1.1"], "secret").await;
    let fetch = trusting(&server)
        .fetch_page(&url(&server, "/"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Tls),
        "{:?}",
        fetch.outcome
    );
}

#[test]
fn garbage_root_certificate_is_refused_at_build_time() {
    let err = Fetcher::new(FetcherConfig {
        extra_root_certificates: vec![b"not a certificate".to_vec()],
        ..FetcherConfig::default()
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            fetcher::FetcherError::InvalidRootCertificate { index: 0, .. }
        ),
        "{err}"
    );
}

/// A crawl going round more hosts than rustls's default store remembers (32 servers) with
/// a new connection each time (the servers close kept connections, or the pool is full)
/// resumes every host's TLS session on its next visit, as many as `tls_sessions` allows;
/// with a store smaller than the round, the oldest server is forgotten first and nothing
/// resumes; 0 never resumes.
#[tokio::test]
async fn a_round_of_hosts_resumes_its_tls_sessions() {
    const HOSTS: usize = 40;
    let names: Vec<String> = (0..HOSTS).map(|i| format!("h{i}.round.test")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    for (tls_sessions, resumed_in_second_round) in [(None, HOSTS), (Some(32), 0), (Some(0), 0)] {
        let server = TlsServer::start(&name_refs, &[b"http/1.1"], "page").await;
        let mut config = FetcherConfig {
            resolve: loopback_table(&["*.round.test"]),
            extra_root_certificates: vec![server.cert_der.clone()],
            // every fetch on a connection of its own, as when servers close them
            max_pooled_connections: 0,
            ..test_config()
        };
        if let Some(n) = tls_sessions {
            config.tls_sessions = n;
        }
        let fetcher = Fetcher::new(config).expect("fetcher");
        for _round in 0..2 {
            for name in &names {
                let url = Url::parse(&format!("https://{name}:{}/", server.addr.port())).unwrap();
                let fetch = fetcher.fetch_page(&url).await.unwrap();
                assert!(
                    matches!(fetch.outcome, FetchOutcome::Success { .. }),
                    "{name}: {:?}",
                    fetch.outcome
                );
            }
        }
        let resumed = server.resumed();
        assert_eq!(resumed.len(), 2 * HOSTS, "a connection a fetch");
        assert!(
            resumed[..HOSTS].iter().all(|r| !r),
            "first visits have nothing to resume"
        );
        let second = resumed[HOSTS..].iter().filter(|r| **r).count();
        assert_eq!(
            second, resumed_in_second_round,
            "tls_sessions {tls_sessions:?}"
        );
    }
}
