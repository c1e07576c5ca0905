//! The crawl log as archive operators read it (docs/crawl-log.md): each line says where the
//! URL came from (depth, via, discovery, Heritrix hop path), what came back (content type,
//! peer IP) and where it was archived (WARC file, offset of the response record, payload
//! digest), and a redirect chain stops at `scope.max_redirect_hops`.
//!
//! The WARC side is checked against the files themselves: seek to the logged offset in the
//! logged file, gunzip one member, and it is the response record of that URL with that
//! payload digest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use frontierd_e2e::{lines_for, logged, metric, wait_until, warc_record_at, Env, Reply, Req, Site};
use serde_json::{json, Value};

/// Fields every line has (null where they do not apply), old ones first.
const FIELDS: [&str; 16] = [
    "time",
    "url",
    "status",
    "bytes",
    "duration_ms",
    "outcome",
    "reason",
    "depth",
    "via",
    "discovery",
    "hop_path",
    "content_type",
    "ip",
    "payload_digest",
    "warc_file",
    "warc_offset",
];

fn page(req: &Req) -> Reply {
    match req.path.as_str() {
        "/robots.txt" => Reply::text("User-agent: *\nDisallow: /private\n"),
        "/" => Reply::html(r#"<a href="/a">a</a> <a href="/r">r</a> <a href="/private">p</a>"#),
        "/a" => Reply::html("page a"),
        "/r" => Reply::redirect(302, "/b"),
        "/b" => Reply::Full {
            status: 200,
            headers: vec![(
                "Content-Type".into(),
                "Application/JSON; charset=utf-8".into(),
            )],
            body: br#"{"page":"b"}"#.to_vec(),
        },
        _ => Reply::not_found(),
    }
}

fn stop(daemon: &mut frontierd_e2e::Daemon, env: &Env) {
    daemon.signal(libc::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(30))
        .expect("no exit after SIGTERM");
    assert!(status.success(), "exit {status}\n{}", env.daemon_log());
}

fn one<'a>(log: &'a [Value], url: &str) -> &'a Value {
    let lines = lines_for(log, url);
    assert_eq!(lines.len(), 1, "one line for {url}: {log:#?}");
    lines[0]
}

