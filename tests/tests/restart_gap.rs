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

/// Ten SIGKILLs at random moments, each restart at once, over six hosts (one with
/// `Crawl-delay: 2`): every request to a host, robots.txt included, waits its gap after the
/// answer before it (the crawl-delay for the one that has it), and a request the kill cut
/// off is asked again no sooner than the gap after the kill. Pages asked twice are at most
/// those the kills could have had in flight (workers x kills). Judged from the site's log.
#[test]
fn random_kills_with_immediate_restarts_never_break_a_gap() {
    const KILLS: usize = 10;
    const WORKERS: usize = 3;
    let gap = Duration::from_millis(400);
    let crawl_delay = Duration::from_secs(2);
    let env = Env::new(&[
        ("fetch", "workers", &WORKERS.to_string()),
        ("politeness", "min_delay", "\"400ms\""),
        ("politeness", "max_delay", "\"400ms\""),
    ]);
    let mut rng = frontierd_e2e::Rng::new();
    let delays: Vec<u64> = (0..64).map(|_| rng.next_u64() % 150).collect();
    let site = Site::start(move |req: &Req| {
        if req.path == "/robots.txt" {
            let body = if req.host.starts_with("slow.") {
                "User-agent: *\nCrawl-delay: 2\n"
            } else {
                "User-agent: *\nAllow: /\n"
            };
            return Reply::text(body);
        }
        let d = delays[(req.path.len() + 7 * req.host.len() + 13 * req.nth) % delays.len()];
        Reply::html("<html><body>a page</body></html>").delayed(Duration::from_millis(d))
    });
    let hosts = ["slow", "h1", "h2", "h3", "h4", "h5"].map(|h| format!("{h}.kill.site.test"));
    let mut urls = Vec::new();
    for h in &hosts {
        let base = site.base(h);
        urls.extend((0..8).map(|i| format!("{base}/p{i}")));
    }
    let mut d = env.start();
    d.submit(&urls);
    let mut kills = Vec::new();
    for _ in 0..KILLS {
        std::thread::sleep(rng.ms(100, 900));
        d.kill9();
        kills.push(Instant::now());
        d = env.start();
    }
    let fetched = || -> std::collections::HashSet<String> {
        site.hits()
            .into_iter()
            .filter(|h| h.path != "/robots.txt")
            .map(|h| format!("http://{}:{}{}", h.host, site.port, h.path))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    while fetched().len() < urls.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let missing: Vec<&String> = urls.iter().filter(|u| !fetched().contains(*u)).collect();
    assert!(
        missing.is_empty(),
        "not fetched after the kills: {missing:?}\nslow host's requests: {:#?}\ncrawl log: {:#?}\ndaemon log: {}",
        site.hits_for("slow.kill.site.test"),
        env.crawl_log()
            .into_iter()
            .filter(|l| missing.iter().any(|m| l["url"].as_str() == Some(m.as_str())))
            .collect::<Vec<_>>(),
        env.daemon_log()
    );
    drop(d);
    let mut asked_twice = 0;
    for host in &hosts {
        let hits = site.hits_for(host);
        let want = if host.starts_with("slow.") {
            crawl_delay
        } else {
            gap
        };
        let mut pages = std::collections::HashSet::new();
        for h in &hits {
            if h.path != "/robots.txt" && !pages.insert(h.path.clone()) {
                asked_twice += 1;
            }
        }
        frontierd_e2e::assert_gaps_across_kills(&hits, host, want, gap, &kills);
    }
    assert!(
        asked_twice <= KILLS * WORKERS,
        "{asked_twice} pages asked twice over {KILLS} kills of a daemon with {WORKERS} workers"
    );
}
