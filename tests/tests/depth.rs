//! Link depth survives a restart: with `[scope] max_depth = 1`, the links found on the seed
//! (depth 1, one of them a redirect whose target keeps depth 1) are fetched after a restart,
//! and the links on those pages (depth 2) are never followed. A daemon that forgot depths at
//! the restart would count the depth-1 URLs as seeds and widen the crawl.
//!
//! No timing is guessed: in the first run every page but the seed stalls (the server never
//! answers it), so nothing past the seed can complete before the stop; the stop comes once the
//! crawl log shows the seed fetched, and the daemon logs a page only after the links found on
//! it are durable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use frontierd_e2e::{logged, wait_until, Env, Reply, Req, Site};

fn page(req: &Req) -> Reply {
    match req.path.as_str() {
        "/robots.txt" => Reply::text("User-agent: *\nAllow: /\n"),
        "/" => Reply::html(r#"<a href="/a">a</a> <a href="/r">r</a>"#),
        "/a" => Reply::html(r#"<a href="/a2">a2</a>"#),
        "/r" => Reply::redirect(301, "/b"),
        "/b" => Reply::html(r#"<a href="/b2">b2</a>"#),
        "/a2" | "/b2" => Reply::html("too deep"),
        _ => Reply::not_found(),
    }
}

#[test]
fn max_depth_holds_across_a_restart() {
    let first_run = Arc::new(AtomicBool::new(true));
    let stall = first_run.clone();
    let site = Site::start(move |req| {
        if stall.load(Ordering::SeqCst) && req.path != "/" && req.path != "/robots.txt" {
            return Reply::Stall;
        }
        page(req)
    });
    let env = Env::new(&[
        ("scope", "follow_links", "true"),
        ("scope", "max_depth", "1"),
        ("scope", "mode", "\"same-host\""),
        ("fetch", "total_timeout", "\"120s\""),
        ("fetch", "shutdown_grace", "\"1s\""),
    ]);
    let base = site.base("deep.site.test");
    let url = |p: &str| format!("{base}{p}");

    let mut daemon = env.start();
    let answer = daemon.submit(&[url("/")]);
    assert_eq!(answer["accepted"], 1, "{answer}");
    wait_until("the seed in the crawl log", Duration::from_secs(60), || {
        logged(&env.crawl_log(), &url("/"), "fetched")
    });
    daemon.signal(libc::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(20))
        .expect("no exit after SIGTERM");
    assert!(status.success(), "exit {status}\n{}", env.daemon_log());
    drop(daemon);
    let before = env.crawl_log();
    assert_eq!(
        before.len(),
        1,
        "only the seed completes in the first run: {before:?}"
    );

    first_run.store(false, Ordering::SeqCst);
    let daemon = env.start();
    wait_until(
        "the depth-1 pages after the restart",
        Duration::from_secs(60),
        || {
            let log = env.crawl_log();
            logged(&log, &url("/a"), "fetched")
                && logged(&log, &url("/r"), "redirected")
                && logged(&log, &url("/b"), "fetched")
        },
    );
    // Links found on a page are queued before the page is logged: once the three are logged
    // with nothing queued or in flight, the crawl is over.
    let (status, stats) = daemon.get("/v1/stats");
    assert_eq!(status, 200, "{stats}");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(
        stats["queued"], 0,
        "more URLs queued after the restart: {stats}"
    );
    // the one URL queued after the restart is the redirect target /b (the links on /a and
    // /b are one level too deep)
    assert_eq!(
        stats["accepted"], 1,
        "the restarted daemon queued more than the redirect target: {stats}"
    );
    let log = env.crawl_log();
    for deep in ["/a2", "/b2"] {
        assert!(
            !log.iter().any(|l| l["url"] == url(deep)),
            "{deep} (depth 2) was followed after the restart: {log:?}"
        );
        assert!(
            !site.hits().iter().any(|h| h.path == deep),
            "{deep} (depth 2) was requested after the restart"
        );
    }
}
