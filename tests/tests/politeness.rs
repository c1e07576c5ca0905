//! Scenario 1: politeness, measured by the servers. 20 hosts x 30 pages on two ports: for
//! every host robots.txt is the first request, consecutive requests are never closer than
//! `min_delay` (or a larger robots `Crawl-delay`), never more than one request in flight per
//! host, and no disallowed URL is ever requested.

use std::collections::HashSet;
use std::time::Duration;

use frontierd_e2e::{logged, wait_until, Env, Reply, Site};

const HOSTS: usize = 20;
const PAGES: usize = 30;
const PRIVATE: usize = 3;
const MIN_DELAY_MS: u64 = 200;
/// The host whose robots.txt asks for `Crawl-delay: 1`.
const SLOW_CRAWL: &str = "h07.site.test";
/// The host whose pages take longer than `min_delay` to answer: a second request in flight
/// would show up at the server.
const SLOW_PAGES: &str = "h03.site.test";
/// The daemon counts time in whole milliseconds.
const CLOCK_SLACK: Duration = Duration::from_millis(2);

fn handler(req: &frontierd_e2e::Req) -> Reply {
    if req.path == "/robots.txt" {
        let mut body = String::from("User-agent: *\nDisallow: /private\n");
        if req.host == SLOW_CRAWL {
            body.push_str("Crawl-delay: 1\n");
        }
        return Reply::text(body);
    }
    if req.path.starts_with("/p") {
        let page = Reply::html(format!("page {} of {}", req.path, req.host));
        if req.host == SLOW_PAGES {
            return page.delayed(Duration::from_millis(350));
        }
        return page;
    }
    Reply::not_found()
}

#[test]
fn politeness_20_hosts_x_30_pages() {
    let sites = [Site::start(handler), Site::start(handler)];
    let env = Env::new(&[
        ("fetch", "workers", "24"),
        ("politeness", "min_delay", "\"200ms\""),
        ("politeness", "max_delay", "\"30s\""),
        ("politeness", "delay_factor", "0.0"),
        ("politeness", "max_in_flight_per_host", "1"),
    ]);
    let host = |h: usize| format!("h{h:02}.site.test");
    let site_of = |h: usize| &sites[h % 2];
    let mut pages = Vec::new();
    let mut private = Vec::new();
    for h in 0..HOSTS {
        let base = site_of(h).base(&host(h));
        for p in 0..PAGES {
            pages.push(format!("{base}/p{p}"));
        }
        for p in 0..PRIVATE {
            private.push(format!("{base}/private/x{p}"));
        }
    }
    let t0 = std::time::Instant::now();
    let daemon = env.start();
    eprintln!("started in {:?}", t0.elapsed());
    // half through the spool, half through the API
    let all: Vec<String> = pages.iter().chain(private.iter()).cloned().collect();
    let (spooled, posted) = all.split_at(all.len() / 2);
    env.spool("seeds.txt", (spooled.join("\n") + "\n").as_bytes());
    let answer = daemon.submit(posted);
    assert_eq!(answer["accepted"], posted.len(), "{answer}");

    wait_until(
        "every URL in the crawl log",
        Duration::from_secs(150),
        || {
            let log = env.crawl_log();
            pages.iter().all(|u| logged(&log, u, "fetched"))
                && private.iter().all(|u| logged(&log, u, "blocked-by-robots"))
        },
    );
    assert!(daemon.healthy());
    eprintln!("crawled in {:?}", t0.elapsed());

    let delay = Duration::from_millis(MIN_DELAY_MS);
    for h in 0..HOSTS {
        let name = host(h);
        let hits = site_of(h).hits_for(&name);
        eprintln!(
            "{name}: {} requests over {:?}",
            hits.len(),
            hits.last().unwrap().start - hits[0].start
        );
        assert_eq!(
            hits[0].path, "/robots.txt",
            "{name}: first request {:?}",
            hits[0]
        );
        assert_eq!(
            hits.iter().filter(|x| x.path == "/robots.txt").count(),
            1,
            "{name}: robots.txt fetched more than once"
        );
        let paths: HashSet<&str> = hits.iter().map(|x| x.path.as_str()).collect();
        for p in 0..PAGES {
            assert!(
                paths.contains(format!("/p{p}").as_str()),
                "{name}: /p{p} never requested"
            );
        }
        for x in &hits {
            assert!(
                !x.path.starts_with("/private"),
                "{name}: disallowed {} requested",
                x.path
            );
            assert!(
                x.in_flight <= 1,
                "{name}: {} requests in flight at {}",
                x.in_flight,
                x.path
            );
        }
        // the pause between an answer and the next request: the server stamps `sent`
        // before the daemon can have the answer, and `start` after the next request came
        for (i, w) in hits.windows(2).enumerate() {
            let sent = w[0].sent.expect("every answer here is a whole response");
            let gap = w[1].start - sent;
            assert!(
                gap + CLOCK_SLACK >= delay,
                "{name}: {} then {} only {gap:?} apart (min_delay {delay:?})",
                w[0].path,
                w[1].path
            );
            // the crawl-delay is known once robots.txt is parsed: from the 2nd page on
            if name == SLOW_CRAWL && i >= 1 {
                assert!(
                    gap + CLOCK_SLACK >= Duration::from_secs(1),
                    "{name}: crawl-delay 1 not honoured: {} then {} {gap:?} apart",
                    w[0].path,
                    w[1].path
                );
            }
        }
    }
    // a disallowed URL is never requested, on any host
    for s in &sites {
        assert!(s.hits().iter().all(|x| !x.path.starts_with("/private")));
    }
}
