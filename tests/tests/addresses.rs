//! The address policy seen from outside: the default configuration sends no request to a
//! site on loopback (not one connection), and with `[addresses] allow` a crawl reaches
//! only what is allowed: a link or redirect to a refused address, a `[resolve]` name on a
//! refused address and the daemon's own admin API get a `blocked-address` line each and
//! no request. Every site here is on 127.0.0.0/8; refused addresses are proved by the
//! daemon's refusal and by listeners there that never see a connection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use frontierd_e2e::{lines_for, metric, Env, Reply, Site};

/// Waits for `done`; on time-out fails with the crawl log and the daemon's log.
fn wait_for(env: &Env, what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(30) {
            panic!(
                "timed out waiting for {what}\ncrawl log: {:#?}\n{}",
                env.crawl_log(),
                env.daemon_log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn blocked_reason(log: &[serde_json::Value], url: &str) -> Option<String> {
    lines_for(log, url)
        .into_iter()
        .find(|l| l["outcome"] == "blocked-address")
        .map(|l| l["reason"].as_str().unwrap_or("").to_string())
}

#[test]
fn default_policy_sends_no_request_to_loopback() {
    let site = Site::start(|_req| Reply::html("<a href=/next>next</a>"));
    // the suite's default allow is left out: the built-in policy as shipped
    let env = Env::new(&[("addresses", "allow", "")]);
    let daemon = env.start();
    let urls = vec![
        format!("{}/named", site.base("a.site.test")), // [resolve] name -> 127.0.0.1
        format!("http://127.0.0.1:{}/literal", site.port), // IP literal
        format!("http://[::ffff:127.0.0.1]:{}/mapped", site.port), // IPv4-mapped form
        format!("http://{}/metrics", daemon.admin),    // the daemon's own API
    ];
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], 4, "{answer}");
    wait_for(&env, "a blocked-address line for every URL", || {
        let log = env.crawl_log();
        urls.iter().all(|u| blocked_reason(&log, u).is_some())
    });
    let log = env.crawl_log();
    let reason = blocked_reason(&log, &urls[0]).unwrap();
    assert!(
        reason.contains(&format!("127.0.0.1:{}", site.port)) && reason.contains("rule loopback"),
        "the reason names the address and the rule: {reason}"
    );
    assert!(blocked_reason(&log, &urls[2])
        .unwrap()
        .contains("rule loopback"));
    // the daemon's own listener is named as such, whatever else it is
    assert!(blocked_reason(&log, &urls[3])
        .unwrap()
        .contains("rule own-listener"));
    for line in log.iter().filter(|l| l["outcome"] == "blocked-address") {
        assert_eq!(line["status"], serde_json::Value::Null, "{line}");
        assert_eq!(
            line["ip"],
            serde_json::Value::Null,
            "no connection made: {line}"
        );
    }
    assert_eq!(
        site.connections(),
        0,
        "the site got a connection: {:?}",
        site.hits()
    );
    let metrics = daemon.metrics();
    let pages = metric(
        &metrics,
        "frontierd_address_refusals_total{fetch=\"page\",rule=\"loopback\"}",
    )
    .unwrap_or(0.0);
    assert!(pages >= 3.0, "refusals counted by rule: {pages}");
    assert!(
        metric(
            &metrics,
            "frontierd_address_refusals_total{fetch=\"robots\",rule=\"loopback\"}"
        )
        .unwrap_or(0.0)
            >= 1.0
    );
    // no back-off, no retry: each URL has exactly one line
    for u in &urls {
        assert_eq!(lines_for(&log, u).len(), 1, "{u}");
    }
}

#[test]
fn allowed_sites_are_crawled_and_refused_addresses_are_not_reached() {
    // 127.0.0.2 stands for an internal address: only 127.0.0.1 is allowed
    let internal = Site::start_on("127.0.0.2", |_req| Reply::html("secret"));
    let admin = Arc::new(Mutex::new(String::new()));
    let admin_in_page = admin.clone();
    let internal_port = internal.port;
    let site = Site::start(move |req| match req.path.as_str() {
        "/" => {
            let admin = admin_in_page.lock().unwrap().clone();
            let admin_port = admin.rsplit(':').next().unwrap_or("0").to_string();
            Reply::html(format!(
                "<a href=/ok>ok</a>\
                 <a href=\"http://{admin}/metrics\">metrics</a>\
                 <a href=\"http://admin.site.test:{admin_port}/v1/stats\">stats</a>\
                 <a href=\"http://inside.site.test:{internal_port}/db\">db</a>\
                 <a href=/redir>redir</a>"
            ))
        }
        "/redir" => Reply::redirect(301, &format!("http://127.0.0.2:{internal_port}/redirected")),
        _ => Reply::html("fine"),
    });
    let env = Env::new(&[
        ("addresses", "allow", "[\"127.0.0.1/32\"]"),
        ("scope", "follow_links", "true"),
        ("scope", "mode", "\"any\""),
        ("resolve", "\"inside.site.test\"", "[\"127.0.0.2\"]"),
    ]);
    let daemon = env.start();
    *admin.lock().unwrap() = daemon.admin.clone();
    let admin_port = daemon.admin.rsplit(':').next().unwrap().to_string();
    let start = format!("{}/", site.base("www.site.test"));
    daemon.submit(std::slice::from_ref(&start));

    let own_metrics = format!("http://{}/metrics", daemon.admin);
    let own_stats = format!("http://admin.site.test:{admin_port}/v1/stats");
    let inside = format!("http://inside.site.test:{internal_port}/db");
    let redirected = format!("http://127.0.0.2:{internal_port}/redirected");
    let ok = format!("{}/ok", site.base("www.site.test"));
    wait_for(&env, "the crawl to settle", || {
        let log = env.crawl_log();
        [&own_metrics, &own_stats, &inside, &redirected]
            .iter()
            .all(|u| blocked_reason(&log, u).is_some())
            && lines_for(&log, &ok)
                .iter()
                .any(|l| l["outcome"] == "fetched")
    });
    let log = env.crawl_log();
    for u in [&own_metrics, &own_stats] {
        let reason = blocked_reason(&log, u).unwrap();
        assert!(reason.contains("rule own-listener"), "{u}: {reason}");
    }
    for u in [&inside, &redirected] {
        let reason = blocked_reason(&log, u).unwrap();
        assert!(
            reason.contains(&format!("127.0.0.2:{internal_port}"))
                && reason.contains("rule loopback"),
            "{u}: {reason}"
        );
    }
    assert_eq!(
        internal.connections(),
        0,
        "the internal address was connected to"
    );
    let paths: Vec<String> = site.hits().into_iter().map(|h| h.path).collect();
    for p in ["/robots.txt", "/", "/ok", "/redir"] {
        assert!(paths.iter().any(|x| x == p), "{p} not fetched: {paths:?}");
    }
    // nothing of the admin API went into the crawl as a fetched page
    assert!(!log.iter().any(
        |l| l["outcome"] == "fetched" && l["url"].as_str().unwrap_or("").contains(&admin_port)
    ));
}
