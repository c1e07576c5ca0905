//! Scenario 2: robots.txt states, measured by the servers. One daemon, one site, one host
//! per behaviour: 500 (held, then the shortened fallback window without a good copy allows
//! all), 503 then 200 (pages follow the new rules), 429 + Retry-After (the retry waits),
//! 404 (all crawled), 6 redirect hops (treated as 404: all crawled), a timeout (held until
//! the fallback), a good copy then 500s (held, then the fallback obeys the old copy), and a
//! short max-age (robots.txt fetched again before the next page).

use std::time::{Duration, Instant};

use frontierd_e2e::{logged, wait_until, Env, Hit, Reply, Req, Site};

/// `robots.fallback_after` in the test config: well above the 1-5 s retries, so several
/// failures come before the fallback (any positive duration is allowed, with a warning).
const FALLBACK: Duration = Duration::from_secs(15);
const RETRY_AFTER_S: u64 = 3;
/// The daemon counts time in whole milliseconds.
const SLACK: Duration = Duration::from_millis(2);

fn robots(req: &Req) -> Reply {
    let disallow = |path: &str| Reply::text(format!("User-agent: *\nDisallow: {path}\n"));
    match req.host.split('.').next().unwrap_or("") {
        "e500" => Reply::status(500, "oops"),
        "e503" if req.nth == 0 => Reply::status(503, "later"),
        "e503" => disallow("/no"),
        "e429" if req.nth == 0 => {
            Reply::status(429, "slow down").with_header("Retry-After", &RETRY_AFTER_S.to_string())
        }
        "e429" => Reply::text("User-agent: *\nAllow: /\n"),
        "e404" => Reply::not_found(),
        "eredir" => Reply::redirect(301, "/r1"),
        "etimeout" => Reply::Stall,
        "egood" if req.nth == 0 => disallow("/secret").with_header("Cache-Control", "max-age=2"),
        "egood" => Reply::status(500, "broken now"),
        "efresh" => disallow("/hidden").with_header("Cache-Control", "max-age=2"),
        _ => Reply::not_found(),
    }
}

fn handler(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        return robots(req);
    }
    if let Some(n) = req.path.strip_prefix("/r") {
        if let Ok(n) = n.parse::<u32>() {
            // /r1 .. /r5 redirect on; /r6 would say "disallow everything"
            return if n < 6 {
                Reply::redirect(301, &format!("/r{}", n + 1))
            } else {
                Reply::text("User-agent: *\nDisallow: /\n")
            };
        }
    }
    Reply::html(format!("{} on {}", req.path, req.host))
}

fn first(hits: &[Hit], path: &str) -> Hit {
    hits.iter()
        .find(|h| h.path == path)
        .unwrap_or_else(|| panic!("{path} never requested: {hits:?}"))
        .clone()
}

fn pages(hits: &[Hit]) -> Vec<&Hit> {
    hits.iter()
        .filter(|h| h.path != "/robots.txt" && !h.path.starts_with("/r"))
        .collect()
}

