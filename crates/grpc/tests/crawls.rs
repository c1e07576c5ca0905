//! crawlIDs and the rpcs that remove or limit URLs, in-process (tests/common): crawl
//! namespaces, DeleteQueue / DeleteCrawl / PurgeURLs, SetCrawlLimit, CountURLs filters,
//! SetLogLevel.

// tonic interceptors return `Result<_, tonic::Status>`
#![allow(clippy::result_large_err)]

mod common;

use common::*;
use frontier_grpc::pb::url_frontier_client::UrlFrontierClient;
use frontier_grpc::pb::{self, url_item::Item};
use tonic::transport::Channel;
use tonic::Code;

fn in_crawl(url: &str, crawl: &str) -> pb::UrlInfo {
    pb::UrlInfo {
        crawl_id: crawl.to_string(),
        ..info(url, &[])
    }
}

fn known_in(url: &str, crawl: &str) -> pb::UrlItem {
    pb::UrlItem {
        item: Some(Item::Known(pb::KnownUrlItem {
            info: Some(in_crawl(url, crawl)),
            refetchable_from_date: 0,
        })),
        id: format!("known:{crawl}:{url}"),
        creation_date: 0,
    }
}

fn params_in(crawl: &str) -> pb::GetParams {
    pb::GetParams {
        item: Some(pb::get_params::Item::CrawlId(crawl.to_string())),
        ..params(60)
    }
}

