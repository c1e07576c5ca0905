//! The daemon's own log as an operator reads it: the crawl says when it has drained, the
//! placeholder contact in the user agent is warned about, and a recovered WARC file is
//! reported in words, not Rust debug output.

use std::time::Duration;

use frontierd_e2e::{frontierd_bin, logged, wait_until, Env, Reply, Site};

const DRAINED: &str = "crawl drained: nothing queued, nothing in flight";

#[test]
fn crawl_drained_is_logged_once_per_drain() {
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            Reply::not_found()
        } else {
            Reply::html("page")
        }
    });
    let env = Env::new(&[("log", "stats_interval", "\"1s\"")]);
    let daemon = env.start();
    let progress_lines = || env.daemon_log_count(" progress");
    // an empty daemon has drained from the start
    wait_until("the first drained line", Duration::from_secs(30), || {
        env.daemon_log_count(DRAINED) == 1
    });

    // URLs of a paused host stay queued: not drained
    let (status, body) = daemon.post("/v1/hosts/held.site.test/pause?create=true");
    assert_eq!(status, 200, "{body}");
    let held = format!("{}/held", site.base("held.site.test"));
    let free = format!("{}/free", site.base("free.site.test"));
    daemon.submit(&[held.clone(), free.clone()]);
    wait_until("the free URL fetched", Duration::from_secs(30), || {
        logged(&env.crawl_log(), &free, "fetched")
    });
    let seen = progress_lines();
    wait_until("two more progress lines", Duration::from_secs(30), || {
        progress_lines() >= seen + 2
    });
    assert_eq!(
        env.daemon_log_count(DRAINED),
        1,
        "drained while a paused host still had a URL queued:\n{}",
        env.daemon_log()
    );

    // resumed and fetched: drained again, once
    let (status, body) = daemon.post("/v1/hosts/held.site.test/resume");
    assert_eq!(status, 200, "{body}");
    wait_until("the second drained line", Duration::from_secs(30), || {
        env.daemon_log_count(DRAINED) == 2
    });
    assert!(logged(&env.crawl_log(), &held, "fetched"));
    let seen = progress_lines();
    wait_until("two more progress lines", Duration::from_secs(30), || {
        progress_lines() >= seen + 2
    });
    assert_eq!(env.daemon_log_count(DRAINED), 2, "{}", env.daemon_log());
    let m = daemon.metrics();
    assert!(m.contains("frontierd_crawl_drained_total 2"), "{m}");
}

#[test]
fn placeholder_contact_is_warned_about_at_start_and_in_config_check() {
    let placeholder = "\"frontierd/0.1 (+https://example.org/bot)\"";
    let env = Env::new(&[("fetch", "user_agent", placeholder)]);
    let check = std::process::Command::new(frontierd_bin())
        .args(["config", "check"])
        .arg(&env.config)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("https://example.org/bot"),
        "{stderr}"
    );
    let _daemon = env.start();
    wait_until("the WARN line", Duration::from_secs(30), || {
        env.daemon_log()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("placeholder"))
    });

    let own = Env::new(&[(
        "fetch",
        "user_agent",
        "\"archivebot/1.0 (+https://archive.site.test/bot)\"",
    )]);
    let check = std::process::Command::new(frontierd_bin())
        .args(["config", "check"])
        .arg(&own.config)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    assert!(
        !String::from_utf8_lossy(&check.stderr).contains("placeholder"),
        "{check:?}"
    );
}

#[test]
fn recovered_warc_file_is_reported_in_words() {
    let env = Env::new(&[]);
    std::fs::create_dir_all(env.warc_dir()).unwrap();
    let leftover = env
        .warc_dir()
        .join("frontierd-20200101000000000-00001.warc.gz.open");
    std::fs::write(&leftover, b"not gzip at all").unwrap();
    let _daemon = env.start();
    let log = env.daemon_log();
    let line = log
        .lines()
        .find(|l| l.contains("WARC file left open"))
        .unwrap_or_else(|| panic!("no recovery line:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("removed") && line.contains(&leftover.display().to_string()),
        "{line}"
    );
    assert!(
        !line.contains("Removed(") && !line.contains("r="),
        "Rust debug output: {line}"
    );
}
