//! robots.txt fetches against a local server: statuses, redirects, caps, decoding,
//! Retry-After, max-age, the resolve table, and network failures.

mod support;

use std::io::Write;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use fetcher::{ContentCoding, FetchOutcome, Fetcher, FetcherConfig, NetworkErrorKind, Url};
use http::header::HOST;
use support::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn fetcher(config: FetcherConfig) -> Fetcher {
    Fetcher::new(config).expect("fetcher")
}

fn body_of(outcome: &FetchOutcome) -> (&Bytes, bool) {
    match outcome {
        FetchOutcome::Success {
            body, truncated, ..
        } => (body, *truncated),
        other => panic!("expected success, got {other:?}"),
    }
}

#[tokio::test]
async fn robots_200_is_success_with_body_agent_and_max_age() {
    let server = HttpServer::start(|req| async move {
        assert_eq!(req.uri().path(), "/robots.txt");
        respond(
            200,
            &[
                ("content-type", "text/plain"),
                ("cache-control", "public, max-age=7200"),
            ],
            ROBOTS,
        )
    })
    .await;
    let config = FetcherConfig {
        user_agent: "frontierd-test/0.1 (+https://example.org/bot)".into(),
        ..test_config()
    };
    let fetch = fetcher(config)
        .fetch_robots(&server.url("/some/page?q=1#frag"))
        .await
        .unwrap();

    assert_eq!(fetch.requested_url, server.url("/robots.txt"));
    assert_eq!(fetch.final_url, fetch.requested_url);
    assert_eq!(fetch.hops, 0);
    assert_eq!(fetch.peer_addr, Some(server.addr));
    assert_eq!(fetch.exchanges.len(), 1);
    assert_eq!(fetch.exchanges[0].request.url, fetch.requested_url);
    assert!(fetch.exchanges[0].response.is_some());
    match &fetch.outcome {
        FetchOutcome::Success {
            status,
            body,
            truncated,
            max_age,
            content_coding,
            ..
        } => {
            assert_eq!(status.as_u16(), 200);
            assert_eq!(&body[..], ROBOTS.as_bytes());
            assert!(!truncated);
            assert_eq!(*max_age, Some(Duration::from_secs(7200)));
            assert_eq!(*content_coding, ContentCoding::Identity);
        }
        other => panic!("{other:?}"),
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].headers["user-agent"],
        "frontierd-test/0.1 (+https://example.org/bot)"
    );
    // Unconditional GET: no validators sent.
    assert!(!seen[0].headers.contains_key("if-modified-since"));
    assert!(!seen[0].headers.contains_key("if-none-match"));
}

/// One server, many origins: the status comes from the host name (`s503.wild.test`),
/// which the resolve table pins to 127.0.0.1.
#[tokio::test]
async fn every_status_class_is_classified() {
    let server = HttpServer::start(|req| async move {
        let host = req.headers()[HOST].to_str().unwrap().to_owned();
        let status: u16 = host[1..4].parse().unwrap();
        respond(status, &[], "body")
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["*.wild.test"]),
        ..test_config()
    });
    for status in [
        200u16, 204, 300, 304, 400, 401, 403, 404, 410, 429, 451, 500, 502, 503, 504,
    ] {
        let origin = Url::parse(&format!("http://s{status}.wild.test:{}/", server.port())).unwrap();
        let fetch = f.fetch_robots(&origin).await.unwrap();
        let ok = match (&fetch.outcome, status) {
            (FetchOutcome::Success { status: s, .. }, 200..=299) => s.as_u16() == status,
            // 3xx without Location: a redirect that cannot be followed.
            (
                FetchOutcome::Redirect {
                    status: s,
                    location: None,
                },
                300..=399,
            ) => s.as_u16() == status,
            (FetchOutcome::TooManyRequests { retry_after: None }, 429) => true,
            (FetchOutcome::ClientError { status: s }, 400..=499) => s.as_u16() == status,
            (
                FetchOutcome::ServerError {
                    status: s,
                    retry_after: None,
                },
                500..=599,
            ) => s.as_u16() == status,
            _ => false,
        };
        assert!(ok, "status {status} gave {:?}", fetch.outcome);
        assert_eq!(fetch.outcome.status().map(|s| s.as_u16()), Some(status));
    }
}