/// A seed, a link, a redirect and a robots.txt drop, across a SIGTERM restart: the link and
/// the redirecting page are queued in the first run and fetched in the second, so their via
/// and hop path come back from the store.
#[test]
fn crawl_log_says_where_each_url_came_from_and_where_it_was_archived() {
    let first_run = Arc::new(AtomicBool::new(true));
    let stall = first_run.clone();
    let site = Site::start(move |req| {
        // first run: only the seed (and robots.txt) answer, so nothing found on it can
        // complete before the stop
        if stall.load(Ordering::SeqCst) && req.path != "/" && req.path != "/robots.txt" {
            return Reply::Stall;
        }
        page(req)
    });
    let env = Env::new(&[
        ("scope", "follow_links", "true"),
        ("scope", "max_depth", "2"),
        ("fetch", "total_timeout", "\"120s\""),
        ("fetch", "shutdown_grace", "\"1s\""),
    ]);
    let base = site.base("log.site.test");
    let url = |p: &str| format!("{base}{p}");

    let mut daemon = env.start();
    let answer = daemon.submit(&[url("/")]);
    assert_eq!(answer["accepted"], 1, "{answer}");
    wait_until("the seed in the crawl log", Duration::from_secs(60), || {
        logged(&env.crawl_log(), &url("/"), "fetched")
    });
    stop(&mut daemon, &env);
    drop(daemon);
    let before = env.crawl_log();
    for p in ["/a", "/r", "/b"] {
        assert!(
            lines_for(&before, &url(p)).is_empty(),
            "{p} completed in the first run: {before:?}"
        );
    }

    first_run.store(false, Ordering::SeqCst);
    let mut daemon = env.start();
    wait_until(
        "the link, the redirect and its target",
        Duration::from_secs(60),
        || {
            let log = env.crawl_log();
            logged(&log, &url("/a"), "fetched")
                && logged(&log, &url("/r"), "redirected")
                && logged(&log, &url("/b"), "fetched")
                && logged(&log, &url("/private"), "blocked-by-robots")
        },
    );
    stop(&mut daemon, &env);
    let log = env.crawl_log();
    for line in &log {
        for f in FIELDS {
            assert!(line.get(f).is_some(), "no {f:?} in {line}");
        }
    }

    // (url, depth, via, discovery, hop path, content type)
    let want = [
        ("/", 0, Value::Null, "seed", "", json!("text/html")),
        ("/a", 1, json!(url("/")), "link", "L", json!("text/html")),
        ("/r", 1, json!(url("/")), "link", "L", Value::Null),
        (
            "/b",
            1,
            json!(url("/r")),
            "redirect",
            "LR",
            json!("application/json"),
        ),
    ];
    for (path, depth, via, discovery, hops, content_type) in want {
        let l = one(&log, &url(path));
        assert_eq!(l["depth"], depth, "{l}");
        assert_eq!(l["via"], via, "{l}");
        assert_eq!(l["discovery"], discovery, "{l}");
        assert_eq!(l["hop_path"], hops, "{l}");
        assert_eq!(l["content_type"], content_type, "{l}");
        assert_eq!(l["ip"], "127.0.0.1", "{l}");
        // the logged WARC location holds this URL's response record, with the logged digest
        let file = env
            .warc_dir()
            .join(l["warc_file"].as_str().expect("warc_file"));
        let offset = l["warc_offset"].as_u64().expect("warc_offset");
        let (fields, block) = warc_record_at(&file, offset);
        assert_eq!(fields["warc-type"], "response", "{l}");
        assert_eq!(fields["warc-target-uri"], url(path), "{l}");
        assert_eq!(fields["warc-payload-digest"], l["payload_digest"], "{l}");
        assert!(
            l["payload_digest"]
                .as_str()
                .is_some_and(|d| d.starts_with("sha1:") && d.len() == 37),
            "{l}"
        );
        assert_eq!(fields["warc-ip-address"], "127.0.0.1", "{l}");
        let status = l["status"].as_u64().unwrap();
        assert!(
            block.starts_with(format!("HTTP/1.1 {status} ").as_bytes()),
            "{l}: {}",
            String::from_utf8_lossy(&block)
        );
    }
    // the seed was archived in the first run's file, the others in the second's
    assert_ne!(
        one(&log, &url("/"))["warc_file"],
        one(&log, &url("/b"))["warc_file"]
    );
    let (_, b_block) = warc_record_at(
        &env.warc_dir()
            .join(one(&log, &url("/b"))["warc_file"].as_str().unwrap()),
        one(&log, &url("/b"))["warc_offset"].as_u64().unwrap(),
    );
    assert!(b_block.ends_with(br#"{"page":"b"}"#));

    // a URL dropped by robots.txt keeps where it was found; nothing was fetched or archived
    let p = one(&log, &url("/private"));
    assert_eq!(
        (&p["depth"], &p["via"], &p["hop_path"], &p["discovery"]),
        (&json!(1), &json!(url("/")), &json!("L"), &json!("link")),
        "{p}"
    );
    for f in [
        "content_type",
        "ip",
        "payload_digest",
        "warc_file",
        "warc_offset",
    ] {
        assert_eq!(p[f], Value::Null, "{f} of {p}");
    }
}

/// `/loop/N` redirects to `/loop/N+1` forever: every target is a fresh URL, so only the
/// chain limit ends it. The seed links to the loop, so the chain's hop path starts with `L`
/// and the link does not count as a redirect.
#[test]
fn redirect_loop_stops_at_max_redirect_hops() {
    redirect_loop(Some(4));
}

/// Without the key, the documented default (10) holds.
#[test]
fn redirect_loop_stops_at_the_default_limit() {
    redirect_loop(None);
}

/// Crawl the loop with `scope.max_redirect_hops` set to `configured` (None: the default, 10).
fn redirect_loop(configured: Option<u32>) {
    let limit = configured.unwrap_or(10);
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            return Reply::text("User-agent: *\nAllow: /\n");
        }
        if req.path == "/" {
            return Reply::html(r#"<a href="/loop/0">loop</a>"#);
        }
        match req
            .path
            .strip_prefix("/loop/")
            .and_then(|n| n.parse::<u32>().ok())
        {
            Some(n) => Reply::redirect(302, &format!("/loop/{}", n + 1)),
            None => Reply::not_found(),
        }
    });
    let limit_value = limit.to_string();
    let mut config = vec![("scope", "follow_links", "true")];
    if configured.is_some() {
        config.push(("scope", "max_redirect_hops", &limit_value));
    }
    let env = Env::new(&config);
    let base = site.base("loop.site.test");
    let url = |p: &str| format!("{base}{p}");
    let daemon = env.start();
    daemon.submit(&[url("/")]);
    let last = url(&format!("/loop/{limit}"));
    wait_until("the redirect-limit line", Duration::from_secs(60), || {
        logged(&env.crawl_log(), &last, "redirect-limit")
    });
    // nothing queued or in flight: the chain is over, not just slow
    wait_until("the crawl to drain", Duration::from_secs(30), || {
        let (_, stats) = daemon.get("/v1/stats");
        let s: Value = serde_json::from_str(&stats).unwrap_or_default();
        s["queued"] == 0 && s["in_flight"] == 0
    });

    let chain: Vec<String> = site
        .hits()
        .into_iter()
        .filter(|h| h.path.starts_with("/loop/"))
        .map(|h| h.path)
        .collect();
    let want: Vec<String> = (0..=limit).map(|n| format!("/loop/{n}")).collect();
    assert_eq!(
        chain, want,
        "the chain is requested limit + 1 times, in order"
    );

    let log = env.crawl_log();
    for n in 0..limit {
        let l = one(&log, &url(&format!("/loop/{n}")));
        assert_eq!(l["outcome"], "redirected", "{l}");
        assert_eq!(l["hop_path"], format!("L{}", "R".repeat(n as usize)), "{l}");
        // redirects keep the depth of the page that linked to the chain
        assert_eq!(l["depth"], 1, "{l}");
    }
    let stop = one(&log, &last);
    assert_eq!(stop["status"], 302, "{stop}");
    assert_eq!(stop["hop_path"], format!("L{}", "R".repeat(limit as usize)));
    let reason = stop["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("scope.max_redirect_hops = {limit}"))
            && reason.contains(&url(&format!("/loop/{}", limit + 1))),
        "{reason}"
    );
    assert!(lines_for(&log, &url(&format!("/loop/{}", limit + 1))).is_empty());
    let text = daemon.metrics();
    assert_eq!(
        metric(&text, "frontierd_redirect_chains_stopped_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "frontierd_crawl_outcomes_total{outcome=\"redirect-limit\"}"
        ),
        Some(1.0)
    );
}