async fn count(c: &mut UrlFrontierClient<Channel>, crawl: &str, key: &str) -> u64 {
    c.count_ur_ls(pb::CountUrlParams {
        key: key.to_string(),
        crawl_id: crawl.to_string(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_ids_are_namespaces_of_their_own_urls() {
    let s = start(None, |c| c.max_in_flight_per_host = 4).await;
    let mut c = client(&s).await;
    let url = "http://shared.test/page";
    let acks = put(
        &mut c,
        vec![
            discovered(in_crawl(url, "a")),
            discovered(in_crawl(url, "b")),
            discovered(in_crawl(url, "")),
            discovered(in_crawl("http://only-b.test/x", "b")),
        ],
    )
    .await;
    assert!(acks.iter().all(|a| a.status == 0), "{acks:?}");
    assert_eq!(
        (count(&mut c, "a", "").await, count(&mut c, "b", "").await),
        (1, 2)
    );
    assert_eq!(count(&mut c, "DEFAULT", "").await, 1);
    assert_eq!(count(&mut c, "", "").await, 1, "empty crawlID is DEFAULT");
    let crawls = c
        .list_crawls(pb::Local::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(crawls.values, vec!["DEFAULT", "a", "b"]);
    let queues = c
        .list_queues(pb::Pagination {
            crawl_id: "b".into(),
            include_inactive: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(queues.values, vec!["only-b.test", "shared.test"]);
    assert_eq!(queues.crawl_id, "b");
    // GetURLs with a crawlID serves that crawl only, tagged with it
    let got = get_until(&mut c, params_in("a"), |g| !g.is_empty()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].url.as_str(), got[0].crawl_id.as_str()), (url, "a"));
    // crawl b: its URL of the shared host (next in that host's queue) and its other host's
    let got_b = get_until(&mut c, params_in("b"), |g| g.len() >= 2).await;
    let mut urls_b: Vec<&str> = got_b.iter().map(|u| u.url.as_str()).collect();
    urls_b.sort();
    assert_eq!(urls_b, vec!["http://only-b.test/x", url], "{got_b:?}");
    assert!(got_b.iter().all(|u| u.crawl_id == "b"), "{got_b:?}");
    // reporting crawl a's URL completes it in crawl a only
    let acks = put(&mut c, vec![known_in(url, "a")]).await;
    assert_eq!(acks[0].status, 0);
    let status = |crawl: &str| pb::UrlStatusRequest {
        url: url.to_string(),
        key: String::new(),
        crawl_id: crawl.to_string(),
    };
    let a = c.get_url_status(status("a")).await.unwrap().into_inner();
    assert!(
        matches!(a.item, Some(Item::Known(ref k)) if k.refetchable_from_date == 0),
        "{a:?}"
    );
    let d = c.get_url_status(status("")).await.unwrap().into_inner();
    assert!(matches!(d.item, Some(Item::Discovered(_))), "{d:?}");
    let e = c.get_url_status(status("zzz")).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let stats = c
        .get_stats(pb::QueueWithinCrawlParams {
            crawl_id: "a".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((stats.size, stats.counts["completed"]), (0, 1), "{stats:?}");
    // any crawl: the rest, DEFAULT's URL of the shared host
    let rest = get_until(&mut c, params(60), |g| !g.is_empty()).await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(
        (rest[0].url.as_str(), rest[0].crawl_id.as_str()),
        (url, "DEFAULT")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_queue_and_delete_crawl_remove_a_crawls_urls_only() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    let mut items: Vec<pb::UrlItem> = (0..3)
        .map(|i| discovered(in_crawl(&format!("http://x.test/{i}"), "a")))
        .collect();
    items.push(discovered(in_crawl("http://y.test/0", "a")));
    items.push(discovered(in_crawl("http://x.test/0", "b")));
    put(&mut c, items).await;
    let deleted = c
        .delete_queue(pb::QueueWithinCrawlParams {
            key: "x.test".into(),
            crawl_id: "a".into(),
            local: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.value, 3);
    assert_eq!(count(&mut c, "a", "").await, 1);
    assert_eq!(
        count(&mut c, "b", "x.test").await,
        1,
        "crawl b keeps its URL"
    );
    let got = get_until(&mut c, params_in("a"), |g| !g.is_empty()).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].url, "http://y.test/0");
    // put again after the deletion: a new URL of crawl a
    let acks = put(&mut c, vec![discovered(in_crawl("http://x.test/1", "a"))]).await;
    assert_eq!(acks[0].status, 0);
    assert_eq!(count(&mut c, "a", "x.test").await, 1);
    let gone = c
        .delete_crawl(pb::DeleteCrawlMessage {
            value: "a".into(),
            local: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(gone.value, 1, "x.test/1 queued (y.test/0 is leased)");
    assert_eq!(count(&mut c, "a", "").await, 0);
    let crawls = c
        .list_crawls(pb::Local::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(crawls.values, vec!["DEFAULT", "b"]);
    // crawl b's URL at x.test is served; nothing of crawl a is
    let rest = get_until(&mut c, params(60), |g| !g.is_empty()).await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].crawl_id, "b");
    // PurgeURLs with days = 0 is a deletion too
    put(&mut c, vec![discovered(in_crawl("http://z.test/0", "c"))]).await;
    let purged = c
        .purge_ur_ls(pb::PurgeUrlParams {
            key: "z.test".into(),
            crawl_id: "c".into(),
            days: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(purged.value, 1);
    let events = s.hooks.events.lock().unwrap().join("\n");
    assert!(
        events.contains("Deleted { rpc: \"DeleteQueue\", urls: 3 }"),
        "{events}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_limit_stops_serving_its_queue_after_that_many_completions() {
    let s = start(None, |c| c.max_in_flight_per_host = 4).await;
    let mut c = client(&s).await;
    let items = (0..3)
        .map(|i| discovered(in_crawl(&format!("http://lim.test/{i}"), "a")))
        .collect();
    put(&mut c, items).await;
    let limit = |key: &str, limit: u32| pb::CrawlLimitParams {
        key: key.to_string(),
        limit,
        crawl_id: "a".into(),
        local: false,
    };
    let e = c.set_crawl_limit(limit("nope.test", 1)).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    c.set_crawl_limit(limit("lim.test", 1)).await.unwrap();
    let mut p = params_in("a");
    p.max_urls_per_queue = 1;
    let first = get_until(&mut c, p.clone(), |g| !g.is_empty()).await;
    put(&mut c, vec![known_in(&first[0].url, "a")]).await;
    // one completion: the queue is no longer served, nor listed as active
    assert!(get(&mut c, p.clone()).await.is_empty());
    let active = c
        .list_queues(pb::Pagination {
            crawl_id: "a".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(active.values.is_empty(), "{active:?}");
    assert_eq!(count(&mut c, "a", "lim.test").await, 2);
    // lifted: served again
    c.set_crawl_limit(limit("lim.test", 0)).await.unwrap();
    let again = get_until(&mut c, params_in("a"), |g| g.len() >= 2).await;
    assert_eq!(again.len(), 2, "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_urls_filters_by_text_and_case() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    let urls = [
        "http://f.test/a.PDF",
        "http://f.test/b.pdf",
        "http://f.test/c.html",
    ];
    put(
        &mut c,
        urls.iter().map(|u| discovered(info(u, &[]))).collect(),
    )
    .await;
    let n = |filter: &str, ignore_case: bool| pb::CountUrlParams {
        key: String::new(),
        crawl_id: String::new(),
        filter: Some(filter.to_string()),
        ignore_case: Some(ignore_case),
        local: None,
    };
    let mut got = Vec::new();
    for (f, ic) in [("pdf", true), ("pdf", false), ("html", false), ("", false)] {
        got.push(c.count_ur_ls(n(f, ic)).await.unwrap().into_inner().value);
    }
    assert_eq!(got, vec![2, 1, 1, 3]);
    let mut other = n("pdf", true);
    other.crawl_id = "elsewhere".into();
    assert_eq!(c.count_ur_ls(other).await.unwrap().into_inner().value, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_log_level_goes_to_the_programs_filter() {
    let s = start(None, |_| {}).await;
    let mut c = client(&s).await;
    c.set_log_level(pb::LogLevelParams {
        package: "frontier_grpc".into(),
        level: pb::log_level_params::Level::Debug as i32,
        local: false,
    })
    .await
    .unwrap();
    let e = c
        .set_log_level(pb::LogLevelParams {
            package: "crawlercommons.urlfrontier".into(),
            level: pb::log_level_params::Level::Info as i32,
            local: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("crawlercommons.urlfrontier"), "{e:?}");
    let events = s.hooks.events.lock().unwrap().join("\n");
    assert!(events.contains("log frontier_grpc=debug"), "{events}");
    assert!(events.contains("LogLevelSet"), "{events}");
}
