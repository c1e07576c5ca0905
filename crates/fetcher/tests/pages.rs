//! Page fetches against a local server: records for the WARC writer, no redirect
//! following, body caps, decoding caps, pooling.

mod support;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use fetcher::{
    ContentCoding, FetchError, FetchOutcome, Fetcher, FetcherConfig, NetworkErrorKind, Url,
};
use http::header::HOST;
use support::*;

fn fetcher(config: FetcherConfig) -> Fetcher {
    Fetcher::new(config).expect("fetcher")
}

const PAGE: &str = "<html><a href=/next>next</a></html>";

#[tokio::test]
async fn page_success_records_request_response_peer_and_timings() {
    let server = HttpServer::start(|_req| async move {
        respond(
            200,
            &[("content-type", "text/html"), ("x-test", "yes")],
            PAGE,
        )
    })
    .await;
    let url = server.url("/a/b?q=1");
    let fetch = fetcher(test_config()).fetch_page(&url).await.unwrap();

    match &fetch.outcome {
        FetchOutcome::Success {
            status,
            headers,
            body,
            truncated,
            ..
        } => {
            assert_eq!(status.as_u16(), 200);
            assert_eq!(headers["x-test"], "yes");
            assert_eq!(&body[..], PAGE.as_bytes());
            assert!(!truncated);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fetch.url, url);
    assert_eq!(fetch.peer_addr, Some(server.addr));

    let ttfb = fetch.timings.time_to_headers.expect("headers arrived");
    assert!(ttfb <= fetch.timings.total);

    let request = &fetch.request;
    assert_eq!(request.method, http::Method::GET);
    assert_eq!(request.version, http::Version::HTTP_11);
    let head = String::from_utf8(request.head_bytes()).unwrap();
    assert!(head.starts_with("GET /a/b?q=1 HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("host: {}\r\n", server.addr)),
        "{head}"
    );
    assert!(head.contains("user-agent: frontierd/0.1 (+https://example.org/bot)\r\n"));
    assert!(head.ends_with("\r\n\r\n"));

    // What the server actually received matches the record.
    let seen = &server.seen()[0];
    assert_eq!(seen.path, "/a/b?q=1");
    for (name, value) in &request.headers {
        assert_eq!(seen.headers.get(name), Some(value), "{name}");
    }

    let response = fetch.response.as_ref().expect("response record");
    assert_eq!(response.status.as_u16(), 200);
    assert_eq!(response.headers["content-type"], "text/html");
    assert_eq!(&response.body[..], PAGE.as_bytes());
    assert_eq!(response.wire_body, None);
    let head = String::from_utf8(response.head_bytes()).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
}

#[tokio::test]
async fn redirect_is_returned_with_absolute_location_and_not_followed() {
    let server = HttpServer::start(|req| async move {
        match req.uri().path() {
            "/old/page" => respond(301, &[("location", "../new/page?x=1")], ""),
            _ => respond(200, &[], PAGE),
        }
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/old/page"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome,
        FetchOutcome::Redirect {
            status: http::StatusCode::MOVED_PERMANENTLY,
            location: Some(server.url("/new/page?x=1")),
        }
    );
    assert_eq!(server.seen().len(), 1, "the target must not be fetched");
}

#[tokio::test]
async fn cross_host_redirect_location_is_kept_absolute() {
    let server = HttpServer::start(|_req| async move {
        respond(302, &[("location", "https://elsewhere.test/landing")], "")
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/"))
        .await
        .unwrap();
    match fetch.outcome {
        FetchOutcome::Redirect { status, location } => {
            assert_eq!(status.as_u16(), 302);
            assert_eq!(location.unwrap().as_str(), "https://elsewhere.test/landing");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn five_mib_page_is_read_in_full() {
    let server =
        HttpServer::start(|_req| async move { respond(200, &[], vec![b'p'; 5 * 1024 * 1024]) })
            .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/big"))
        .await
        .unwrap();
    match &fetch.outcome {
        FetchOutcome::Success {
            body, truncated, ..
        } => {
            assert_eq!(body.len(), 5 * 1024 * 1024);
            assert!(!truncated);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn page_body_cap_is_configurable() {
    // Chunked (no Content-Length), so the cut happens while streaming.
    let server = HttpServer::start(|_req| async move {
        let chunks = (0..40).map(|_| Bytes::from(vec![b'p'; 64 * 1024]));
        http::Response::builder()
            .status(200)
            .body(ScriptedBody::chunks(chunks, BodyEnd::Finish))
            .unwrap()
    })
    .await;
    let fetch = fetcher(FetcherConfig {
        page_body_cap: 1024 * 1024,
        ..test_config()
    })
    .fetch_page(&server.url("/big"))
    .await
    .unwrap();
    match &fetch.outcome {
        FetchOutcome::Success {
            body, truncated, ..
        } => {
            assert_eq!(body.len(), 1024 * 1024);
            assert!(truncated);
        }
        other => panic!("{other:?}"),
    }
    assert!(fetch.response.unwrap().truncated);
}

/// A gzip page of two members decodes to both (the one-call decoder reads one member and
/// leaves such a body to the streaming one), and a gzip page larger than the 1 MiB held for the one-call
/// decoder decodes whole as it streams; each keeps its wire bytes for the WARC record.
#[tokio::test]
async fn gzip_pages_of_two_members_or_over_a_mebibyte_decode_whole() {
    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(data).unwrap();
        g.finish().unwrap()
    }
    // two members alike: each one's trailer names the size of one
    let member = PAGE.repeat(40).into_bytes();
    let two = Bytes::from(gzip(&member).repeat(2));
    // text that gzip shrinks by about half: 3 MiB of it is well over 1 MiB on the wire
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let large_page: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"0123456789abcdef"[(x >> 60) as usize]
        })
        .collect();
    let large = Bytes::from(gzip(&large_page));
    assert!(large.len() > 1 << 20);
    let (two_wire, large_wire) = (two.clone(), large.clone());
    let server = HttpServer::start(move |req| {
        let body = match req.uri().path() {
            "/two" => two.clone(),
            _ => large.clone(),
        };
        async move { respond(200, &[("content-encoding", "gzip")], body) }
    })
    .await;
    let f = fetcher(FetcherConfig {
        page_body_cap: 8 << 20,
        max_decoded_bytes: 8 << 20,
        ..test_config()
    });
    for (path, page, wire) in [
        ("/two", member.repeat(2), two_wire),
        ("/large", large_page, large_wire),
    ] {
        let fetch = f.fetch_page(&server.url(path)).await.unwrap();
        match &fetch.outcome {
            FetchOutcome::Success {
                body, truncated, ..
            } => {
                assert_eq!(body.len(), page.len(), "{path}");
                assert!(body[..] == page[..], "{path}");
                assert!(!truncated, "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
        let response = fetch.response.unwrap();
        assert_eq!(response.wire_body.as_deref(), Some(&wire[..]), "{path}");
    }
}

#[tokio::test]
async fn gzip_bomb_page_is_cut_at_the_decoded_cap() {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..8 {
        enc.write_all(&zeros).unwrap();
    }
    let bomb = Bytes::from(enc.finish().unwrap());
    let wire = bomb.clone();
    let server = HttpServer::start(move |_req| {
        let bomb = bomb.clone();
        async move { respond(200, &[("content-encoding", "gzip")], bomb) }
    })
    .await;
    let fetch = fetcher(FetcherConfig {
        max_decoded_bytes: 1024 * 1024,
        ..test_config()
    })
    .fetch_page(&server.url("/bomb"))
    .await
    .unwrap();
    match &fetch.outcome {
        FetchOutcome::Success {
            body,
            truncated,
            content_coding,
            ..
        } => {
            assert_eq!(body.len(), 1024 * 1024);
            assert!(truncated);
            assert_eq!(*content_coding, ContentCoding::Gzip);
        }
        other => panic!("{other:?}"),
    }
    // The WARC writer gets the bytes as sent, next to the unchanged headers.
    let response = fetch.response.unwrap();
    let wire_body = response
        .wire_body
        .expect("wire bytes kept for a decoded body");
    assert!(wire.starts_with(&wire_body));
    assert_eq!(response.headers["content-encoding"], "gzip");
}

#[tokio::test]
async fn unsupported_coding_is_kept_as_received() {
    let server = HttpServer::start(|_req| async move {
        respond(200, &[("content-encoding", "zstd")], "opaque bytes")
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/"))
        .await
        .unwrap();
    match &fetch.outcome {
        FetchOutcome::Success {
            body,
            content_coding,
            ..
        } => {
            assert_eq!(&body[..], b"opaque bytes");
            assert_eq!(*content_coding, ContentCoding::Unsupported("zstd".into()));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn error_pages_keep_their_body_for_the_archive() {
    let server = HttpServer::start(|_req| async move {
        respond(404, &[("content-type", "text/html")], "<h1>not found</h1>")
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/missing"))
        .await
        .unwrap();
    assert_eq!(
        fetch.outcome,
        FetchOutcome::ClientError {
            status: http::StatusCode::NOT_FOUND
        }
    );
    let response = fetch.response.unwrap();
    assert_eq!(&response.body[..], b"<h1>not found</h1>");
    assert_eq!(response.body_error, None);
}

#[tokio::test]
async fn error_status_with_broken_body_is_still_classified_by_status() {
    let server = RawServer::start(|stream, _head| async move {
        let mut bytes =
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 60\r\nContent-Length: 5000\r\n\r\n"
                .to_vec();
        bytes.extend_from_slice(&[b'x'; 100]);
        write_then_reset(stream, &bytes).await;
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/"))
        .await
        .unwrap();
    match (&fetch.outcome, &fetch.response) {
        (
            FetchOutcome::ServerError {
                status,
                retry_after,
            },
            Some(response),
        ) => {
            assert_eq!(status.as_u16(), 503);
            assert_eq!(*retry_after, Some(Duration::from_secs(60)));
            assert!(response.body_error.is_some());
        }
        // The RST can overtake the head: then nothing arrived at all.
        (FetchOutcome::Network { kind, .. }, None) => assert_eq!(*kind, NetworkErrorKind::Reset),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn stalled_page_body_times_out() {
    let server = HttpServer::start(|_req| async move {
        http::Response::builder()
            .status(200)
            .body(ScriptedBody::chunks(
                [Bytes::from_static(b"<html>")],
                BodyEnd::Stall,
            ))
            .unwrap()
    })
    .await;
    let fetch = fetcher(FetcherConfig {
        total_timeout: Duration::from_millis(300),
        ..test_config()
    })
    .fetch_page(&server.url("/"))
    .await
    .unwrap();
    assert_eq!(
        fetch.outcome.network_error_kind(),
        Some(NetworkErrorKind::Timeout)
    );
    // The head arrived, so the records say so.
    assert!(fetch.timings.time_to_headers.is_some());
    assert_eq!(
        fetch.response.unwrap().body_error,
        Some(NetworkErrorKind::Timeout)
    );
}

#[tokio::test]
async fn connections_are_pooled_per_origin() {
    let server = HttpServer::start(|_req| async move { respond(200, &[], PAGE) }).await;
    let f = fetcher(test_config());
    for path in ["/1", "/2", "/3"] {
        let fetch = f.fetch_page(&server.url(path)).await.unwrap();
        assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter().all(|s| s.peer == seen[0].peer),
        "one connection reused"
    );
}

/// Many hosts do not each keep a socket: past `max_pooled_connections` open, a new
/// connection serves its request and closes, so a second round over the hosts reuses at
/// most that many and the open count falls back to the cap.
#[tokio::test]
async fn pooled_connections_are_capped_across_hosts() {
    let server = HttpServer::start(|_req| async move { respond(200, &[], PAGE) }).await;
    let hosts: Vec<String> = (0..6).map(|i| format!("h{i}.pool.test")).collect();
    let round = |f: Fetcher| {
        let hosts = hosts.clone();
        let port = server.port();
        async move {
            for h in &hosts {
                let url = Url::parse(&format!("http://{h}:{port}/p")).unwrap();
                let fetch = f.fetch_page(&url).await.unwrap();
                assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
            }
        }
    };
    let connections = |from: usize| {
        let seen = server.seen();
        let peers: std::collections::BTreeSet<_> = seen[from..].iter().map(|s| s.peer).collect();
        peers.len()
    };
    let capped = fetcher(FetcherConfig {
        resolve: loopback_table(&["*.pool.test"]),
        max_pooled_connections: 2,
        ..test_config()
    });
    round(capped.clone()).await;
    let first = server.seen().len();
    round(capped.clone()).await;
    // the two pooled connections served two hosts again; four hosts needed new ones
    assert_eq!(connections(0), 6 + 4, "sockets opened over both rounds");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while capped.open_connections() > 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} connections still open",
            capped.open_connections()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.seen().len(), 2 * first);

    // without the cap every host keeps its socket: the second round opens none
    let uncapped = fetcher(FetcherConfig {
        resolve: loopback_table(&["*.pool.test"]),
        ..test_config()
    });
    let before = server.seen().len();
    round(uncapped.clone()).await;
    round(uncapped.clone()).await;
    assert_eq!(connections(before), 6);
    assert_eq!(uncapped.open_connections(), 6);
}

/// Connections busy with a fetch do not count against `max_pooled_connections`: four
/// fetches at once to four hosts, with a cap of two kept connections, all keep their
/// connections (none of the others was idle when each opened), so a second burst to the
/// same hosts opens no socket. Counting every open socket against the cap made the third
/// and fourth single-use: with as many workers as the cap, almost nothing was kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_connections_do_not_count_against_the_pool_cap() {
    let hosts: Vec<String> = (0..4).map(|i| format!("b{i}.pool.test")).collect();
    // each burst's four requests are answered only once all four have arrived
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(hosts.len()));
    let server = HttpServer::start(move |_req| {
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            respond(200, &[], PAGE)
        }
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["*.pool.test"]),
        max_pooled_connections: 2,
        ..test_config()
    });
    let burst = || {
        let mut set = tokio::task::JoinSet::new();
        for h in &hosts {
            let f = f.clone();
            let url = Url::parse(&format!("http://{h}:{}/p", server.port())).unwrap();
            set.spawn(async move { f.fetch_page(&url).await.unwrap() });
        }
        async move {
            let mut fetches = Vec::new();
            while let Some(fetch) = set.join_next().await {
                fetches.push(fetch.unwrap());
            }
            fetches
        }
    };
    for fetch in burst().await {
        assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
    }
    assert_eq!(
        f.open_connections(),
        4,
        "all four kept after the first burst"
    );
    for fetch in burst().await {
        assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
    }
    let peers: std::collections::BTreeSet<_> = server.seen().iter().map(|s| s.peer).collect();
    assert_eq!(
        peers.len(),
        4,
        "the second burst reused the four connections"
    );
}

#[tokio::test]
async fn resolve_table_names_work_for_pages() {
    let server = HttpServer::start(|req| async move {
        let host = req.headers()[HOST].to_str().unwrap().to_owned();
        respond(200, &[], host)
    })
    .await;
    let f = fetcher(FetcherConfig {
        resolve: loopback_table(&["site-a.test", "*.wild.test"]),
        ..test_config()
    });
    let url = Url::parse(&format!("http://deep.sub.wild.test:{}/x", server.port())).unwrap();
    let fetch = f.fetch_page(&url).await.unwrap();
    assert_eq!(fetch.peer_addr, Some(server.addr));
    match fetch.outcome {
        FetchOutcome::Success { body, .. } => {
            assert_eq!(
                &body[..],
                format!("deep.sub.wild.test:{}", server.port()).as_bytes()
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn non_http_urls_are_refused_before_any_io() {
    let f = fetcher(test_config());
    let err = f
        .fetch_page(&Url::parse("ftp://files.test/a").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::UnsupportedScheme { .. }), "{err}");
    let err = f
        .fetch_robots(&Url::parse("mailto:bot@example.org").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::UnsupportedScheme { .. }), "{err}");
}

/// A revisit sends the last validators; the server's 304 comes back as the outcome, and
/// the request record (for the WARC file) shows what was sent.
#[tokio::test]
async fn conditional_get_sends_validators_and_returns_304() {
    let server = HttpServer::start(|req| async move {
        let inm = req.headers().get("if-none-match").cloned();
        let ims = req.headers().get("if-modified-since").cloned();
        match (inm, ims) {
            (Some(e), Some(d)) if e == "\"v1\"" && d == "Mon, 23 Nov 2026 10:00:00 GMT" => {
                respond(304, &[("etag", "\"v1\"")], "")
            }
            _ => respond(200, &[("etag", "\"v1\"")], PAGE),
        }
    })
    .await;
    let url = server.url("/c");
    let f = fetcher(test_config());
    let plain = f.fetch_page(&url).await.unwrap();
    assert_eq!(plain.outcome.status().map(|s| s.as_u16()), Some(200));
    assert!(plain.request.headers.get("if-none-match").is_none());
    let cond = fetcher::PageOptions {
        conditional: fetcher::Conditional {
            if_none_match: Some("\"v1\"".into()),
            if_modified_since: Some("Mon, 23 Nov 2026 10:00:00 GMT".into()),
        },
        ..Default::default()
    };
    let again = f.fetch_page_with(&url, &cond).await.unwrap();
    assert_eq!(again.outcome.status().map(|s| s.as_u16()), Some(304));
    assert_eq!(again.request.headers["if-none-match"], "\"v1\"");
    // a validator that is no header value is not sent (and does not fail the fetch)
    let bad = fetcher::PageOptions {
        conditional: fetcher::Conditional {
            if_none_match: Some("bad\nvalue".into()),
            if_modified_since: None,
        },
        ..Default::default()
    };
    let third = f.fetch_page_with(&url, &bad).await.unwrap();
    assert_eq!(third.outcome.status().map(|s| s.as_u16()), Some(200));
    assert!(third.request.headers.get("if-none-match").is_none());
}

/// A page its host has nothing after goes with `Connection: close`, and its connection is
/// not kept: the next fetch opens a new one. Other pages keep theirs.
#[tokio::test]
async fn the_last_page_for_a_host_closes_its_connection() {
    let server = HttpServer::start(|_req| async { respond(200, &[], PAGE) }).await;
    let f = fetcher(test_config());
    let last = fetcher::PageOptions {
        last_for_host: true,
        ..Default::default()
    };
    for path in ["/a", "/b"] {
        let page = f.fetch_page(&server.url(path)).await.unwrap();
        assert!(page.request.headers.get("connection").is_none());
    }
    let page = f.fetch_page_with(&server.url("/c"), &last).await.unwrap();
    assert_eq!(page.outcome.status().map(|s| s.as_u16()), Some(200));
    // the archived request says what was sent
    assert_eq!(page.request.headers["connection"], "close");
    f.fetch_page(&server.url("/d")).await.unwrap();
    let seen = server.seen();
    let peer = |path: &str| seen.iter().find(|r| r.path == path).unwrap().peer;
    assert_eq!(peer("/a"), peer("/b"), "a kept connection is reused");
    assert_eq!(
        peer("/b"),
        peer("/c"),
        "the last page uses the kept connection"
    );
    assert_eq!(
        seen.iter().find(|r| r.path == "/c").unwrap().headers["connection"],
        "close"
    );
    assert_ne!(peer("/c"), peer("/d"), "and it was not kept after");
}

/// The request record is the request as sent, byte for byte: the same headers in the same
/// order (Host first), so a WARC reader replaying it sends what the crawler sent.
#[tokio::test]
async fn the_request_record_is_the_request_as_sent() {
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    let server = RawServer::start(move |stream, head| {
        seen.lock().unwrap().push(head);
        write_then_hold(
            stream,
            b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 2\r\n\r\nok",
        )
    })
    .await;
    let fetch = fetcher(test_config())
        .fetch_page(&server.url("/a?b=1"))
        .await
        .unwrap();
    assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
    let sent = heads.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let recorded = String::from_utf8(fetch.request.head_bytes()).unwrap();
    assert!(
        recorded.starts_with("GET /a?b=1 HTTP/1.1\r\nhost: "),
        "{recorded}"
    );
    assert_eq!(sent[0], recorded);
}

/// A server that compresses as most do: br or gzip, whichever the request's
/// Accept-Encoding names first (br when it names both), else the page as is.
async fn negotiating_server(page: &'static [u8]) -> HttpServer {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(page).unwrap();
    let gz = Bytes::from(gz.finish().unwrap());
    let mut br = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
        w.write_all(page).unwrap();
    }
    let br = Bytes::from(br);
    HttpServer::start(move |req| {
        let accepted = req
            .headers()
            .get(http::header::ACCEPT_ENCODING)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let tokens: Vec<&str> = accepted.split(',').map(str::trim).collect();
        let answer = if tokens.contains(&"br") {
            respond(200, &[("content-encoding", "br")], br.clone())
        } else if tokens.contains(&"gzip") {
            respond(200, &[("content-encoding", "gzip")], gz.clone())
        } else {
            respond(200, &[], Bytes::from_static(page))
        };
        async move { answer }
    })
    .await
}

/// The configured codings are what the server is asked for, in their order: by default
/// gzip and deflate, so a server that would send br sends gzip; br when the operator
/// lists it; `identity` when the list is empty (no header would accept any coding).
/// Whatever comes back is decoded for the page and kept as received for the WARC.
#[tokio::test]
async fn accept_encoding_asks_for_the_configured_codings() {
    use fetcher::AcceptedCoding::{Brotli, Gzip};
    const PAGE_TEXT: &[u8] = b"<html><body><a href=/next>next</a> a page worth compressing, \
        a page worth compressing, a page worth compressing</body></html>";
    let server = negotiating_server(PAGE_TEXT).await;
    for (accept, sent, coding) in [
        (None, "gzip, deflate", ContentCoding::Gzip),
        (Some(vec![Brotli, Gzip]), "br, gzip", ContentCoding::Brotli),
        (Some(vec![]), "identity", ContentCoding::Identity),
    ] {
        let config = match accept {
            Some(accept_encoding) => FetcherConfig {
                accept_encoding,
                ..test_config()
            },
            None => test_config(),
        };
        let fetch = fetcher(config).fetch_page(&server.url("/")).await.unwrap();
        let seen = server.seen().pop().unwrap();
        assert_eq!(seen.headers[http::header::ACCEPT_ENCODING], sent);
        assert_eq!(
            fetch.request.headers[http::header::ACCEPT_ENCODING],
            sent,
            "the request record holds what was sent"
        );
        match &fetch.outcome {
            FetchOutcome::Success {
                body,
                content_coding,
                ..
            } => {
                assert_eq!(&body[..], PAGE_TEXT, "{sent}");
                assert_eq!(*content_coding, coding, "{sent}");
            }
            other => panic!("{sent}: {other:?}"),
        }
        let response = fetch.response.as_ref().expect("response record");
        let wire_is_encoded = response.wire_body.is_some();
        assert_eq!(wire_is_encoded, coding != ContentCoding::Identity, "{sent}");
    }
}
