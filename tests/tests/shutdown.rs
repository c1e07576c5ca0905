//! Scenario 6: SIGTERM mid-crawl exits 0 within the grace period (a fetch hanging past it
//! is abandoned), leaves no `.open` WARC file, and a restart finishes the crawl without
//! refetching any URL completed before the stop.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use frontierd_e2e::{logged, wait_until, warc_files, Env, Reply, Site};

const GRACE: Duration = Duration::from_secs(3);
/// Process teardown after the grace period (closing the WARC file, flushing the store).
const TEARDOWN: Duration = Duration::from_secs(5);

#[test]
fn sigterm_then_restart_finishes_without_refetching() {
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            return Reply::text("User-agent: *\nAllow: /\n");
        }
        // the first request to the hanging host outlives the grace period
        if req.host == "hang.site.test" && req.nth == 0 {
            return Reply::html("late").delayed(Duration::from_secs(60));
        }
        Reply::html(format!("{} {}", req.host, req.path)).delayed(Duration::from_millis(150))
    });
    let env = Env::new(&[
        ("fetch", "workers", "8"),
        ("fetch", "shutdown_grace", "\"3s\""),
        ("fetch", "total_timeout", "\"120s\""),
        ("politeness", "min_delay", "\"100ms\""),
        ("politeness", "max_delay", "\"1s\""),
    ]);
    let mut urls = Vec::new();
    for h in 0..4 {
        let base = site.base(&format!("s{h}.site.test"));
        for p in 0..25 {
            urls.push(format!("{base}/p{p}"));
        }
    }
    let hang = format!("{}/slow", site.base("hang.site.test"));
    urls.push(hang.clone());

    let mut daemon = env.start();
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], urls.len(), "{answer}");
    wait_until(
        "a third of the crawl and the hanging fetch",
        Duration::from_secs(60),
        || {
            env.crawl_log().len() >= urls.len() / 3
                && site
                    .hits_for("hang.site.test")
                    .iter()
                    .any(|h| h.path == "/slow")
        },
    );
    let term = Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit(GRACE + TEARDOWN).unwrap_or_else(|| {
        panic!(
            "no exit {:?} after SIGTERM (grace {GRACE:?})",
            GRACE + TEARDOWN
        )
    });
    eprintln!("exit {status} after {:?}", term.elapsed());
    assert!(status.success(), "exit {status}\n{}", env.daemon_log());
    drop(daemon);
    let (_, open) = warc_files(&env.warc_dir());
    assert!(open.is_empty(), "open WARC files after SIGTERM: {open:?}");

    let before = env.crawl_log();
    let done_before: HashSet<String> = before
        .iter()
        .map(|l| l["url"].as_str().unwrap().to_string())
        .collect();
    assert!(
        done_before.len() < urls.len(),
        "the crawl finished before the SIGTERM"
    );
    assert!(
        !done_before.contains(&hang),
        "the hanging fetch did not hang"
    );
    let restart = Instant::now();

    let daemon = env.start();
    wait_until("the rest of the crawl", Duration::from_secs(90), || {
        let log = env.crawl_log();
        urls.iter().all(|u| logged(&log, u, "fetched"))
    });
    assert!(daemon.healthy());
    let mut after_restart: BTreeMap<String, usize> = BTreeMap::new();
    for h in site.hits() {
        if h.path != "/robots.txt" && h.start >= restart {
            *after_restart
                .entry(format!("http://{}:{}{}", h.host, site.port, h.path))
                .or_default() += 1;
        }
    }
    for (u, n) in &after_restart {
        assert!(
            !done_before.contains(u),
            "{u} completed before the stop, fetched again"
        );
        assert_eq!(*n, 1, "{u} fetched {n} times after the restart");
    }
    // every URL not completed before the stop was fetched after it
    for u in &urls {
        assert!(
            done_before.contains(u) || after_restart.contains_key(u),
            "{u}"
        );
    }
    // one crawl-log line per URL over both runs
    let log = env.crawl_log();
    let mut per_url: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &log {
        *per_url.entry(l["url"].as_str().unwrap()).or_default() += 1;
    }
    assert!(per_url.values().all(|n| *n == 1), "{per_url:?}");
}
