//! `frontierd run` as an operator sees it: seeds through the spool and the API, links followed
//! within scope (a redirect target included, robots.txt obeyed), then the crawl log, the spool
//! bookkeeping, metrics, the admin API, the `hosts` command, the periodic progress line, a
//! clean SIGTERM exit and WARC output that passes `warcio check` (robots.txt archived too).

use std::process::Command;
use std::time::Duration;

use frontierd_e2e::{
    frontierd_bin, http, logged, require_warcio, wait_until, warc_files, warc_records,
    warcio_check, Env, Reply, Req, Site,
};

fn page(req: &Req) -> Reply {
    match req.path.as_str() {
        "/robots.txt" => Reply::text(
            "User-agent: *\nDisallow: /private\nSitemap: https://www.site.test/sitemap.xml\n",
        ),
        "/" => Reply::html(
            r#"<a href="/a">a</a> <a href="b">b</a> <a href="/private/x">p</a>
               <a href="http://elsewhere.example/">out of scope</a>"#,
        ),
        "/a" => Reply::html(r#"<a href="/c">c</a>"#),
        "/b" => Reply::redirect(301, "/d"),
        "/c" | "/d" | "/seed2" => Reply::html("leaf"),
        _ => Reply::not_found(),
    }
}

#[test]
fn crawl_end_to_end() {
    require_warcio();
    let site = Site::start(page);
    // Env::new also runs `frontierd config check` on the file
    let env = Env::new(&[
        ("fetch", "workers", "4"),
        ("fetch", "total_timeout", "\"10s\""),
        ("scope", "follow_links", "true"),
        ("scope", "max_depth", "3"),
        ("scope", "mode", "\"same-host\""),
    ]);
    let mut daemon = env.start();
    let (status, body) = daemon.get("/healthz");
    assert_eq!(status, 200, "{body}");

    // seeds through the spool (written in tmp, renamed into incoming) and through the API
    let base = site.base("www.site.test");
    env.spool(
        "seeds.txt",
        format!("# seeds\n{base}/\n\nnot a url\n").as_bytes(),
    );
    let api_url = format!("{}/seed2", site.base("api.site.test"));
    let answer = daemon.submit(&[
        api_url.clone(),
        format!("{api_url}#frag"),
        "ftp://x.site.test/".to_string(),
    ]);
    assert_eq!(answer["accepted"], 1, "{answer}");
    assert_eq!(answer["duplicate"], 1, "{answer}");
    assert_eq!(answer["rejected"], 1, "{answer}");

    let expected = [
        (format!("{base}/"), "fetched"),
        (format!("{base}/a"), "fetched"),
        (format!("{base}/b"), "redirected"),
        (format!("{base}/c"), "fetched"),
        (format!("{base}/d"), "fetched"),
        (format!("{base}/private/x"), "blocked-by-robots"),
        (api_url.clone(), "fetched"),
        ("not a url".to_string(), "rejected"),
    ];
    wait_until(
        "every URL in the crawl log",
        Duration::from_secs(60),
        || {
            let log = env.crawl_log();
            expected.iter().all(|(u, o)| logged(&log, u, o))
        },
    );
    let log = env.crawl_log();
    assert!(
        !log.iter().any(|l| l["url"]
            .as_str()
            .unwrap_or("")
            .contains("elsewhere.example")),
        "out-of-scope link was followed"
    );
    let root = log
        .iter()
        .find(|l| l["url"] == format!("{base}/"))
        .expect("root in the crawl log");
    assert_eq!(root["status"], 200);
    assert!(root["bytes"].as_u64().unwrap_or(0) > 0, "{root}");

    // spool bookkeeping
    let spool = env.data.join("spool");
    wait_until("the spool file in done/", Duration::from_secs(10), || {
        spool.join("done").join("seeds.txt").exists()
    });
    let rejected = std::fs::read_to_string(spool.join("rejected").join("seeds.txt")).unwrap();
    assert!(rejected.contains("4\t"), "line number recorded: {rejected}");
    assert!(rejected.contains("not a url"), "{rejected}");

    // metrics
    let metrics = daemon.metrics();
    for name in [
        "frontierd_urls_accepted_total",
        "frontierd_urls_duplicate_total",
        "frontierd_urls_rejected_total",
        "frontierd_urls_queued",
        "frontierd_robots_hosts{state=\"fresh\"}",
        "frontierd_robots_fetches_total",
        "frontierd_page_fetches_total{class=\"2xx\"}",
        "frontierd_page_fetches_total{class=\"3xx\"}",
        "frontierd_fetched_bytes_total",
        "frontierd_fetch_latency_seconds_bucket",
        "frontierd_politeness_wait_seconds_bucket",
        "frontierd_hosts_in_backoff",
        "frontierd_crawl_delays_clamped",
        "frontierd_warc_bytes_written_total",
        "frontierd_in_flight",
        "frontierd_store_size_bytes",
    ] {
        assert!(metrics.contains(name), "metric {name} missing:\n{metrics}");
    }

    // admin API
    let (status, hosts) = daemon.get("/v1/hosts?state=fresh&limit=10");
    assert_eq!(status, 200);
    assert!(hosts.contains("www.site.test"), "{hosts}");
    let (status, host) = daemon.get("/v1/hosts/www.site.test");
    assert_eq!(status, 200, "{host}");
    let hv: serde_json::Value = serde_json::from_str(&host).unwrap();
    assert_eq!(hv["origins"][0]["robots_state"], "fresh", "{host}");
    assert_eq!(
        hv["origins"][0]["sitemaps"][0], "https://www.site.test/sitemap.xml",
        "{host}"
    );
    let (status, paused) = http(&daemon.admin, "POST", "/v1/hosts/www.site.test/pause", b"");
    assert_eq!(status, 200);
    assert!(paused.contains("\"paused\": true"), "{paused}");
    let (status, stats) = daemon.get("/v1/stats");
    assert_eq!(status, 200);
    let sv: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(sv["pages_fetched"].as_u64().unwrap_or(0) >= 6, "{stats}");

    // the CLI client
    let out = Command::new(frontierd_bin())
        .args(["hosts", "--config"])
        .arg(&env.config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("www.site.test"));

    // the periodic INFO line (stats_interval = 1s)
    wait_until(
        "the periodic progress line",
        Duration::from_secs(10),
        || env.daemon_log().contains("progress"),
    );

    // SIGTERM: clean exit, no .open file
    daemon.signal(libc::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(30))
        .expect("daemon did not exit after SIGTERM");
    assert!(status.success(), "exit {status:?}\n{}", env.daemon_log());
    drop(daemon);

    let (gz, open) = warc_files(&env.warc_dir());
    assert!(open.is_empty(), "{open:?}");
    assert!(!gz.is_empty(), "no WARC file");
    let mut records = Vec::new();
    for f in &gz {
        if let Err(e) = warcio_check(f) {
            panic!("warcio check {}: {e}", f.display());
        }
        records.extend(warc_records(f));
    }
    // robots.txt fetches are archived too
    let has = |uri: &str| records.iter().any(|(_, u)| u == uri);
    assert!(
        has(&format!("{base}/robots.txt")),
        "robots.txt not in WARC: {records:?}"
    );
    assert!(has(&format!("{base}/c")), "{records:?}");
}
