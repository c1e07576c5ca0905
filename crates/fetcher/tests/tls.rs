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

fn url(server: &TlsServer, path: &str) -> Url {
    Url::parse(&format!("https://{NAME}:{}{path}", server.addr.port())).unwrap()
}

#[tokio::test]
async fn https_negotiates_http2_by_alpn() {
    let server = TlsServer::start(&[NAME], &[b"h2", b"http/1.1"], "hello over h2").await;
    let fetch = trusting(&server)
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
    let fetch = trusting(&server)
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
