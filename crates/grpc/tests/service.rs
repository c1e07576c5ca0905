//! The url-frontier service in-process: a tonic client against `frontier_grpc::serve` on a
//! sled frontier, robots.txt answered at once by the test hooks (tests/common).

// tonic interceptors return `Result<_, tonic::Status>`
#![allow(clippy::result_large_err)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use frontier_grpc::pb::url_frontier_client::UrlFrontierClient;
use frontier_grpc::pb::{self, url_item::Item};
use frontier_grpc::pb_frontierd::frontierd_queues_client::FrontierdQueuesClient;
use frontier_grpc::pb_frontierd::QueueStateRequest;
use tonic::transport::Channel;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_report_with_metadata_and_robots() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    let acks = put(
        &mut c,
        vec![
            discovered(info(
                "http://a.test/1",
                &[("depth", &["1"]), ("src", &["x", "y"])],
            )),
            discovered(info("http://robots.test/private/p", &[])),
            discovered(info("http://robots.test/ok", &[])),
            discovered(info("not a url", &[])),
        ],
    )
    .await;
    let st: Vec<i32> = acks.iter().map(|a| a.status).collect();
    assert_eq!(st, vec![0, 0, 0, 1], "{acks:?}");
    assert_eq!(acks[0].id, "http://a.test/1", "empty ID: the URL is echoed");
    let got = get_until(&mut c, params(60), |u| u.len() >= 2).await;
    let urls: Vec<&str> = got.iter().map(|u| u.url.as_str()).collect();
    assert!(
        urls.contains(&"http://a.test/1") && urls.contains(&"http://robots.test/ok"),
        "{urls:?}"
    );
    assert!(
        !urls.contains(&"http://robots.test/private/p"),
        "disallowed served: {urls:?}"
    );
    let a = got.iter().find(|u| u.url == "http://a.test/1").unwrap();
    assert_eq!(a.key, "a.test");
    assert_eq!(a.crawl_id, "DEFAULT");
    assert_eq!(a.metadata["src"].values, vec!["x", "y"]);
    assert_eq!(a.metadata["depth"].values, vec!["1"]);
    // in process until reported
    let stats = c
        .get_stats(pb::QueueWithinCrawlParams::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.in_process, 2, "{stats:?}");
    let acks = put(
        &mut c,
        vec![
            known("http://a.test/1", 0),
            known("http://robots.test/ok", 0),
        ],
    )
    .await;
    assert!(acks.iter().all(|a| a.status == 0), "{acks:?}");
    assert_eq!(acks[0].id, "known:http://a.test/1");
    let stats = c
        .get_stats(pb::QueueWithinCrawlParams::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.in_process, 0, "{stats:?}");
    assert_eq!(stats.counts["completed"], 2);
    // reported done (date 0): never served again
    let later = get(&mut c, params(60)).await;
    assert!(later.is_empty(), "{later:?}");
    // a duplicate is OK, and known
    let acks = put(&mut c, vec![discovered(info("http://a.test/1", &[]))]).await;
    assert_eq!(acks[0].status, 0);
    let status = c
        .get_url_status(pb::UrlStatusRequest {
            url: "http://a.test/1".into(),
            key: String::new(),
            crawl_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        matches!(&status.item, Some(Item::Known(k)) if k.refetchable_from_date == 0),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreported_lease_comes_back_after_delay_requestable() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    put(&mut c, vec![discovered(info("http://a.test/x", &[]))]).await;
    let first = get_until(&mut c, params(1), |u| !u.is_empty()).await;
    let served_at = Instant::now();
    assert_eq!(first.len(), 1);
    let again = get_until(&mut c, params(1), |u| !u.is_empty()).await;
    let waited = served_at.elapsed();
    assert_eq!(again[0].url, "http://a.test/x");
    assert!(
        waited >= Duration::from_millis(900),
        "served again after {waited:?}, before its 1 s lease ended"
    );
    let events = s.hooks.events.lock().unwrap().join("\n");
    assert!(events.contains("LeasesExpired"), "{events}");
}

/// KnownURLItem with `refetchable_from_date` in the future: the URL is done now, not served
/// before that second, and served again from then on (url-frontier's refetch schedule,
/// kept in frontierd's recrawl due index); with 0 it is never served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_url_with_a_refetch_date_is_served_again_from_then_on() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    put(
        &mut c,
        vec![
            discovered(info("http://a.test/again", &[])),
            discovered(info("http://b.test/once", &[])),
        ],
    )
    .await;
    let first = get_until(&mut c, params(60), |u| u.len() >= 2).await;
    assert_eq!(first.len(), 2, "{first:?}");
    // two whole seconds ahead: the due index keeps seconds
    let refetch_secs = now_ms() / 1000 + 3;
    let acks = put(
        &mut c,
        vec![
            known("http://a.test/again", refetch_secs),
            known("http://b.test/once", 0),
        ],
    )
    .await;
    assert!(
        acks.iter()
            .all(|a| a.status == pb::ack_message::Status::Ok as i32),
        "{acks:?}"
    );
    // before its date nothing comes back
    while now_ms() < (refetch_secs - 1) * 1000 {
        let early = get(&mut c, params(60)).await;
        assert!(
            early.is_empty(),
            "served before its refetch date: {early:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = get_until(&mut c, params(60), |u| !u.is_empty()).await;
    let served = now_ms();
    assert_eq!(
        again.iter().map(|u| u.url.as_str()).collect::<Vec<_>>(),
        vec!["http://a.test/again"]
    );
    assert!(
        served >= refetch_secs * 1000,
        "served at {served}, before {refetch_secs} s"
    );
    // the one reported with 0 is done for good, and a.test is out again (leased)
    assert!(get(&mut c, params(60)).await.is_empty());
    let status = c
        .get_url_status(pb::UrlStatusRequest {
            url: "http://b.test/once".into(),
            key: String::new(),
            crawl_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        matches!(&status.item, Some(Item::Known(k)) if k.refetchable_from_date == 0),
        "{status:?}"
    );
}

/// Issue 33, upstream's meaning of KnownURLItem for a URL not out: one reported done for
/// good (date 0) and put again later with a date is served again at that date
/// (StormCrawler's status updater schedules recrawls so); a new URL put as known with a
/// date is served from that date; a new one with date 0 is skipped; a report that comes
/// after its lease expired completes the URL (it is not served again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_items_for_urls_not_out_follow_upstream() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    put(
        &mut c,
        vec![
            discovered(info("http://a.test/done", &[])),
            discovered(info("http://b.test/slow", &[])),
        ],
    )
    .await;
    let first = get_until(&mut c, params(1), |u| u.len() >= 2).await;
    assert_eq!(first.len(), 2, "{first:?}");
    put(&mut c, vec![known("http://a.test/done", 0)]).await;
    // b.test/slow: its 1 s lease expires (the service's expiry says so), then its report
    // comes (a slow fetch)
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s
        .hooks
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.contains("LeasesExpired"))
    {
        assert!(Instant::now() < deadline, "the 1 s lease never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = now_ms() / 1000 + 2;
    let acks = put(
        &mut c,
        vec![
            known("http://b.test/slow", 0),
            known("http://a.test/done", at),
            known("http://c.test/new", at),
            known("http://d.test/never", 0),
        ],
    )
    .await;
    let st: Vec<i32> = acks.iter().map(|a| a.status).collect();
    assert_eq!(st, vec![0, 0, 0, 1], "{acks:?}");
    // nothing before the date: the late-reported URL is done, the others wait
    while now_ms() < (at - 1) * 1000 {
        let early = get(&mut c, params(60)).await;
        assert!(early.is_empty(), "served before the date: {early:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = get_until(&mut c, params(60), |u| u.len() >= 2).await;
    let mut urls: Vec<&str> = again.iter().map(|u| u.url.as_str()).collect();
    urls.sort();
    assert_eq!(urls, vec!["http://a.test/done", "http://c.test/new"]);
    assert!(now_ms() >= at * 1000);
    put(
        &mut c,
        vec![
            known("http://a.test/done", 0),
            known("http://c.test/new", 0),
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let none = get(&mut c, params(60)).await;
    assert!(none.is_empty(), "{none:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_params_limit_queues_urls_per_queue_and_key() {
    let s = start(None, |c| c.max_in_flight_per_host = 10).await;
    let mut c = client(&s).await;
    let mut items = Vec::new();
    for h in ["a", "b", "c"] {
        for i in 0..4 {
            items.push(discovered(info(&format!("http://{h}.test/{i}"), &[])));
        }
    }
    put(&mut c, items).await;
    // robots.txt first (fetched by the hooks while serving)
    let mut p = params(60);
    p.key = "b.test".into();
    p.max_urls_per_queue = 2;
    // each call: only b.test, at most 2 (the first calls may come before its robots.txt)
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut total = 0;
    while total < 4 {
        let b = get(&mut c, p.clone()).await;
        assert!(b.iter().all(|u| u.key == "b.test"), "{b:?}");
        assert!(b.len() <= 2, "{b:?}");
        total += b.len();
        assert!(Instant::now() < deadline, "b.test served {total} of 4");
    }
    let mut p = params(60);
    p.max_queues = 1;
    p.max_urls_per_queue = 3;
    let one = get_until(&mut c, p, |u| !u.is_empty()).await;
    let keys: std::collections::HashSet<&str> = one.iter().map(|u| u.key.as_str()).collect();
    assert_eq!(keys.len(), 1, "{one:?}");
    assert!(one.len() <= 3);
    let queues = c
        .list_queues(pb::Pagination {
            size: 2,
            include_inactive: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(queues.values, vec!["a.test", "b.test"]);
    assert_eq!(queues.total, 3);
    let count = c
        .count_ur_ls(pb::CountUrlParams {
            key: "c.test".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(count.value, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_delay_block_and_the_frontierd_extras() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    put(
        &mut c,
        vec![
            discovered(info("http://a.test/1", &[])),
            discovered(info("http://a.test/2", &[])),
            discovered(info("http://b.test/1", &[])),
        ],
    )
    .await;
    c.set_delay(pb::QueueDelayParams {
        key: "a.test".into(),
        delay_requestable: 3600,
        ..Default::default()
    })
    .await
    .unwrap();
    let far = now_ms() / 1000 + 3600;
    c.block_queue_until(pb::BlockQueueParams {
        key: "b.test".into(),
        time: far,
        ..Default::default()
    })
    .await
    .unwrap();
    let got = get_until(&mut c, params(60), |u| !u.is_empty()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].url, "http://a.test/1");
    put(&mut c, vec![known("http://a.test/1", 0)]).await;
    // a.test waits its hour, b.test is blocked
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(get(&mut c, params(60)).await.is_empty());
    let mut x = FrontierdQueuesClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap();
    let a = x
        .get_queue_state(QueueStateRequest {
            key: "a.test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.client_delay_ms, 3_600_000);
    assert!(a.delay_ms >= 3_600_000);
    assert_eq!(a.queued, 1);
    assert_eq!(a.origins.len(), 1);
    assert_eq!(a.origins[0].origin, "http://a.test");
    let b = x
        .get_queue_state(QueueStateRequest {
            key: "b.test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(b.blocked_until_ms, far * 1000);
    // unblocking serves b.test
    c.block_queue_until(pb::BlockQueueParams {
        key: "b.test".into(),
        time: 0,
        ..Default::default()
    })
    .await
    .unwrap();
    let got = get_until(&mut c, params(60), |u| !u.is_empty()).await;
    assert_eq!(got[0].url, "http://b.test/1");
    // SetActive(false) stops GetURLs
    c.set_active(pb::Active {
        state: false,
        local: false,
    })
    .await
    .unwrap();
    assert!(
        !c.get_active(pb::Local::default())
            .await
            .unwrap()
            .into_inner()
            .state
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_and_what_cannot_be_honoured_says_why() {
    let s = start(Some("s3cret"), |_| {}).await;
    let mut c = client(&s).await;
    let err = c.list_crawls(pb::Local::default()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let token: tonic::metadata::MetadataValue<_> = "Bearer s3cret".parse().unwrap();
    let channel = Channel::from_shared(format!("http://{}", s.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = UrlFrontierClient::with_interceptor(channel, move |mut req: tonic::Request<()>| {
        req.metadata_mut().insert("authorization", token.clone());
        Ok(req)
    });
    let crawls = c
        .list_crawls(pb::Local::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(crawls.values, vec!["DEFAULT"]);
    let nodes = c.list_nodes(pb::Empty {}).await.unwrap().into_inner();
    assert_eq!(nodes.values, vec![s.addr.to_string()]);
    // a purge by age needs creation dates frontierd does not keep
    let e = c
        .purge_ur_ls(pb::PurgeUrlParams {
            key: String::new(),
            crawl_id: "a".into(),
            days: 3,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented);
    assert!(e.message().contains("creation date"), "{e:?}");
    let e = c
        .delete_queue(pb::QueueWithinCrawlParams::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "no key: {e:?}");
    let events = s.hooks.events.lock().unwrap().join("\n");
    assert!(
        events.contains("Unauthenticated") && events.contains("Unimplemented"),
        "{events}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_put_streams_of_small_items_are_all_acked() {
    // several streams on one server at once, each acked item by item in order (the h2
    // small-frame limit and the window shrink are tested frame by frame in window.rs)
    let s = start(None, |_| {}).await;
    let mut tasks = Vec::new();
    for stream in 0..4 {
        let mut c = client(&s).await;
        tasks.push(tokio::spawn(async move {
            let items: Vec<pb::UrlItem> = (0..3000)
                .map(|i| discovered(info(&format!("http://s{stream}.t/{i}"), &[])))
                .collect();
            put(&mut c, items).await
        }));
    }
    for t in tasks {
        let acks = t.await.unwrap();
        assert_eq!(acks.len(), 3000);
        assert!(acks.iter().all(|a| a.status == 0));
    }
}

/// PEM armour around DER bytes.
fn pem_block(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_tls_clients_only_and_bad_pem_is_refused() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = pem_block("CERTIFICATE", certified.cert.der());
    let pem = frontier_grpc::TlsPem {
        cert: cert.clone().into_bytes(),
        key: pem_block("PRIVATE KEY", &certified.signing_key.serialize_der()).into_bytes(),
    };
    frontier_grpc::check_tls(&pem).unwrap();
    let garbage = frontier_grpc::TlsPem {
        cert: b"not a certificate".to_vec(),
        key: b"nor a key".to_vec(),
    };
    assert!(frontier_grpc::check_tls(&garbage).is_err());
    let s = start_tls(None, Some(pem), |_| {}).await;
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&cert))
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://{}", s.addr))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = UrlFrontierClient::new(channel);
    let crawls = c
        .list_crawls(pb::Local::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(crawls.values, vec!["DEFAULT"]);
    // a plaintext client gets no answer
    let plain = UrlFrontierClient::connect(format!("http://{}", s.addr)).await;
    let refused = match plain {
        Err(_) => true,
        Ok(mut c) => c.list_crawls(pb::Local::default()).await.is_err(),
    };
    assert!(refused, "a plaintext call was answered by a TLS server");
}

/// While the program refuses intake (its disk is low), PutURLs of new URLs fails with
/// RESOURCE_EXHAUSTED and the reason, and nothing of it is stored; a report of a leased URL
/// is still taken; once the refusal ends the same items go in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_refused_by_the_program_stores_nothing_and_reports_still_go_in() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    put(&mut c, vec![discovered(info("http://a.test/out", &[]))]).await;
    let out = get_until(&mut c, params(600), |u| !u.is_empty()).await;
    *s.hooks.refuse.lock().unwrap() = Some("disk space low on /data".into());
    let refused = c
        .put_ur_ls(tokio_stream::iter(vec![
            discovered(info("http://a.test/new1", &[])),
            discovered(info("http://b.test/new2", &[])),
        ]))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("disk space low on /data")
            && refused.message().contains("not stored"),
        "{refused:?}"
    );
    assert!(!s.hooks.frontier.is_seen("http://a.test/new1").unwrap());
    assert!(!s.hooks.frontier.is_seen("http://b.test/new2").unwrap());
    // the report of what was handed out is taken
    let acks = put(&mut c, vec![known(&out[0].url, 0)]).await;
    assert_eq!(acks[0].status, 0, "{acks:?}");
    assert!(s.hooks.frontier.fetcher_done(&out[0].url).unwrap());
    *s.hooks.refuse.lock().unwrap() = None;
    let acks = put(
        &mut c,
        vec![
            discovered(info("http://a.test/new1", &[])),
            discovered(info("http://b.test/new2", &[])),
        ],
    )
    .await;
    assert!(acks.iter().all(|a| a.status == 0), "{acks:?}");
    assert!(s.hooks.frontier.is_seen("http://b.test/new2").unwrap());
}
