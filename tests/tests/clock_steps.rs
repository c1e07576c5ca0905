//! The wall clock stepped under a running daemon (NTP stepping it, a virtual machine
//! resumed, an operator's `date -s`) changes neither a host's gap nor the crawl's pace.
//! The daemon's wall clock is stepped with libfaketime (its monotonic clock left alone),
//! the site's log is read on the test's monotonic clock: a step forward must not let
//! pages out early, a step back must not hold the host for the hour it went back.

use std::path::PathBuf;
use std::time::Duration;

use frontierd_e2e::{wait_until, Env, Reply, Req, Site};

const CRAWL_DELAY: Duration = Duration::from_secs(1);

/// libfaketime's shared object (Debian's `faketime` package); FRONTIERD_LIBFAKETIME
/// names another.
fn libfaketime() -> PathBuf {
    if let Some(p) = std::env::var_os("FRONTIERD_LIBFAKETIME") {
        return PathBuf::from(p);
    }
    let debian = PathBuf::from("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1");
    assert!(
        debian.is_file(),
        "{} is missing: `apt-get install -y faketime` (what .ci/run does), or set \
         FRONTIERD_LIBFAKETIME to libfaketimeMT.so.1",
        debian.display()
    );
    debian
}

const GAP: Duration = Duration::from_millis(300);

fn site(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        if req.host.starts_with("busy.") {
            return Reply::text("User-agent: *\nAllow: /\n");
        }
        return Reply::text("User-agent: *\nCrawl-delay: 1\n");
    }
    Reply::html("<html><body>a page</body></html>")
}

#[test]
fn a_wall_clock_step_neither_breaks_a_gap_nor_stalls_the_crawl() {
    let env = Env::new(&[
        ("fetch", "workers", "2"),
        ("politeness", "min_delay", "\"300ms\""),
        ("politeness", "max_delay", "\"300ms\""),
    ]);
    let site = Site::start(site);
    // the host with a crawl-delay, and a busier one whose pages wake the dispatcher
    // every gap (with nothing else to do it would sleep out the first host's gap on the
    // monotonic clock whatever the wall clock said)
    let host = "steps.site.test";
    let busy = "busy.site.test";
    let base = site.base(host);
    let mut urls: Vec<String> = (0..8).map(|i| format!("{base}/p{i}")).collect();
    let busy_base = site.base(busy);
    urls.extend((0..60).map(|i| format!("{busy_base}/b{i}")));
    let offset = env.dir.path().join("faketime-offset");
    std::fs::write(&offset, "+0s\n").unwrap();
    let lib = libfaketime();
    let d = env.start_with_env(
        &[],
        &[
            ("LD_PRELOAD", lib.as_os_str()),
            ("FAKETIME_TIMESTAMP_FILE", offset.as_os_str()),
            ("FAKETIME_NO_CACHE", "1".as_ref()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".as_ref()),
        ],
    );
    d.submit(&urls);
    let pages = || {
        site.hits_for(host)
            .iter()
            .filter(|h| h.path != "/robots.txt")
            .count()
    };
    let wanted = urls.len() - 60;
    wait_until("two pages fetched", Duration::from_secs(20), || {
        pages() >= 2
    });
    // a minute forward: on the wall clock every gap would be over at once
    std::fs::write(&offset, "+60s\n").unwrap();
    wait_until("five pages fetched", Duration::from_secs(20), || {
        pages() >= 5
    });
    // an hour back: on the wall clock the host's next turn would be an hour away
    std::fs::write(&offset, "-3600s\n").unwrap();
    wait_until(
        "every page fetched after the clock went back an hour",
        Duration::from_secs(30),
        || pages() >= wanted,
    );
    drop(d);
    for (host, gap) in [(host, CRAWL_DELAY), (busy, GAP)] {
        let hits = site.hits_for(host);
        for pair in hits.windows(2) {
            let (before, next) = (&pair[0], &pair[1]);
            let sent = before.sent.expect("every request answered");
            let waited = next.start.saturating_duration_since(sent);
            assert!(
                waited + Duration::from_millis(5) >= gap,
                "{host}{} asked {waited:?} after the answer to {} (gap {gap:?})\n{hits:#?}",
                next.path,
                before.path
            );
        }
    }
}