#[test]
fn robots_states_end_to_end() {
    let site = Site::start(handler);
    let env = Env::new(&[
        ("fetch", "workers", "8"),
        ("fetch", "total_timeout", "\"2s\""),
        ("robots", "freshness", "\"60s\""),
        ("robots", "max_age_min", "\"0s\""),
        ("robots", "max_age_max", "\"60s\""),
        ("robots", "retry_initial", "\"1s\""),
        ("robots", "retry_max", "\"5s\""),
        ("robots", "fallback_after", "\"15s\""),
        ("robots", "fallback_retry_interval", "\"60s\""),
        ("robots", "hold_recheck", "\"1s\""),
    ]);
    let u = |host: &str, path: &str| format!("{}{path}", site.base(&format!("{host}.site.test")));
    let daemon = env.start();
    let t0 = Instant::now();
    let seeds: Vec<String> = [
        ("e500", "/a"),
        ("e500", "/b"),
        ("e503", "/yes1"),
        ("e503", "/yes2"),
        ("e503", "/no1"),
        ("e429", "/a"),
        ("e404", "/a"),
        ("e404", "/b"),
        ("e404", "/c"),
        ("eredir", "/a"),
        ("eredir", "/b"),
        ("etimeout", "/a"),
        ("egood", "/p1"),
        ("efresh", "/a"),
    ]
    .iter()
    .map(|(h, p)| u(h, p))
    .collect();
    let answer = daemon.submit(&seeds);
    assert_eq!(answer["accepted"], seeds.len(), "{answer}");

    // a good copy that expires, then: more URLs for egood (its robots.txt now fails) and
    // efresh (its robots.txt must be fetched again first)
    wait_until(
        "the first pages of egood and efresh",
        Duration::from_secs(30),
        || {
            let log = env.crawl_log();
            logged(&log, &u("egood", "/p1"), "fetched")
                && logged(&log, &u("efresh", "/a"), "fetched")
        },
    );
    let expiry = |host: &str| {
        first(&site.hits_for(host), "/robots.txt").end.unwrap() + Duration::from_millis(2500)
    };
    let wait_for = expiry("egood.site.test").max(expiry("efresh.site.test"));
    std::thread::sleep(wait_for.saturating_duration_since(Instant::now()));
    let later = vec![
        u("egood", "/p2"),
        u("egood", "/secret/x"),
        u("efresh", "/b"),
        u("efresh", "/hidden/x"),
    ];
    let answer = daemon.submit(&later);
    assert_eq!(answer["accepted"], later.len(), "{answer}");

    wait_until(
        "every URL's outcome",
        FALLBACK + Duration::from_secs(60),
        || {
            let log = env.crawl_log();
            let fetched = [
                ("e500", "/a"),
                ("e500", "/b"),
                ("e503", "/yes1"),
                ("e503", "/yes2"),
                ("e429", "/a"),
                ("e404", "/a"),
                ("e404", "/b"),
                ("e404", "/c"),
                ("eredir", "/a"),
                ("eredir", "/b"),
                ("etimeout", "/a"),
                ("egood", "/p2"),
                ("efresh", "/b"),
            ];
            let blocked = [
                ("e503", "/no1"),
                ("egood", "/secret/x"),
                ("efresh", "/hidden/x"),
            ];
            fetched
                .iter()
                .all(|(h, p)| logged(&log, &u(h, p), "fetched"))
                && blocked
                    .iter()
                    .all(|(h, p)| logged(&log, &u(h, p), "blocked-by-robots"))
        },
    );
    eprintln!("all outcomes after {:?}", t0.elapsed());
    assert!(daemon.healthy());
    // the short timings were accepted, with a warning logged at start and counted
    let log = env.daemon_log();
    assert!(
        log.contains("WARN") && log.contains("robots.fallback_after = \"15s\""),
        "{log}"
    );
    // (freshness and fallback_after; the test user agent's placeholder contact adds one)
    let warnings = frontierd_e2e::metric(&daemon.metrics(), "frontierd_config_warnings");
    assert!(warnings.unwrap_or(0.0) >= 2.0, "{warnings:?}");

    let hits = |h: &str| site.hits_for(&format!("{h}.site.test"));
    for h in [
        "e500", "e503", "e429", "e404", "eredir", "etimeout", "egood", "efresh",
    ] {
        assert_eq!(hits(h)[0].path, "/robots.txt", "{h}: {:?}", hits(h));
    }

    // 500: no page while it answers 500, until the fallback window (no good copy: allow all)
    let e500 = hits("e500");
    let since = first(&e500, "/robots.txt").sent.unwrap();
    assert!(
        e500.iter().filter(|h| h.path == "/robots.txt").count() >= 2,
        "500 retried: {e500:?}"
    );
    for p in pages(&e500) {
        assert!(
            p.start + SLACK >= since + FALLBACK,
            "e500: {} requested {:?} after the first 500, before the fallback window",
            p.path,
            p.start - since
        );
    }

    // timeout: same
    let et = hits("etimeout");
    let since = first(&et, "/robots.txt").start;
    for p in pages(&et) {
        assert!(
            p.start + SLACK >= since + FALLBACK,
            "etimeout: {} requested {:?} after the first robots.txt timeout",
            p.path,
            p.start - since
        );
    }

    // 503 then 200: pages only after the second robots.txt, by its rules
    let e503 = hits("e503");
    let robots: Vec<&Hit> = e503.iter().filter(|h| h.path == "/robots.txt").collect();
    assert!(robots.len() >= 2, "{e503:?}");
    for p in pages(&e503) {
        assert!(
            p.start >= robots[1].start,
            "e503: {} before the 200: {e503:?}",
            p.path
        );
        assert!(
            !p.path.starts_with("/no"),
            "e503: disallowed {} requested",
            p.path
        );
    }

    // 429 with Retry-After: 3: the next robots.txt request waits at least that long
    let e429 = hits("e429");
    let robots: Vec<&Hit> = e429.iter().filter(|h| h.path == "/robots.txt").collect();
    assert!(robots.len() >= 2, "{e429:?}");
    let waited = robots[1].start - robots[0].sent.unwrap();
    assert!(
        waited + SLACK >= Duration::from_secs(RETRY_AFTER_S),
        "e429: retried after {waited:?}, Retry-After was {RETRY_AFTER_S}s"
    );
    for p in pages(&e429) {
        assert!(
            p.start >= robots[1].start,
            "e429: {} before the 200",
            p.path
        );
    }

    // 6 redirect hops: 5 followed, the 6th not: a 404, all crawled
    let er = hits("eredir");
    for n in 1..=5 {
        first(&er, &format!("/r{n}"));
    }
    assert!(
        er.iter().all(|h| h.path != "/r6"),
        "6th hop followed: {er:?}"
    );

    // a good copy, then 500s: held until the fallback window, then the old copy is obeyed
    let eg = hits("egood");
    let robots: Vec<&Hit> = eg.iter().filter(|h| h.path == "/robots.txt").collect();
    assert!(robots.len() >= 2, "{eg:?}");
    let p2 = first(&eg, "/p2");
    assert!(
        p2.start + SLACK >= robots[1].sent.unwrap() + FALLBACK,
        "egood: /p2 requested {:?} after the first 500, before the fallback window",
        p2.start - robots[1].sent.unwrap()
    );
    assert!(eg.iter().all(|h| !h.path.starts_with("/secret")), "{eg:?}");

    // max-age=2: robots.txt fetched again before the next page, not before it expired
    let ef = hits("efresh");
    let robots: Vec<&Hit> = ef.iter().filter(|h| h.path == "/robots.txt").collect();
    assert!(robots.len() >= 2, "robots.txt not refetched: {ef:?}");
    let b = first(&ef, "/b");
    assert!(
        robots[1].start < b.start,
        "efresh: /b before the refetch: {ef:?}"
    );
    assert!(
        robots[1].start + SLACK >= robots[0].sent.unwrap() + Duration::from_secs(2),
        "efresh: refetched before max-age=2 ran out: {ef:?}"
    );
    assert!(ef.iter().all(|h| !h.path.starts_with("/hidden")), "{ef:?}");
}