/// `/robots.txt` -> `/hop/1` -> ... -> `/hop/<chain>` which serves the file.
async fn redirect_chain_server(chain: u32) -> HttpServer {
    HttpServer::start(move |req| async move {
        let path = req.uri().path().to_owned();
        let n: u32 = if path == "/robots.txt" {
            0
        } else {
            path.trim_start_matches("/hop/").parse().unwrap()
        };
        if n == chain {
            respond(200, &[], ROBOTS)
        } else {
            // Relative Locations, mixed statuses: all must be followed.
            let status = [301, 302, 303, 307, 308][n as usize % 5];
            respond(status, &[("location", &format!("/hop/{}", n + 1))], "")
        }
    })
    .await
}

#[tokio::test]
async fn five_redirect_hops_are_followed() {
    let server = redirect_chain_server(5).await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    assert_eq!(fetch.hops, 5);
    assert_eq!(fetch.final_url, server.url("/hop/5"));
    assert_eq!(body_of(&fetch.outcome).0, ROBOTS.as_bytes());
    assert_eq!(server.seen().len(), 6);
    assert_eq!(fetch.exchanges.len(), 6, "every hop is recorded");
    assert_eq!(
        fetch.exchanges.last().map(|h| h.request.url.clone()),
        Some(server.url("/hop/5"))
    );
}

#[tokio::test]
async fn sixth_redirect_exceeds_the_limit() {
    let server = redirect_chain_server(6).await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome,
        FetchOutcome::RedirectLimitExceeded {
            hops: 5,
            location: server.url("/hop/6"),
        }
    );
    assert_eq!(fetch.hops, 5);
    assert_eq!(fetch.final_url, server.url("/hop/5"));
    // The target past the limit is never requested.
    assert_eq!(server.seen().len(), 6);
}

#[tokio::test]
async fn redirect_limit_is_configurable() {
    let server = redirect_chain_server(2).await;
    let fetch = fetcher(FetcherConfig {
        robots_max_redirects: 1,
        ..test_config()
    })
    .fetch_robots(&server.url("/"))
    .await
    .unwrap();
    assert!(matches!(
        fetch.outcome,
        FetchOutcome::RedirectLimitExceeded { hops: 1, .. }
    ));
}

#[tokio::test]
async fn cross_origin_redirect_is_followed_through_the_resolve_table() {
    let target = HttpServer::start(|req| async move {
        let host = req.headers()[HOST].to_str().unwrap().to_owned();
        respond(200, &[], format!("# served for {host}\n{ROBOTS}"))
    })
    .await;
    let target_port = target.port();
    let origin = HttpServer::start(move |_req| async move {
        let location = format!("http://robots.site-b.test:{target_port}/robots.txt");
        respond(301, &[("location", location.as_str())], "")
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["site-a.test", "*.site-b.test"]),
        ..test_config()
    });
    let origin_url = Url::parse(&format!("http://site-a.test:{}/", origin.port())).unwrap();
    let fetch = f.fetch_robots(&origin_url).await.unwrap();
    assert_eq!(fetch.hops, 1);
    assert_eq!(
        fetch.final_url.as_str(),
        format!("http://robots.site-b.test:{target_port}/robots.txt")
    );
    let (body, _) = body_of(&fetch.outcome);
    assert!(body.starts_with(format!("# served for robots.site-b.test:{target_port}\n").as_bytes()));
    assert_eq!(
        origin.seen()[0].headers[HOST],
        format!("site-a.test:{}", origin.port())
    );
}

#[tokio::test]
async fn resolve_table_exact_and_wildcard_names_reach_the_server() {
    let server = HttpServer::start(|req| async move {
        let host = req.headers()[HOST].to_str().unwrap().to_owned();
        respond(200, &[], host)
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["site-a.test", "*.wild.test"]),
        ..test_config()
    });
    for name in ["site-a.test", "x.wild.test", "a.b.wild.test", "SITE-A.test"] {
        let url = Url::parse(&format!("http://{name}:{}/", server.port())).unwrap();
        let fetch = f.fetch_robots(&url).await.unwrap();
        let (body, _) = body_of(&fetch.outcome);
        assert_eq!(
            &body[..],
            format!("{}:{}", name.to_ascii_lowercase(), server.port()).as_bytes()
        );
    }
    // Not in the table: goes to the system resolver, which knows no `.invalid` name.
    let url = Url::parse(&format!("http://nowhere.invalid:{}/", server.port())).unwrap();
    let fetch = f.fetch_robots(&url).await.unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Dns)
    );
}

