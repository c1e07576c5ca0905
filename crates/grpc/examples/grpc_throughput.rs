//! PutURLs and GetURLs throughput of a running frontierd's url-frontier API, from a tonic
//! client (`bench/grpc-bench.sh` runs it next to the Python client).
//!
//! `cargo run --release -p frontier-grpc --example grpc_throughput -- ADDR URLS HOSTS BASE`
//! puts URLS URLs over HOSTS hosts (`BASE` is e.g. `http://h{}.bench.test:8000`, `{}` the
//! host number) in one PutURLs stream, then leases them with GetURLs and reports each one
//! done with PutURLs until all are done, from `CALLERS` (default 1) callers at once. Prints
//! one JSON line (`in_get_secs` and `in_report_secs` are summed over the callers).
//!
//! Before the timed phases, an untimed warm-up puts one URL per host and leases and reports
//! them all: that is when frontierd fetches each host's robots.txt (GetURLs hands the
//! robots.txt fetches to its own workers). The frontier library bench, the anchor, presets
//! its robots answers untimed too; without the warm-up the timed GetURLs phase measured the
//! test server's robots.txt answers (GetURLs returned nothing while they were pending).

use std::time::{Duration, Instant};

use frontier_grpc::pb;
use frontier_grpc::pb::url_frontier_client::UrlFrontierClient;
use frontier_grpc::pb::url_item::Item;

fn item(url: String, known: bool) -> pb::UrlItem {
    let info = Some(pb::UrlInfo {
        url,
        ..Default::default()
    });
    pb::UrlItem {
        item: Some(if known {
            Item::Known(pb::KnownUrlItem {
                info,
                refetchable_from_date: 0,
            })
        } else {
            Item::Discovered(pb::DiscoveredUrlItem { info })
        }),
        id: String::new(),
        creation_date: 0,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, urls, hosts, base] = args.as_slice() else {
        return Err(
            "usage: grpc_throughput ADDR URLS HOSTS BASE (BASE has {} for the host)".into(),
        );
    };
    let (n, hosts): (usize, usize) = (urls.parse()?, hosts.parse()?);
    let mut c = UrlFrontierClient::connect(format!("http://{addr}"))
        .await?
        .max_decoding_message_size(64 << 20);
    let all: Vec<String> = (0..n)
        .map(|i| format!("{}/t/{i}", base.replace("{}", &(i % hosts).to_string())))
        .collect();

    // warm-up (untimed): every host's robots.txt fetched
    let warm: Vec<pb::UrlItem> = (0..hosts)
        .map(|h| {
            item(
                format!("{}/warm", base.replace("{}", &h.to_string())),
                false,
            )
        })
        .collect();
    let warmed = put(&mut c, warm).await?;
    lease_and_report(&c, 1, warmed).await?;

    let t = Instant::now();
    let items: Vec<pb::UrlItem> = all.iter().map(|u| item(u.clone(), false)).collect();
    let acked = put(&mut c, items).await?;
    let put_secs = t.elapsed().as_secs_f64();

    // CALLERS spout-like callers at once (StormCrawler runs several): each leases with
    // GetURLs and reports what it got with PutURLs, on one shared connection
    let callers: usize = std::env::var("CALLERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let t = Instant::now();
    let (done, calls, get_time, report_time) = lease_and_report(&c, callers, acked).await?;
    let get_secs = t.elapsed().as_secs_f64();
    println!(
        "{{\"client\":\"tonic\",\"urls\":{acked},\"put_secs\":{put_secs:.3},\"put_urls_per_sec\":{:.0},\"served_and_reported\":{done},\"get_secs\":{get_secs:.3},\"get_report_urls_per_sec\":{:.0},\"callers\":{callers},\"get_calls\":{calls},\"in_get_secs\":{:.3},\"in_report_secs\":{:.3}}}",
        acked as f64 / put_secs,
        done as f64 / get_secs,
        get_time.as_secs_f64(),
        report_time.as_secs_f64()
    );
    Ok(())
}

type Client = UrlFrontierClient<tonic::transport::Channel>;

/// Put `items` in one PutURLs stream; the number acknowledged OK (any other answer fails).
async fn put(c: &mut Client, items: Vec<pb::UrlItem>) -> Result<usize, Box<dyn std::error::Error>> {
    let mut acks = c.put_ur_ls(tokio_stream::iter(items)).await?.into_inner();
    let mut acked = 0;
    while let Some(a) = acks.message().await? {
        if a.status != 0 {
            return Err(format!("ack {a:?}").into());
        }
        acked += 1;
    }
    Ok(acked)
}

/// Lease and report done until `acked` URLs are reported, from `callers` callers: (URLs
/// reported, GetURLs calls that got URLs, time in GetURLs, time in reports).
async fn lease_and_report(
    c: &Client,
    callers: usize,
    acked: usize,
) -> Result<(usize, u64, Duration, Duration), Box<dyn std::error::Error>> {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stats = std::sync::Arc::new(std::sync::Mutex::new((
        0u64,
        Duration::ZERO,
        Duration::ZERO,
    )));
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let mut c = c.clone();
        let (done, stats) = (done.clone(), stats.clone());
        tasks.push(tokio::spawn(async move {
            use std::sync::atomic::Ordering::Relaxed;
            while done.load(Relaxed) < acked && Instant::now() < deadline {
                let t_get = Instant::now();
                let mut s = c
                    .get_ur_ls(pb::GetParams {
                        delay_requestable: 600,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                let mut got = Vec::new();
                while let Some(u) = s.message().await? {
                    got.push(item(u.url, true));
                }
                let in_get = t_get.elapsed();
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let t_report = Instant::now();
                let mut acks = c.put_ur_ls(tokio_stream::iter(got)).await?.into_inner();
                while acks.message().await?.is_some() {
                    done.fetch_add(1, Relaxed);
                }
                let mut st = stats.lock().unwrap_or_else(|e| e.into_inner());
                st.0 += 1;
                st.1 += in_get;
                st.2 += t_report.elapsed();
            }
            Ok::<(), tonic::Status>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let done = done.load(std::sync::atomic::Ordering::Relaxed);
    let (calls, get_time, report_time) = *stats.lock().unwrap_or_else(|e| e.into_inner());
    Ok((done, calls, get_time, report_time))
}
