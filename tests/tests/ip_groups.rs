//! Politeness per IP address, measured by the servers: 400 host names on one address keep
//! the address's gap and in-flight limit; hosts on other addresses are not held by it; a
//! name that does not resolve is logged as a DNS failure and backs off while the others go
//! on; `frontierd hosts --ip` and `GET /v1/ip-groups` show the groups.
//!
//! The daemon resolves a new host before its first robots.txt, so even that request waits
//! for the host's IP group (docs/politeness.md, "IP groups"); where a host's address is
//! only learnt from its fetches, the checks look at every request after each host's first.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use frontierd_e2e::{logged, metric, wait_until, Env, Hit, Reply, Req, Site};

/// The server stamps a request when it has read its head: scheduling noise between the
/// daemon's decision and that stamp can shorten an observed gap by this much.
const STAMP_TOLERANCE: Duration = Duration::from_millis(25);

fn pages(req: &Req, delay: Duration) -> Reply {
    if req.path == "/robots.txt" {
        return Reply::text("User-agent: *\nAllow: /\n");
    }
    Reply::html(format!("page {} of {}", req.path, req.host)).delayed(delay)
}

/// Every request but each host's first (the one that told the daemon the address), in
/// arrival order.
fn after_first_contact(hits: &[Hit]) -> Vec<Hit> {
    let mut seen: HashMap<&str, ()> = HashMap::new();
    let mut out = Vec::new();
    for h in hits {
        if seen.insert(h.host.as_str(), ()).is_some() {
            out.push(h.clone());
        }
    }
    out.sort_by_key(|h| h.start);
    out
}

/// Smallest gap between two consecutive request starts.
fn min_gap(hits: &[Hit]) -> Duration {
    hits.windows(2)
        .map(|w| w[1].start.duration_since(w[0].start))
        .min()
        .unwrap_or(Duration::MAX)
}

/// Shortest time from a request start to the start `n - 1` requests later.
fn min_span(hits: &[Hit], n: usize) -> Duration {
    hits.windows(n)
        .map(|w| w[n - 1].start.duration_since(w[0].start))
        .min()
        .unwrap_or(Duration::MAX)
}

/// Most requests the server held at once between reading a request and beginning its
/// answer: the client had no answer yet, so they were all in flight.
fn max_in_flight(hits: &[Hit]) -> usize {
    let mut events: Vec<(Instant, i32)> = Vec::new();
    for h in hits {
        let Some(sent) = h.sent else { continue };
        events.push((h.start, 1));
        events.push((sent, -1));
    }
    // at one instant, an answer begun counts before a request read
    events.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        max = max.max(now);
    }
    max as usize
}

/// Ten requests in a row span at least nine gaps, no two closer than half a gap (with
/// `pairs`), at most `max` in flight, and `max` reached (the limit held them, not a lack
/// of work).
fn assert_paced(what: &str, hits: &[Hit], ip_delay: Duration, max: usize, pairs: bool) {
    // the gap is kept when a request is handed out; its arrival at the server can be late
    // by scheduling jitter, so one pair may look closer than ip_delay. Over any ten in a
    // row the jitter cancels: they span at least nine gaps (the old code: ~3 ms apart).
    let span = min_span(hits, 10);
    assert!(
        span + STAMP_TOLERANCE >= ip_delay * 9,
        "{what}: ten requests to 127.0.0.1 within {span:?} (ip_delay {ip_delay:?})"
    );
    let gap = min_gap(hits);
    assert!(
        !pairs || gap >= ip_delay / 2,
        "{what}: two requests to 127.0.0.1 only {gap:?} apart (ip_delay {ip_delay:?})"
    );
    let most = max_in_flight(hits);
    assert!(
        most <= max,
        "{what}: {most} requests in flight at 127.0.0.1 at once (max_in_flight_per_ip {max})"
    );
    assert_eq!(most, max, "{what}: the address was kept busy");
}