#[tokio::test]
async fn stall_before_headers_times_out() {
    let server = HttpServer::start(|_req| async move {
        std::future::pending::<()>().await;
        unreachable!()
    })
    .await;
    let f = fetcher(FetcherConfig {
        total_timeout: Duration::from_millis(300),
        ..test_config()
    });
    let started = Instant::now();
    let fetch = f.fetch_robots(&server.url("/")).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Timeout)
    );
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(fetch.timings.time_to_headers, None);
}

#[tokio::test]
async fn stall_mid_body_times_out() {
    let server = HttpServer::start(|_req| async move {
        http::Response::builder()
            .status(200)
            .header("content-length", "1000")
            .body(ScriptedBody::chunks(
                [Bytes::from_static(b"User-agent: *\n")],
                BodyEnd::Stall,
            ))
            .unwrap()
    })
    .await;
    let f = fetcher(FetcherConfig {
        total_timeout: Duration::from_millis(300),
        ..test_config()
    });
    let fetch = f.fetch_robots(&server.url("/")).await.unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Timeout)
    );
    assert!(fetch.timings.time_to_headers.is_some());
}

#[tokio::test]
async fn reset_mid_body_is_a_network_failure() {
    let server = RawServer::start(|stream, _head| async move {
        let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".to_vec();
        bytes.extend_from_slice(&[b'#'; 2000]);
        write_then_reset(stream, &bytes).await;
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    let kind = fetch.outcome.network_error_kind();
    assert!(
        matches!(
            kind,
            Some(NetworkErrorKind::Reset | NetworkErrorKind::BrokenChunking)
        ),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn connection_closed_mid_body_is_broken() {
    // The server's body fails: hyper drops the connection before Content-Length is met.
    let server = HttpServer::start(|_req| async move {
        http::Response::builder()
            .status(200)
            .header("content-length", "1000")
            .body(ScriptedBody::chunks(
                [Bytes::from_static(b"User-agent: *\n")],
                BodyEnd::Abort,
            ))
            .unwrap()
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    let kind = fetch.outcome.network_error_kind();
    assert!(
        matches!(
            kind,
            Some(NetworkErrorKind::Reset | NetworkErrorKind::BrokenChunking)
        ),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn invalid_chunked_encoding_is_broken_chunking() {
    let server = RawServer::start(|stream, _head| async move {
        let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                      e\r\nUser-agent: *\n\r\nZZZ-not-a-size\r\nDisallow: /\r\n0\r\n\r\n";
        write_then_hold(stream, bytes).await;
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::BrokenChunking),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn garbage_response_head_is_invalid_response() {
    let server = RawServer::start(|stream, _head| async move {
        write_then_hold(stream, b"SSH-2.0-OpenSSH_9.6\r\n\r\n").await;
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::InvalidResponse),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn closed_before_headers_is_reset() {
    let server = RawServer::start(|stream, _head| async move {
        drop(stream);
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Reset),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn refused_connection_is_connect() {
    // a port bound but not listening: connections to it are refused, and no other test can
    // take it meanwhile (a listener's port, once dropped, could be)
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let url = Url::parse(&format!("http://{addr}/")).unwrap();
    let fetch = fetcher(test_config()).fetch_robots(&url).await.unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Connect)
    );
}

#[tokio::test]
async fn https_to_a_plain_http_server_is_tls() {
    let server = HttpServer::start(|_req| async move { respond(200, &[], ROBOTS) }).await;
    let url = Url::parse(&format!("https://127.0.0.1:{}/", server.port())).unwrap();
    let fetch = fetcher(test_config()).fetch_robots(&url).await.unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Tls),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn five_mib_robots_is_cut_at_500_kib_and_flagged() {
    let server =
        HttpServer::start(|_req| async move { respond(200, &[], vec![b'a'; 5 * 1024 * 1024]) })
            .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    let (body, truncated) = body_of(&fetch.outcome);
    assert_eq!(body.len(), 500 * 1024);
    assert!(truncated);
}

/// 100 MiB of zeros, gzipped once per test binary (about 100 KiB).
fn gzip_bomb() -> Bytes {
    static BOMB: OnceLock<Bytes> = OnceLock::new();
    BOMB.get_or_init(|| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..100 {
            enc.write_all(&zeros).unwrap();
        }
        Bytes::from(enc.finish().unwrap())
    })
    .clone()
}

#[tokio::test]
async fn gzip_bomb_robots_is_cut_at_the_cap() {
    let bomb = gzip_bomb();
    assert!(bomb.len() < 1024 * 1024);
    let server = HttpServer::start(move |_req| {
        let bomb = bomb.clone();
        async move { respond(200, &[("content-encoding", "gzip")], bomb) }
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    let (body, truncated) = body_of(&fetch.outcome);
    assert_eq!(body.len(), 500 * 1024);
    assert!(body.iter().all(|b| *b == 0));
    assert!(truncated);
}

#[tokio::test]
async fn gzip_deflate_and_brotli_bodies_are_decoded() {
    let robots = ROBOTS.repeat(50);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(robots.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zl.write_all(robots.as_bytes()).unwrap();
    let zl = zl.finish().unwrap();
    let mut br = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
        w.write_all(robots.as_bytes()).unwrap();
    }
    let server = HttpServer::start(move |req| {
        let (coding, body) = match req.headers()[HOST].to_str().unwrap().split('.').next() {
            Some("gzip") => ("gzip", gz.clone()),
            Some("deflate") => ("deflate", zl.clone()),
            _ => ("br", br.clone()),
        };
        async move { respond(200, &[("content-encoding", coding)], body) }
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["*.enc.test"]),
        ..test_config()
    });
    for (name, coding) in [
        ("gzip", ContentCoding::Gzip),
        ("deflate", ContentCoding::Deflate),
        ("br", ContentCoding::Brotli),
    ] {
        let url = Url::parse(&format!("http://{name}.enc.test:{}/", server.port())).unwrap();
        let fetch = f.fetch_robots(&url).await.unwrap();
        match &fetch.outcome {
            FetchOutcome::Success {
                body,
                truncated,
                content_coding,
                ..
            } => {
                assert_eq!(&body[..], robots.as_bytes(), "{name}");
                assert!(!truncated);
                assert_eq!(*content_coding, coding);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn corrupt_gzip_is_invalid_response() {
    let server = HttpServer::start(|_req| async move {
        respond(
            200,
            &[("content-encoding", "gzip")],
            "User-agent: *\nDisallow: /\n",
        )
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_robots(&server.url("/"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::InvalidResponse),
        "{:?}",
        fetch.outcome
    );
}

#[tokio::test]
async fn retry_after_both_forms_on_503_and_429() {
    // An HTTP-date two minutes ahead of the test's clock; the fetcher reads the clock
    // once when the response arrives, so the wait is a little under 120 s.
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    // The case is the first label of the host: `503-seconds.ra.test`, ...
    let server = HttpServer::start(move |req| {
        let date = date.clone();
        let host = req.headers()[HOST].to_str().unwrap().to_owned();
        async move {
            match host.split('.').next().unwrap() {
                "503-seconds" => respond(503, &[("retry-after", "3600")], ""),
                "503-date" => respond(503, &[("retry-after", &date)], ""),
                "429-seconds" => respond(429, &[("retry-after", "45")], ""),
                "429-date" => respond(429, &[("retry-after", &date)], ""),
                _ => respond(503, &[("retry-after", "whenever")], ""),
            }
        }
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["*.ra.test"]),
        ..test_config()
    });
    let fetch = |case: &str| {
        let url = Url::parse(&format!("http://{case}.ra.test:{}/", server.port())).unwrap();
        let f = f.clone();
        async move { f.fetch_robots(&url).await.unwrap().outcome }
    };
    let near_two_minutes = |d: Option<Duration>| {
        let d = d.expect("retry-after parsed");
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
    };

    match fetch("503-seconds").await {
        FetchOutcome::ServerError {
            status,
            retry_after,
        } => {
            assert_eq!(status.as_u16(), 503);
            assert_eq!(retry_after, Some(Duration::from_secs(3600)));
        }
        other => panic!("{other:?}"),
    }
    match fetch("503-date").await {
        FetchOutcome::ServerError { retry_after, .. } => near_two_minutes(retry_after),
        other => panic!("{other:?}"),
    }
    match fetch("429-seconds").await {
        FetchOutcome::TooManyRequests { retry_after } => {
            assert_eq!(retry_after, Some(Duration::from_secs(45)))
        }
        other => panic!("{other:?}"),
    }
    match fetch("429-date").await {
        FetchOutcome::TooManyRequests { retry_after } => near_two_minutes(retry_after),
        other => panic!("{other:?}"),
    }
    // An unparseable value is no value, not an error.
    match fetch("503-garbage").await {
        FetchOutcome::ServerError { retry_after, .. } => assert_eq!(retry_after, None),
        other => panic!("{other:?}"),
    }
}
