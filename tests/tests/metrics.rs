//! `frontierd_politeness_wait_seconds`: one observation per page, the wait politeness imposed
//! on it. Three pages of one host with a 500 ms minimum gap: pages 2 and 3 each wait the
//! whole gap after the previous page, so the sum is at least two gaps; the slow robots.txt
//! answer before the first page is not politeness and stays out of it.

use std::time::Duration;

use frontierd_e2e::{logged, metric, wait_until, Env, Reply, Site};

const PAGES: usize = 3;
const GAP: Duration = Duration::from_millis(500);
const ROBOTS_DELAY: Duration = Duration::from_secs(2);

#[test]
fn politeness_wait_counts_each_page_and_its_gap() {
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            return Reply::text("User-agent: *\nAllow: /\n").delayed(ROBOTS_DELAY);
        }
        Reply::html(format!("page {}", req.path))
    });
    let env = Env::new(&[
        ("politeness", "min_delay", "\"500ms\""),
        ("politeness", "max_delay", "\"30s\""),
        ("politeness", "delay_factor", "0.0"),
        ("politeness", "max_in_flight_per_host", "1"),
    ]);
    let base = site.base("gap.site.test");
    let urls: Vec<String> = (0..PAGES).map(|i| format!("{base}/p{i}")).collect();
    let daemon = env.start();
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], PAGES, "{answer}");
    wait_until("every page fetched", Duration::from_secs(60), || {
        let log = env.crawl_log();
        urls.iter().all(|u| logged(&log, u, "fetched"))
    });

    let text = daemon.metrics();
    let count = metric(&text, "frontierd_politeness_wait_seconds_count")
        .unwrap_or_else(|| panic!("no politeness_wait_seconds_count:\n{text}"));
    let sum = metric(&text, "frontierd_politeness_wait_seconds_sum")
        .unwrap_or_else(|| panic!("no politeness_wait_seconds_sum:\n{text}"));
    assert_eq!(count, PAGES as f64, "one observation per page:\n{text}");
    let gaps = (PAGES - 1) as f64 * GAP.as_secs_f64();
    assert!(
        sum >= gaps,
        "sum {sum} s < {gaps} s: the gaps between the pages are missing"
    );
    // at most one gap per page (and a little clock slack): the 2 s robots.txt fetch is not in it
    let most = PAGES as f64 * GAP.as_secs_f64() + 0.1;
    assert!(
        sum <= most,
        "sum {sum} s > {most} s: more than politeness (the robots.txt fetch?) counted"
    );
    // one observation per request the site saw: retries would show here too
    let pages_requested = site
        .hits_for("gap.site.test")
        .iter()
        .filter(|h| h.path != "/robots.txt")
        .count();
    assert_eq!(pages_requested, PAGES);
}