/// 400 new names on one address: every request, each name's first robots.txt included,
/// keeps the address's gap and in-flight limit. The daemon resolves a new name before its
/// robots.txt (docs/politeness.md), so no request goes before its IP group knows it.
#[test]
fn four_hundred_names_on_one_address_share_its_gap_and_slots() {
    const NAMES: usize = 400;
    const IP_DELAY: Duration = Duration::from_millis(50);
    const MAX_PER_IP: usize = 2;
    // slower than two gaps: without the in-flight limit more than 2 would overlap
    const ANSWER: Duration = Duration::from_millis(250);
    let site = Site::start(|r| {
        if r.path == "/robots.txt" {
            return Reply::text("User-agent: *\nAllow: /\n").delayed(ANSWER);
        }
        pages(r, ANSWER)
    });
    let env = Env::new(&[
        ("fetch", "workers", "32"),
        ("politeness", "max_in_flight_per_ip", "2"),
        ("politeness", "ip_delay", "\"50ms\""),
    ]);
    let urls: Vec<String> = (0..NAMES)
        .map(|i| format!("{}/page", site.base(&format!("n{i:03}.site.test"))))
        .collect();
    let daemon = env.start();
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], NAMES, "{answer}");
    wait_until("every page fetched", Duration::from_secs(300), || {
        let log = env.crawl_log();
        urls.iter().all(|u| logged(&log, u, "fetched"))
    });
    let mut hits = site.hits();
    assert_eq!(hits.len(), 2 * NAMES, "robots.txt and one page per name");
    hits.sort_by_key(|h| h.start);
    // the first robots.txt of each name, from the server's own log
    let robots: Vec<Hit> = hits
        .iter()
        .filter(|h| h.path == "/robots.txt")
        .cloned()
        .collect();
    assert_eq!(robots.len(), NAMES);
    // the daemon's very first request carries the fetcher's one-time setup: it reaches the
    // server late (tens of ms, measured), so the pair it starts is judged without it
    assert_paced("robots.txt", &robots[1..], IP_DELAY, MAX_PER_IP, true);
    // robots.txt and pages mixed: a robots.txt opens a new connection, a page reuses it,
    // so one pair's arrivals can be closer than their starts; ten in a row cannot
    assert_paced("every request", &hits, IP_DELAY, MAX_PER_IP, false);
    let m = daemon.metrics();
    let waits = metric(&m, "frontierd_ip_waits_total").unwrap_or(0.0);
    assert!(waits > 0.0, "hosts waited for their address");
    assert_eq!(
        metric(&m, "frontierd_host_resolutions_total{result=\"resolved\"}"),
        Some(NAMES as f64),
        "{m}"
    );
}

