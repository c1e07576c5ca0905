//! The cluster crate against a real `nats-server -js` (see common/mod.rs: skipped with a
//! message when the binary is absent, a failure under CI=1).

mod common;

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::{
    ensure_streams, BrokerError, ClusterSettings, EventPublisher, JetStream, Publisher,
    ShardConsumer, UrlRecord, EVENTS_STREAM, URL_STREAM,
};
use common::{node_settings, wait_for, NatsServer};

const MAX_URL_LEN: usize = 8192;

async fn jetstream(settings: &ClusterSettings) -> (JetStream, Arc<cluster::ConnectionState>) {
    let (client, state) = cluster::connect(settings).await.expect("connect");
    let mut js = async_nats::jetstream::new(client);
    // a dead broker is noticed within 2 s per publish
    js.set_timeout(Duration::from_secs(2));
    ensure_streams(&js, settings).await.expect("streams");
    (js, state)
}

async fn open_owned(js: &JetStream, settings: &ClusterSettings) -> Vec<ShardConsumer> {
    let mut out = Vec::new();
    for shard in settings.owned.iter().flat_map(|o| o.iter()) {
        out.push(
            ShardConsumer::open(js, settings, shard)
                .await
                .expect("consumer"),
        );
    }
    out
}

/// Take everything the consumers have, "commit" each delivery's URLs (into the returned
/// vector) and only then ack it; stops after a pass that finds nothing.
async fn drain(consumers: &[ShardConsumer]) -> Vec<(u32, UrlRecord)> {
    let mut committed = Vec::new();
    loop {
        let mut got = 0;
        for c in consumers {
            for d in c
                .next_batch(100, Duration::from_millis(200))
                .await
                .expect("fetch")
            {
                assert!(d.batch.rejected.is_empty(), "{:?}", d.batch.rejected);
                got += 1;
                committed.extend(d.batch.records.iter().cloned().map(|r| (d.shard, r)));
                d.ack().await.expect("ack after commit");
            }
        }
        if got == 0 {
            return committed;
        }
    }
}

fn seeds(hosts: usize, per_host: usize, tag: &str) -> Vec<UrlRecord> {
    (0..hosts)
        .flat_map(|h| {
            (0..per_host).map(move |p| UrlRecord::seed(format!("http://h{h}.{tag}.test/p{p}")))
        })
        .collect()
}

