//! Tests of the client against a stand-in server on loopback.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::{request, Submission, SubmitError, Target};
use crate::answers::HostView;
use crate::MAX_BODY;

/// The old raw-TCP client died with "Broken pipe" here: the answer to a body over the
/// limit comes before the body is sent, and the client must return it.
#[tokio::test]
async fn the_client_returns_an_early_413_to_a_body_over_the_limit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        // like the admin API: answered on Content-Length, the body never read
        let svc = service_fn(|_req| async {
            let mut r = Response::new(Full::new(Bytes::from_static(b"{\"error\":\"too large\"}")));
            *r.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            Ok::<_, Infallible>(r)
        });
        let _ = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), svc)
            .await;
    });
    let t = Target { addr, token: None };
    let body = vec![b'a'; MAX_BODY + (8 << 20)];
    let (status, answer) = request(&t, "POST", "/v1/urls", Bytes::from(body))
        .await
        .unwrap();
    assert_eq!(status, 413, "{answer}");
    assert!(answer.contains("too large"), "{answer}");
}

/// A stand-in for `POST /v1/urls` that takes every part but the one starting at line
/// 10 001, and records the first line of each part it was sent.
async fn refusing_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let posted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = posted.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let body = http_body_util::BodyExt::collect(req.into_body())
                            .await
                            .unwrap()
                            .to_bytes();
                        let text = String::from_utf8_lossy(&body).into_owned();
                        let first = text.lines().next().unwrap_or("").to_string();
                        let lines = text.lines().count();
                        seen.lock().unwrap().push(first.clone());
                        let (status, answer) = match first.ends_with("/p10001") {
                            true => (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "{\"error\":\"the daemon is stopping\"}".to_string(),
                            ),
                            false => (
                                StatusCode::OK,
                                format!(
                                    "{{\"accepted\":{lines},\"duplicate\":0,\"rejected\":0,\"rejections\":[]}}"
                                ),
                            ),
                        };
                        let mut r = Response::new(Full::new(Bytes::from(answer)));
                        *r.status_mut() = status;
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, posted)
}

/// Parts go two at a time, so when one is refused the next may already be in: the
/// error names the refused lines, and every range that went in, before and after.
#[tokio::test]
async fn a_refused_part_is_named_with_the_parts_that_went_in_around_it() {
    let (addr, posted) = refusing_server().await;
    let list: String = (1..=25_000)
        .map(|i| format!("http://a.test/p{i}\n"))
        .collect();
    let t = Target { addr, token: None };
    let mut s = Submission::start(
        t,
        Box::new(std::io::Cursor::new(list.into_bytes())),
        "urls.txt".into(),
    );
    let mut answered = Vec::new();
    let err = loop {
        match s.next().await {
            Ok(Some(part)) => answered.push((part.first, part.last, part.answer.accepted)),
            Ok(None) => panic!("the refused part was not reported"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SubmitError::Refused { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "POST /v1/urls, lines 10001-20000: HTTP 503: the daemon is stopping \
         (lines 1-10000 were submitted; lines 20001-25000 were submitted too)"
    );
    assert_eq!(answered, [(1, 10_000, 10_000), (20_001, 25_000, 5_000)]);
    let mut posted = posted.lock().unwrap().clone();
    posted.sort();
    assert_eq!(
        posted,
        [
            "http://a.test/p1",
            "http://a.test/p10001",
            "http://a.test/p20001"
        ]
    );
}

/// A line too long to send is refused before sending, numbered in the whole list, among
/// the daemon's own rejections in line order.
#[test]
fn rejections_are_numbered_in_the_whole_list_with_those_refused_here() {
    let resp = serde_json::json!({
        "accepted": 1, "duplicate": 0, "rejected": 1,
        "rejections": [{"line": 3, "url": "nope", "reason": "not a URL"}]
    })
    .to_string();
    let here = vec![crate::answers::RejectedLine {
        line: 10_001,
        url: "http://a/aaa… (70000 bytes)".into(),
        reason: "too-long".into(),
    }];
    let part = super::submit::answered(10_000, 10_004, here, resp).unwrap();
    let lines: Vec<usize> = part.answer.rejections.iter().map(|r| r.line).collect();
    assert_eq!(lines, [10_001, 10_002]);
    assert_eq!(part.answer.rejected, 2);
    assert_eq!(part.lines(), 5);
}

/// `frontierd hosts HOST` prints the detail through the typed answer: reading it and
/// writing it back gives the server's JSON.
#[test]
fn a_host_detail_reads_back_as_it_was_written() {
    let sent = serde_json::json!({
        "host": "a.test", "ip": null, "queued": 3, "in_flight": 0, "paused": false,
        "next_allowed": "2024-01-01T00:00:00Z", "next_allowed_in_ms": 0,
        "backoff_level": 0, "backoff_until": null, "crawl_delay_ms": 0,
        "last_response_ms": 12, "skipped": false,
        "counters": {"enqueued": 3, "dispatched": 0, "completed": 0, "dropped": 0,
            "given_up": 0, "retried": 0, "robots_fetches": 1, "crawl_delay_clamped": 0},
        "robots": "0 of 1 origins held", "robots_held": 0,
        "robots_states": {"fresh": 1}, "robots_state": "fresh",
        "key": "a.test", "requested": "a.test:80",
        "origins": [{"origin": "http://a.test", "robots_state": "fresh", "held": false,
            "since": null, "expires": null, "fallback_at": null,
            "next_fetch": "2024-01-02T00:00:00Z", "attempt": 0, "last_fetch": null,
            "body_bytes": 20, "sitemaps": []}]
    });
    let view: HostView = serde_json::from_value(sent.clone()).unwrap();
    assert_eq!(serde_json::to_value(&view).unwrap(), sent);
}