#[test]
fn other_addresses_are_not_held_and_the_groups_are_shown() {
    const IP_DELAY: Duration = Duration::from_secs(1);
    const PAGES: usize = 3;
    let two = Site::start_on("127.0.0.2", |r| pages(r, Duration::ZERO));
    let three = Site::start_on("127.0.0.3", |r| pages(r, Duration::ZERO));
    let env = Env::new(&[
        ("politeness", "max_in_flight_per_ip", "1"),
        ("politeness", "ip_delay", "\"1s\""),
        ("resolve", "\"*.two.test\"", "[\"127.0.0.2\"]"),
        ("resolve", "\"*.three.test\"", "[\"127.0.0.3\"]"),
    ]);
    let hosts = [
        ("a.two.test", &two),
        ("b.two.test", &two),
        ("c.three.test", &three),
        ("d.three.test", &three),
    ];
    let mut urls = Vec::new();
    for (name, site) in &hosts {
        for p in 0..PAGES {
            urls.push(format!("http://{name}:{}/p{p}", site.port));
        }
    }
    let daemon = env.start();
    daemon.submit(&urls);
    // while they crawl: the CLI shows each address with its two hosts
    let mut shown = String::new();
    wait_until(
        "frontierd hosts --ip shows both groups",
        Duration::from_secs(20),
        || {
            let out = env.cli("hosts").arg("--ip").output().unwrap();
            assert!(out.status.success(), "{out:?}");
            shown = String::from_utf8_lossy(&out.stdout).into_owned();
            shown
                .lines()
                .any(|l| l.starts_with("127.0.0.2 ") && l.contains("a.two.test,b.two.test"))
                && shown
                    .lines()
                    .any(|l| l.starts_with("127.0.0.3 ") && l.contains("c.three.test,d.three.test"))
        },
    );
    assert!(shown.contains("ip_delay 1000 ms"), "{shown}");
    let (status, body) = daemon.get("/v1/ip-groups");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let groups = v["ip_groups"].as_array().unwrap();
    assert!(
        groups.iter().any(|g| g["ip"] == "127.0.0.2"
            && g["hosts"] == serde_json::json!(["a.two.test", "b.two.test"])
            && g["next_allowed"].is_string()),
        "{body}"
    );
    wait_until("every page fetched", Duration::from_secs(60), || {
        let log = env.crawl_log();
        urls.iter().all(|u| logged(&log, u, "fetched"))
    });
    // each address kept its own gap ...
    let at_two = after_first_contact(&two.hits());
    let at_three = after_first_contact(&three.hits());
    assert_eq!(at_two.len(), 2 * PAGES);
    assert_eq!(at_three.len(), 2 * PAGES);
    for (ip, hits) in [("127.0.0.2", &at_two), ("127.0.0.3", &at_three)] {
        let gap = min_gap(hits);
        assert!(
            gap + STAMP_TOLERANCE >= IP_DELAY,
            "{ip}: two requests {gap:?} apart"
        );
    }
    // ... and not the other's: one shared gap would need 11 gaps for the 12 requests
    let mut all: Vec<Hit> = at_two.iter().chain(&at_three).cloned().collect();
    all.sort_by_key(|h| h.start);
    let span = all[all.len() - 1].start.duration_since(all[0].start);
    assert!(
        span < IP_DELAY * 9,
        "12 requests over two addresses took {span:?}: the addresses held each other"
    );
    // the host record names its address, after the crawl too
    let (_, body) = daemon.get("/v1/hosts/c.three.test");
    let host: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(host["ip"], "127.0.0.3", "{body}");
}