async fn stream_messages(js: &JetStream, name: &str) -> u64 {
    let mut s = js.get_stream(name).await.expect("stream");
    s.info().await.expect("stream info").state.messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_urls_arrive_on_their_shard_and_leave_the_queue_once_acked() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n1", 8, "0-7");
    let (js, _) = jetstream(&settings).await;
    let publisher = Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN);
    let mut records = seeds(50, 4, "a");
    records.push(UrlRecord {
        url: "http://h1.a.test/deep".into(),
        depth: 3,
        via: Some("http://h1.a.test/p0".into()),
        hops: "LLL".into(),
        handoff: false,
    });
    records.push(UrlRecord::seed("not a url"));
    let report = publisher.publish(records.clone()).await.expect("publish");
    assert_eq!(report.published, 201);
    assert_eq!(report.unroutable.len(), 1);
    assert!(report.unroutable[0].to_string().contains("not a url"));
    assert!(
        report.per_shard.len() > 4,
        "201 URLs on 50 hosts touch most of 8 shards"
    );

    let consumers = open_owned(&js, &settings).await;
    let committed = drain(&consumers).await;
    for (shard, r) in &committed {
        assert_eq!(
            *shard,
            settings
                .shard_map
                .shard_of_url(&r.url, MAX_URL_LEN)
                .unwrap(),
            "{} came from the wrong shard",
            r.url
        );
    }
    let got: Vec<UrlRecord> = committed.into_iter().map(|(_, r)| r).collect();
    assert_eq!(got.len(), 201, "each URL exactly once");
    let want: Vec<UrlRecord> = records[..201].to_vec();
    for r in &want {
        assert!(got.contains(r), "{r:?} not delivered with its fields");
    }
    // acked means gone: the work queue is empty and no consumer holds anything
    assert_eq!(stream_messages(&js, URL_STREAM).await, 0);
    for c in &consumers {
        let b = c.backlog().await.expect("backlog");
        assert_eq!((b.pending, b.ack_pending), (0, 0), "shard {}", c.shard());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacked_batch_is_redelivered_after_the_ack_wait() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let mut settings = node_settings(&server, "n1", 4, "0-3");
    settings.ack_wait = Duration::from_secs(1);
    let (js, _) = jetstream(&settings).await;
    let publisher = Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN);
    let records = seeds(1, 3, "r");
    publisher.publish(records.clone()).await.expect("publish");
    let shard = settings
        .shard_map
        .shard_of_url(&records[0].url, MAX_URL_LEN)
        .unwrap();
    let consumer = ShardConsumer::open(&js, &settings, shard).await.unwrap();

    // asks to wait longer than the ack wait: the consumer caps the wait so the one message
    // is not redelivered into the same batch
    let taken = Instant::now(); // no later than the delivery
    let first = consumer
        .next_batch(10, Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    assert!(!first[0].is_redelivery());
    assert_eq!(first[0].batch.records, records);
    let sequence = first[0].stream_sequence;
    drop(first); // the node "crashed" before its commit: no ack

    let early = consumer
        .next_batch(10, Duration::from_millis(300))
        .await
        .unwrap();
    if taken.elapsed() < settings.ack_wait {
        assert!(early.is_empty(), "redelivered before the ack wait ran out");
    }
    let again = wait_for("the redelivery", Duration::from_secs(20), || async {
        let d = consumer
            .next_batch(10, Duration::from_millis(500))
            .await
            .unwrap();
        (!d.is_empty()).then_some(d)
    })
    .await;
    assert!(taken.elapsed() >= settings.ack_wait);
    assert_eq!(again.len(), 1);
    assert!(again[0].is_redelivery());
    assert_eq!(again[0].stream_sequence, sequence);
    assert_eq!(again[0].batch.records, records);
    assert_eq!(consumer.backlog().await.unwrap().redelivered, 1);
    again[0].ack().await.unwrap();
    let after = consumer.backlog().await.unwrap();
    assert_eq!((after.pending, after.ack_pending), (0, 0));
    assert_eq!(stream_messages(&js, URL_STREAM).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_on_disjoint_shards_never_see_each_others_urls() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let a = node_settings(&server, "a", 16, "0-7");
    let b = node_settings(&server, "b", 16, "8-15");
    let (js_a, _) = jetstream(&a).await;
    let (js_b, _) = jetstream(&b).await;
    let records = seeds(200, 2, "d");
    Publisher::new(js_a.clone(), a.shard_map, MAX_URL_LEN)
        .publish(records.clone())
        .await
        .expect("publish");
    let (ca, cb) = (open_owned(&js_a, &a).await, open_owned(&js_b, &b).await);
    let (got_a, got_b) = tokio::join!(drain(&ca), drain(&cb));
    let urls = |got: &[(u32, UrlRecord)], owner: &ClusterSettings| -> HashSet<String> {
        for (shard, r) in got {
            let s = owner.shard_map.shard_of_url(&r.url, MAX_URL_LEN).unwrap();
            assert!(
                owner.owned.as_ref().is_some_and(|o| o.contains(s)) && s == *shard,
                "{} (shard {s})",
                r.url
            );
        }
        got.iter().map(|(_, r)| r.url.clone()).collect()
    };
    let (ua, ub) = (urls(&got_a, &a), urls(&got_b, &b));
    assert!(!ua.is_empty() && !ub.is_empty());
    assert!(ua.is_disjoint(&ub));
    assert_eq!(got_a.len() + got_b.len(), records.len());
    let all: HashSet<String> = records.into_iter().map(|r| r.url).collect();
    assert_eq!(&ua | &ub, all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_killed_mid_publish_loses_nothing_acked_and_publishing_resumes() {
    let Some(mut server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n1", 8, "0-7");
    let (js, state) = jetstream(&settings).await;
    let publisher = Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN);
    let acked_rounds = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    // The caller's loop, publishing until told to stop: publish a round of 20 URLs; on
    // failure keep exactly the unacked URLs, pause and publish them again.
    let task = {
        let (acked_rounds, failures, stop) = (acked_rounds.clone(), failures.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acked: Vec<String> = Vec::new();
            let mut acked_after_failure = 0;
            let mut round = 0;
            while !stop.load(Ordering::SeqCst) {
                let round_urls = seeds(10, 2, &format!("k{round}"));
                let mut todo = round_urls.clone();
                let mut attempt = 0;
                while !todo.is_empty() {
                    match publisher.publish(std::mem::take(&mut todo)).await {
                        Ok(report) => {
                            assert!(report.unroutable.is_empty());
                            if failures.load(Ordering::SeqCst) > 0 {
                                acked_after_failure += report.published;
                            }
                        }
                        Err(f) => {
                            failures.fetch_add(1, Ordering::SeqCst);
                            assert!(
                                matches!(f.error, BrokerError::Publish { .. }),
                                "{}",
                                f.error
                            );
                            todo = f.unacked;
                            attempt += 1;
                            tokio::time::sleep(cluster::reconnect_delay(attempt)).await;
                        }
                    }
                }
                acked.extend(round_urls.into_iter().map(|r| r.url));
                acked_rounds.fetch_add(1, Ordering::SeqCst);
                round += 1;
            }
            (acked, acked_after_failure)
        })
    };

    wait_for("20 rounds acked", Duration::from_secs(60), || async {
        (acked_rounds.load(Ordering::SeqCst) >= 20).then_some(())
    })
    .await;
    server.kill(0);
    let killed_at = acked_rounds.load(Ordering::SeqCst);
    wait_for("a publish failure", Duration::from_secs(30), || async {
        (failures.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    server.restart(0);
    wait_for(
        "20 more rounds acked after the restart",
        Duration::from_secs(120),
        || async { (acked_rounds.load(Ordering::SeqCst) >= killed_at + 20).then_some(()) },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let (acked, acked_after_failure) = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("publisher stops")
        .expect("publisher task");
    assert!(
        acked_after_failure >= 20 * 20,
        "publishing resumed after the restart"
    );
    assert!(state.disconnects() >= 1 && state.reconnects() >= 1);
    eprintln!(
        "killed after {killed_at} rounds; {} failed publish calls; {} URLs acked, {acked_after_failure} of them after the first failure",
        failures.load(Ordering::SeqCst),
        acked.len()
    );

    // every acked URL is in the stream (a message whose ack was lost may be there twice)
    let consumers = open_owned(&js, &settings).await;
    let got: Vec<String> = drain(&consumers)
        .await
        .into_iter()
        .map(|(_, r)| r.url)
        .collect();
    let got_set: BTreeSet<&String> = got.iter().collect();
    let missing: Vec<&String> = acked.iter().filter(|u| !got_set.contains(u)).collect();
    assert!(
        missing.is_empty(),
        "{} acked URLs lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(3)]
    );
    eprintln!("{} deliveries for {} URLs", got.len(), acked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_kept_per_node_and_a_wrong_shard_count_is_refused() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n7", 8, "0-7");
    let (js, _) = jetstream(&settings).await;
    let events = EventPublisher::new(js.clone(), &settings.node_id);
    assert_eq!(events.subject(), "frontierd.events.n7");
    let mut last = 0;
    for i in 0..3 {
        let seq = events
            .publish(format!("{{\"url\":\"http://e.test/{i}\",\"status\":200}}").into_bytes())
            .await
            .expect("event acked");
        assert!(seq > last);
        last = seq;
    }
    let mut stream = js.get_stream(EVENTS_STREAM).await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 3);
    assert_eq!(
        info.config.retention,
        async_nats::jetstream::stream::RetentionPolicy::Limits
    );
    let msg = stream.get_raw_message(2).await.unwrap();
    assert_eq!(msg.subject.as_str(), "frontierd.events.n7");
    assert!(String::from_utf8_lossy(&msg.payload).contains("http://e.test/1"));

    let other = node_settings(&server, "n8", 16, "0-15");
    let err = ensure_streams(&js, &other).await.unwrap_err();
    assert!(
        matches!(err, BrokerError::ShardCountMismatch { configured: 16, ref found, .. } if found == "8"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_published_to_the_intake_subject_are_routed_to_their_shards() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n1", 8, "0-7");
    let (js, _) = jetstream(&settings).await;
    let publisher = Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN);
    let router = cluster::IntakeRouter::open(&js, publisher, settings.ack_wait)
        .await
        .expect("router");
    // what any NATS client can send: plain lines, a JSON line, a comment, bad lines
    let mut body = b"# seeds\nhttp://i1.test/\nhttp://i2.test/a\n".to_vec();
    body.extend_from_slice(
        b"{\"url\":\"http://i3.test/x\",\"depth\":1,\"via\":\"http://i1.test/\",\"hops\":\"L\"}\n",
    );
    body.extend_from_slice(b"http://bad\xFF.test/\nnot a url\n");
    js.publish(cluster::INTAKE_SUBJECT, body.into())
        .await
        .unwrap()
        .await
        .expect("intake publish acked");
    let report = wait_for("the intake list", Duration::from_secs(20), || async {
        let r = router
            .route_once(10, Duration::from_millis(500))
            .await
            .expect("route");
        (r.messages > 0).then_some(r)
    })
    .await;
    assert_eq!((report.messages, report.routed), (1, 3));
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(report.rejected[0].1.line, 5);
    assert_eq!(report.rejected[0].1.code, "not-utf8");
    assert_eq!(report.unroutable.len(), 1);
    assert_eq!(
        stream_messages(&js, cluster::INTAKE_STREAM).await,
        0,
        "intake message acked"
    );

    let consumers = open_owned(&js, &settings).await;
    let got = drain(&consumers).await;
    let mut urls: Vec<&str> = got.iter().map(|(_, r)| r.url.as_str()).collect();
    urls.sort();
    assert_eq!(
        urls,
        ["http://i1.test/", "http://i2.test/a", "http://i3.test/x"]
    );
    for (shard, r) in &got {
        assert_eq!(
            *shard,
            settings
                .shard_map
                .shard_of_url(&r.url, MAX_URL_LEN)
                .unwrap()
        );
        if r.url.contains("i3") {
            assert_eq!((r.depth, r.hops.as_str()), (1, "L"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_of_more_messages_than_ack_permits_completes() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n1", 64, "0-63");
    let (client, _) = cluster::connect(&settings).await.expect("connect");
    // 8 unacknowledged publishes at most on this context
    let js = async_nats::jetstream::ContextBuilder::new()
        .max_ack_inflight(8)
        .build(client);
    ensure_streams(&js, &settings).await.expect("streams");
    let publisher =
        Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN).with_max_in_flight(4);
    // 400 hosts touch (nearly) all 64 shards: one call, about 64 messages
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        publisher.publish(seeds(400, 1, "p")),
    )
    .await
    .expect("publish finished instead of waiting on its own permits")
    .expect("publish");
    assert!(report.messages > 8, "{} messages", report.messages);
    assert_eq!(report.published, 400);
    assert_eq!(
        stream_messages(&js, URL_STREAM).await,
        report.messages as u64
    );
}

/// A measurement, not a check: `cargo test -p cluster --test broker throughput -- --ignored
/// --nocapture` prints URLs/s published (acknowledged) and consumed (acked after "commit")
/// through one local nats-server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --ignored --nocapture"]
async fn throughput() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n1", 64, "0-63");
    let (js, _) = jetstream(&settings).await;
    let publisher = Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN);
    let urls = seeds(10_000, 10, "t");
    let total = urls.len();
    let started = Instant::now();
    for part in urls.chunks(5_000) {
        publisher.publish(part.to_vec()).await.expect("publish");
    }
    let published = started.elapsed();
    let consumers = open_owned(&js, &settings).await;
    let started = Instant::now();
    let mut got = 0;
    loop {
        let mut n = 0;
        for c in &consumers {
            for d in c
                .next_batch(64, Duration::from_millis(20))
                .await
                .expect("fetch")
            {
                n += d.batch.records.len();
                d.ack().await.expect("ack");
            }
        }
        got += n;
        if got >= total {
            break;
        }
    }
    let consumed = started.elapsed();
    eprintln!(
        "{total} URLs over 10000 hosts, 64 shards: published {:.0} URLs/s ({published:?}), consumed and acked {:.0} URLs/s ({consumed:?})",
        total as f64 / published.as_secs_f64(),
        total as f64 / consumed.as_secs_f64()
    );
}

/// A pull request for n messages is answered when n arrived or when it expires: asked for
/// 64, a shard holding one message must not keep it for the whole wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_with_fewer_messages_than_asked_answers_without_waiting_out_the_wait() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let settings = node_settings(&server, "n1", 1, "0");
    let (js, _) = jetstream(&settings).await;
    let consumer = ShardConsumer::open(&js, &settings, 0)
        .await
        .expect("consumer");
    let publisher = Publisher::new(js.clone(), settings.shard_map, MAX_URL_LEN);
    publisher
        .publish(vec![UrlRecord::seed("http://one.test/")])
        .await
        .expect("publish");
    // the wait is capped at half the 30 s ack wait: 15 s
    let wait = Duration::from_secs(20);
    let started = Instant::now();
    let got = consumer.next_batch(64, wait).await.expect("fetch");
    assert_eq!(got.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "one waiting message took {:?}",
        started.elapsed()
    );
    got[0].ack().await.expect("ack");
    // a message published while the call waits is returned when it arrives
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        publisher
            .publish(vec![UrlRecord::seed("http://two.test/")])
            .await
            .expect("publish");
    });
    let started = Instant::now();
    let got = consumer.next_batch(64, wait).await.expect("fetch");
    late.await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].batch.records[0].url, "http://two.test/");
    assert!(
        started.elapsed() >= Duration::from_millis(500)
            && started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}
