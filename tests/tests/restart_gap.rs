//! A restart is never rude: a daemon killed with SIGKILL while a request was in flight (or
//! right after an answer) and started again at once waits the site's gap before asking it
//! anything again. What the crash lost (the request's start, its completion) had not
//! reached the store, so without the hold taken at every start the restarted daemon asked
//! again within milliseconds (issue 36). Judged from the site's own log: the time between
//! the kill, or an answer, and the next request to the host.

use std::time::{Duration, Instant};

use frontierd_e2e::{wait_until, Env, Reply, Req, Site};

const GAP: Duration = Duration::from_secs(1);

fn page(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        return Reply::text("User-agent: *\nAllow: /\n");
    }
    // slow enough for the kill to fall while the first page is in flight
    Reply::html("<html><body>a page</body></html>").delayed(Duration::from_millis(600))
}

#[test]
fn a_restart_right_after_an_answer_waits_the_gap_before_asking_again() {
    let env = Env::new(&[
        ("fetch", "workers", "2"),
        ("politeness", "min_delay", "\"1s\""),
        ("politeness", "max_delay", "\"1s\""),
    ]);
    let site = Site::start(page);
    let base = site.base("gap.site.test");
    let urls: Vec<String> = (0..4).map(|i| format!("{base}/p{i}")).collect();
    let d = env.start();
    d.submit(&urls);
    // the first page asked for: kill while it is in flight, start again at once
    wait_until("a page asked for", Duration::from_secs(20), || {
        site.hits().iter().any(|h| h.path != "/robots.txt")
    });
    d.kill9();
    let killed = Instant::now();
    let asked_before = site.hits_for("gap.site.test").len();
    let d = env.start();
    wait_until("every page fetched", Duration::from_secs(30), || {
        let pages: std::collections::HashSet<String> = site
            .hits()
            .into_iter()
            .filter(|h| h.path != "/robots.txt")
            .map(|h| h.path)
            .collect();
        pages.len() == urls.len()
    });
    // the first request after the restart: at least the gap after the kill
    let hits = site.hits_for("gap.site.test");
    let first_after = &hits[asked_before];
    let after_kill = first_after.start.saturating_duration_since(killed);
    assert!(
        after_kill >= GAP.mul_f64(0.95),
        "{} asked {after_kill:?} after the kill\n{hits:#?}",
        first_after.path
    );
    // every request to the host, robots.txt included, at least the gap after the answer
    // before it began (the server's own clock); the request the kill cut off is judged
    // from the kill above (the server answered it to a client that was gone)
    for pair in hits.windows(2) {
        let (before, next) = (&pair[0], &pair[1]);
        let Some(sent) = before.sent else { continue };
        if before.start < killed && sent > killed {
            continue;
        }
        let waited = next.start.saturating_duration_since(sent);
        assert!(
            waited >= GAP.mul_f64(0.95),
            "{} asked {waited:?} after {} was answered (the kill was {:?} before the second)\n{hits:#?}",
            next.path,
            before.path,
            next.start.saturating_duration_since(killed),
        );
    }
    drop(d);
}