#[test]
fn a_name_that_does_not_resolve_backs_off_while_others_go_on() {
    let site = Site::start(|r| pages(r, Duration::ZERO));
    let env = Env::new(&[]);
    let good: Vec<String> = (0..5)
        .map(|p| format!("{}/p{p}", site.base("ok.site.test")))
        .collect();
    let dead = "http://nx.invalid/page".to_string();
    let daemon = env.start();
    let mut urls = vec![dead.clone()];
    urls.extend(good.iter().cloned());
    daemon.submit(&urls);
    wait_until(
        "the resolving host crawled",
        Duration::from_secs(30),
        || {
            let log = env.crawl_log();
            good.iter().all(|u| logged(&log, u, "fetched"))
        },
    );
    wait_until("the DNS failure logged", Duration::from_secs(10), || {
        env.daemon_log_count("DNS lookup failed") >= 1
    });
    let log = env.daemon_log();
    let line = log
        .lines()
        .find(|l| l.contains("DNS lookup failed"))
        .unwrap_or_default();
    assert!(
        line.contains("nx.invalid") && line.contains("nxdomain"),
        "{line}"
    );
    let m = daemon.metrics();
    assert_eq!(
        metric(&m, "frontierd_fetch_dns_failures_total{fetch=\"robots\"}"),
        Some(1.0),
        "one robots.txt fetch failed on DNS, and the host backs off instead of retrying"
    );
    assert!(metric(&m, "frontierd_dns_lookups_total{result=\"nxdomain\"}").unwrap_or(0.0) >= 1.0);
    // ok.site.test came from [resolve] (once per connection: kept alive after)
    assert!(metric(&m, "frontierd_dns_lookups_total{result=\"table\"}").unwrap_or(0.0) >= 1.0);
    // the host backs off: its robots.txt is tried again only after robots.retry_initial
    // (60 s by default), its URL stays queued meanwhile, and its address is not known
    let (_, body) = daemon.get("/v1/hosts/nx.invalid");
    let host: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(host["queued"], 1, "{body}");
    assert!(host["ip"].is_null(), "{body}");
    let origin = &host["origins"][0];
    assert!(
        origin["last_fetch"]["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("Dns")),
        "{body}"
    );
    let (last, next) = (
        origin["last_fetch"]["at"].as_str().unwrap_or_default(),
        origin["next_fetch"].as_str().unwrap_or_default(),
    );
    assert!(
        seconds_of_day(next) >= seconds_of_day(last) + 30
            || seconds_of_day(next) < seconds_of_day(last),
        "next robots.txt attempt {next}, last {last}: {body}"
    );
}

/// Seconds since midnight of an RFC 3339 UTC time ("2026-11-23T15:31:02.123Z").
fn seconds_of_day(t: &str) -> u64 {
    let hms = t.split('T').nth(1).unwrap_or_default();
    let mut parts = hms.split(':');
    let h: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let m: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let s: f64 = parts
        .next()
        .map(|p| p.trim_end_matches('Z'))
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    h * 3600 + m * 60 + s as u64
}

/// The figure (docs/benchmarks.md, "Requests per second at one address"): 400 host
/// names on one address, every politeness key at the binary's default, 20 pages per name;
/// the median of the requests the server saw in each second of a 15-second window. Run by
/// hand against each binary (`FRONTIERD_BIN=<old or new frontierd>`, `--ignored
/// --nocapture`): a measurement, not a check.
#[test]
#[ignore]
fn requests_per_second_at_one_address_figure() {
    const NAMES: usize = 400;
    const WINDOW_S: usize = 15;
    let site = Site::start(|r| pages(r, Duration::ZERO));
    let knows_ip_keys = {
        let out = std::process::Command::new(frontierd_e2e::frontierd_bin())
            .args(["config", "default"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("ip_delay")
    };
    // the binary's own politeness defaults (an older binary knows no per-IP keys)
    let mut overrides = vec![
        ("politeness", "min_delay", ""),
        ("politeness", "max_delay", ""),
        ("politeness", "delay_factor", ""),
        ("fetch", "workers", "16"),
    ];
    // (left out either way: the new binary's defaults, or keys the old one does not know)
    overrides.push(("politeness", "max_in_flight_per_ip", ""));
    overrides.push(("politeness", "ip_delay", ""));
    let env = Env::new(&overrides);
    let urls: Vec<String> = (0..NAMES)
        .flat_map(|i| {
            let base = site.base(&format!("n{i:03}.site.test"));
            (0..20).map(move |p| format!("{base}/p{p}"))
        })
        .collect();
    let daemon = env.start();
    daemon.submit(&urls);
    wait_until(
        "the window's end",
        Duration::from_secs(WINDOW_S as u64 + 60),
        || {
            let hits = site.hits();
            let first = hits
                .iter()
                .find(|h| h.path != "/robots.txt")
                .map(|h| h.start);
            first.is_some_and(|t| t.elapsed() > Duration::from_secs(WINDOW_S as u64 + 1))
        },
    );
    let hits = site.hits();
    let first = hits
        .iter()
        .find(|h| h.path != "/robots.txt")
        .map(|h| h.start)
        .unwrap();
    let mut per_second = vec![0usize; WINDOW_S];
    for h in &hits {
        if let Some(d) = h.start.checked_duration_since(first) {
            if let Some(n) = per_second.get_mut(d.as_secs() as usize) {
                *n += 1;
            }
        }
    }
    let mut sorted = per_second.clone();
    sorted.sort_unstable();
    eprintln!(
        "binary {} (per-IP keys: {knows_ip_keys}): requests per second at 127.0.0.1 over {WINDOW_S} s: {per_second:?}, median {}",
        frontierd_e2e::frontierd_bin().display(),
        sorted[WINDOW_S / 2]
    );
    drop(daemon);
}
