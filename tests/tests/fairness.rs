//! Scheduling fairness (issue 11), measured by the servers: one held origin does not
//! starve the other origins of its host, one broken URL does not slow its host, and the
//! first page after robots.txt waits the crawl-delay robots.txt just gave.

use std::time::{Duration, Instant};

use frontierd_e2e::{logged, wait_until, Env, Hit, Reply, Req, Site};

/// The host's gap in these tests (`min_delay` = `max_delay`, no delay factor).
const GAP: Duration = Duration::from_millis(200);
/// What one request may cost beyond the gap on a loaded test machine (fetch, completion,
/// the worker's next poll): a generous per-request allowance, so the bounds below fail only
/// when requests are held back by whole back-offs or robots holds (60 s here).
const PER_REQUEST: Duration = Duration::from_millis(250);
/// The daemon counts time in whole milliseconds.
const SLACK: Duration = Duration::from_millis(2);

fn gap_config() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("fetch", "workers", "8"),
        ("politeness", "min_delay", "\"200ms\""),
        ("politeness", "max_delay", "\"200ms\""),
        ("politeness", "delay_factor", "0.0"),
        // the defaults: a back-off a test would notice
        ("politeness", "backoff_base", "\"60s\""),
        ("politeness", "backoff_max", "\"1h\""),
    ]
}

/// All hits of several sites for `host`, in arrival order.
fn merged(sites: &[Site], host: &str) -> Vec<(usize, Hit)> {
    let mut all: Vec<(usize, Hit)> = sites
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.hits_for(host).into_iter().map(move |h| (i, h)))
        .collect();
    all.sort_by_key(|(_, h)| h.start);
    all
}

const ORIGINS: usize = 15;
const PAGES_PER_ORIGIN: usize = 3;
const SHARED_HOST: &str = "many.site.test";

/// 15 origins on one address (one site per port, one host name); origin 0's robots.txt
/// answers 500, then 429. The 14 others are crawled within the host's gaps, none of
/// origin 0's pages is requested, and the host's gap holds across all origins.
#[test]
fn a_held_origin_does_not_starve_the_other_origins_of_its_host() {
    let sites: Vec<Site> = (0..ORIGINS)
        .map(|i| {
            Site::start(move |req: &Req| {
                if req.path == "/robots.txt" {
                    return match (i, req.nth) {
                        (0, 0) => Reply::status(500, "oops"),
                        (0, _) => Reply::status(429, "slow down"),
                        _ => Reply::text("User-agent: *\nAllow: /\n"),
                    };
                }
                Reply::html(format!("{} on origin {i}", req.path))
            })
        })
        .collect();
    let env = Env::new(&gap_config());
    let daemon = env.start();
    // origin 0's URLs at the head of the host's queue, and between the others
    let mut urls = Vec::new();
    for p in 0..PAGES_PER_ORIGIN {
        for s in &sites {
            urls.push(format!("{}/p{p}", s.base(SHARED_HOST)));
        }
    }
    let good: Vec<String> = urls
        .iter()
        .filter(|u| !u.starts_with(&sites[0].base(SHARED_HOST)))
        .cloned()
        .collect();
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], urls.len(), "{answer}");
    // one request per gap for the whole host: 14 robots.txt, 42 pages, origin 0's
    // robots.txt (its retry is a minute away), each at most GAP + PER_REQUEST apart
    let requests = (ORIGINS - 1) + good.len() + 1;
    let bound = (GAP + PER_REQUEST) * requests as u32;
    wait_until(
        "every page of the 14 good origins",
        bound * 3 + Duration::from_secs(10),
        || {
            let log = env.crawl_log();
            good.iter().all(|u| logged(&log, u, "fetched"))
        },
    );
    let hits = merged(&sites, SHARED_HOST);
    let first = hits[0].1.start;
    let last_good = hits
        .iter()
        .filter(|(i, h)| *i != 0 && h.path != "/robots.txt")
        .map(|(_, h)| h.start)
        .max()
        .unwrap();
    eprintln!(
        "{} requests, last good page {:?} after the first request (bound {bound:?})",
        hits.len(),
        last_good - first
    );
    assert!(
        last_good - first <= bound,
        "the good origins took {:?}, more than {bound:?}",
        last_good - first
    );
    for (i, s) in sites.iter().enumerate().skip(1) {
        let h = s.hits_for(SHARED_HOST);
        assert_eq!(h[0].path, "/robots.txt", "origin {i}: {h:?}");
        assert_eq!(h.len(), 1 + PAGES_PER_ORIGIN, "origin {i}: {h:?}");
    }
    // origin 0: robots.txt only, never a page
    assert!(
        sites[0].hits().iter().all(|h| h.path == "/robots.txt"),
        "{:?}",
        sites[0].hits()
    );
    // one politeness budget for the host: the gap holds across its origins
    for w in hits.windows(2) {
        let sent = w[0].1.sent.expect("whole answers here");
        assert!(
            w[1].1.start - sent + SLACK >= GAP,
            "{:?} then {:?}: {:?} apart",
            w[0],
            w[1],
            w[1].1.start - sent
        );
    }
    // the admin API says which origins are held
    let (status, body) = daemon.get(&format!("/v1/hosts/{SHARED_HOST}"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["robots"], "1 of 15 origins held", "{v}");
    assert_eq!(v["robots_states"]["5xx-disallow"], 1, "{v}");
    assert_eq!(v["robots_states"]["fresh"], 14, "{v}");
    let (_, body) = daemon.get("/v1/hosts?state=5xx-disallow");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["hosts"][0]["host"], SHARED_HOST, "{list}");
    assert_eq!(list["hosts"][0]["robots"], "1 of 15 origins held", "{list}");
    assert_eq!(list["hosts"][0]["robots_state"], "mixed", "{list}");
    // and what the queue waits for: origin 0's pages, held by robots.txt
    let (_, stats) = daemon.get("/v1/stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(
        stats["queued_by_reason"]["robots"]["5xx-disallow"], PAGES_PER_ORIGIN,
        "{stats}"
    );
    assert_eq!(stats["queued_by_reason"]["eligible"], 0, "{stats}");
    assert_eq!(stats["queued"], PAGES_PER_ORIGIN, "{stats}");
    let metrics = daemon.metrics();
    assert!(
        metrics.contains("frontierd_urls_queued_by_reason{reason=\"robots-5xx-disallow\"} 3"),
        "{metrics}"
    );
}

const GOOD_PAGES: usize = 20;
const FETCH_TIMEOUT: Duration = Duration::from_secs(1);

/// A host with one page answering 500 and one that stalls until the fetch timeout, queued
/// before 20 good pages: the good pages follow at the host's gap (no 60 s back-off), and
/// the broken pages are not asked again before the good ones are done.
#[test]
fn a_broken_url_does_not_slow_its_host() {
    let site = Site::start(|req: &Req| match req.path.as_str() {
        "/robots.txt" => Reply::not_found(),
        "/broken" => Reply::status(500, "oops"),
        "/stall" => Reply::Stall,
        p => Reply::html(p),
    });
    let mut cfg = gap_config();
    cfg.push(("fetch", "total_timeout", "\"1s\""));
    cfg.push(("fetch", "connect_timeout", "\"1s\""));
    let env = Env::new(&cfg);
    let daemon = env.start();
    let host = "broken.site.test";
    let base = site.base(host);
    let mut urls = vec![format!("{base}/broken"), format!("{base}/stall")];
    let good: Vec<String> = (0..GOOD_PAGES).map(|i| format!("{base}/good{i}")).collect();
    urls.extend(good.iter().cloned());
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], urls.len(), "{answer}");
    // robots.txt, /broken, /stall (one timeout), then the good pages, one per gap
    let requests = 3 + GOOD_PAGES;
    let bound = (GAP + PER_REQUEST) * requests as u32 + FETCH_TIMEOUT;
    wait_until(
        "every good page",
        bound * 3 + Duration::from_secs(10),
        || {
            let log = env.crawl_log();
            good.iter().all(|u| logged(&log, u, "fetched"))
        },
    );
    let hits = site.hits_for(host);
    let first = hits[0].start;
    let last_good = hits
        .iter()
        .filter(|h| h.path.starts_with("/good"))
        .map(|h| h.start)
        .max()
        .unwrap();
    eprintln!(
        "{} requests, last good page {:?} after the first (bound {bound:?})",
        hits.len(),
        last_good - first
    );
    assert!(
        last_good - first <= bound,
        "good pages took {:?}, more than {bound:?}: {hits:?}",
        last_good - first
    );
    // each broken URL once so far: its retry waits behind the queue, a back-off away
    for p in ["/broken", "/stall"] {
        let n = hits.iter().filter(|h| h.path == p).count();
        assert_eq!(n, 1, "{p} requested {n} times: {hits:?}");
    }
    // the host never backed off
    let (_, body) = daemon.get(&format!("/v1/hosts/{host}"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["backoff_level"], 0, "{v}");
    let (_, stats) = daemon.get("/v1/stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["queued_by_reason"]["politeness"], 2, "{stats}");
    let metrics = daemon.metrics();
    assert!(
        metrics.contains("frontierd_page_failures_total{kind=\"failed\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("frontierd_page_failures_total{kind=\"timed-out\"} 1"),
        "{metrics}"
    );
}

/// Hosts whose robots.txt asks for a crawl-delay (2 s, 5 s clamped to the 3 s cap, 1 s):
/// the first page comes at least that long after robots.txt was answered.
#[test]
fn the_first_page_waits_the_crawl_delay_of_robots_txt() {
    let delays = [("cd2", 2u64, 2u64), ("cd5", 5, 3), ("cd1", 1, 1)];
    let site = Site::start(move |req: &Req| {
        if req.path == "/robots.txt" {
            let asked = match req.host.split('.').next().unwrap_or("") {
                "cd2" => 2,
                "cd5" => 5,
                _ => 1,
            };
            return Reply::text(format!("User-agent: *\nCrawl-delay: {asked}\n"));
        }
        Reply::html("page")
    });
    let mut cfg = gap_config();
    cfg.push(("politeness", "max_crawl_delay", "\"3s\""));
    let env = Env::new(&cfg);
    let daemon = env.start();
    let t0 = Instant::now();
    let mut urls = Vec::new();
    for (name, _, _) in delays {
        let base = site.base(&format!("{name}.site.test"));
        urls.push(format!("{base}/a"));
        urls.push(format!("{base}/b"));
    }
    daemon.submit(&urls);
    wait_until("every page", Duration::from_secs(60), || {
        let log = env.crawl_log();
        urls.iter().all(|u| logged(&log, u, "fetched"))
    });
    eprintln!("crawled in {:?}", t0.elapsed());
    for (name, asked, expected) in delays {
        let hits = site.hits_for(&format!("{name}.site.test"));
        assert_eq!(hits[0].path, "/robots.txt", "{hits:?}");
        let answered = hits[0].sent.expect("robots.txt answered");
        let wait = hits[1].start - answered;
        eprintln!("{name}: crawl-delay {asked} s, first page {wait:?} after robots.txt");
        assert!(
            wait + SLACK >= Duration::from_secs(expected),
            "{name}: first page only {wait:?} after robots.txt (crawl-delay {expected} s)"
        );
        let gap = hits[2].start - hits[1].sent.expect("answered");
        assert!(
            gap + SLACK >= Duration::from_secs(expected),
            "{name}: {gap:?}"
        );
    }
}

/// No robots.txt wall: with many new hosts whose robots.txt is slow, robots.txt fetches
/// take only a share of the workers, so a host whose rules came back first gets its pages
/// fetched right away instead of after every other host's robots.txt.
#[test]
fn pages_start_within_a_second_of_the_first_robots_txt_answer() {
    let site = Site::start(|req: &Req| {
        if req.path == "/robots.txt" {
            let allow = Reply::text("User-agent: *\nAllow: /\n");
            if req.host.starts_with("slow") {
                return allow.delayed(Duration::from_millis(600));
            }
            return allow;
        }
        Reply::html("page")
    });
    let env = Env::new(&[
        ("fetch", "workers", "4"),
        ("politeness", "min_delay", "\"0s\""),
        ("politeness", "max_delay", "\"0s\""),
        ("politeness", "delay_factor", "0.0"),
    ]);
    let daemon = env.start();
    // the quick host first, then 32 hosts whose robots.txt takes 0.6 s: one robots.txt
    // fetch per worker for all of them would keep 4 workers busy for ~5 s
    let fast = site.base("fast.site.test");
    let mut urls: Vec<String> = (0..5).map(|i| format!("{fast}/p{i}")).collect();
    for i in 0..32 {
        urls.push(format!("{}/p", site.base(&format!("slow{i}.site.test"))));
    }
    daemon.submit(&urls);
    wait_until("the quick host's pages", Duration::from_secs(60), || {
        let log = env.crawl_log();
        urls[..5].iter().all(|u| logged(&log, u, "fetched"))
    });
    let hits = site.hits();
    let first_answer = hits
        .iter()
        .filter(|h| h.path == "/robots.txt")
        .filter_map(|h| h.sent)
        .min()
        .expect("a robots.txt answered");
    let first_page = hits
        .iter()
        .filter(|h| h.path != "/robots.txt")
        .map(|h| h.start)
        .min()
        .expect("a page fetched");
    let wait = first_page.saturating_duration_since(first_answer);
    eprintln!("first page {wait:?} after the first robots.txt answer");
    assert!(
        wait < Duration::from_secs(1),
        "the first page came {wait:?} after the first robots.txt answer"
    );
    // and the slow hosts were not starved either
    wait_until("every page", Duration::from_secs(60), || {
        let log = env.crawl_log();
        urls.iter().all(|u| logged(&log, u, "fetched"))
    });
}
