//! What a scraper sees on `GET /metrics` after a small crawl: `promtool check metrics` accepts
//! the default exposition (Prometheus text 0.0.4), OpenMetrics goes only to clients that ask
//! for it, clamped Crawl-delays are a counter, and every series the Grafana dashboard
//! (`deploy/grafana/frontierd.json`) queries is in the scrape, so the dashboard cannot rot.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use frontierd_e2e::{
    exchange, logged, metric, repo_root, wait_until, Daemon, Env, Reply, Req, Site,
};

/// What Prometheus 2.x sends when it scrapes.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn page(req: &Req) -> Reply {
    match (req.host.as_str(), req.path.as_str()) {
        // asks for more than `max_crawl_delay` below: clamped
        ("slow.site.test", "/robots.txt") => Reply::text("User-agent: *\nCrawl-delay: 5\n"),
        (_, "/robots.txt") => Reply::text("User-agent: *\nDisallow: /private\n"),
        (_, "/") => Reply::html(
            r#"<a href="/a">a</a> <a href="/b">b</a> <a href="/private/x">p</a>
               <a href="/missing">gone</a>"#,
        ),
        (_, "/b") => Reply::redirect(301, "/a"),
        (_, "/missing") => Reply::not_found(),
        _ => Reply::html("leaf"),
    }
}

/// A daemon that has crawled two small sites (a redirect, a 404, a robots.txt disallow, a
/// clamped Crawl-delay and a rejected URL among them).
struct Crawled {
    _site: Site,
    _env: Env,
    daemon: Daemon,
}

fn crawled() -> Crawled {
    let site = Site::start(page);
    let env = Env::new(&[
        ("scope", "follow_links", "true"),
        ("scope", "max_depth", "2"),
        ("politeness", "max_crawl_delay", "\"200ms\""),
        ("politeness", "crawl_delay_over_cap", "\"clamp\""),
    ]);
    let daemon = env.start();
    let www = site.base("www.site.test");
    let slow = site.base("slow.site.test");
    let answer = daemon.submit(&[
        format!("{www}/"),
        format!("{slow}/one"),
        format!("{slow}/two"),
        "not a url".to_string(),
    ]);
    assert_eq!(answer["accepted"], 3, "{answer}");
    let wanted = [
        format!("{www}/a"),
        format!("{slow}/one"),
        format!("{slow}/two"),
    ];
    wait_until("the small crawl", Duration::from_secs(60), || {
        let log = env.crawl_log();
        wanted.iter().all(|u| logged(&log, u, "fetched"))
            && log
                .iter()
                .any(|l| l["url"].as_str().is_some_and(|u| u.ends_with("/missing")))
    });
    Crawled {
        _site: site,
        _env: env,
        daemon,
    }
}

fn scrape(d: &Daemon, accept: Option<&str>) -> (String, String) {
    let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept", a)).into_iter().collect();
    let a = exchange(&d.admin, "GET", "/metrics", &headers, b"").expect("GET /metrics");
    assert_eq!(a.status, 200, "GET /metrics: {}", a.body);
    let ctype = a.header("content-type").unwrap_or("").to_string();
    (ctype, a.body)
}

fn promtool_installed() -> bool {
    let found = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        // .ci/run installs it: there, a missing tool is a failure, not a skip
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not installed (Debian: apt-get install prometheus)"
        );
        eprintln!(
            "SKIPPED: promtool is not installed, metrics not checked with it (Debian: apt-get install prometheus; .ci/run installs it)"
        );
    }
    found
}

/// Run promtool with `args` and `input` on stdin; (success, stdout + stderr).
fn run_promtool(args: &[&str], input: &[u8]) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool output");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn promtool_check_metrics_accepts_a_live_scrape() {
    if !promtool_installed() {
        return;
    }
    let c = crawled();
    let (_, text) = scrape(&c.daemon, None);
    let (ok, report) = run_promtool(&["check", "metrics"], text.as_bytes());
    assert!(
        ok && report.trim().is_empty(),
        "promtool check metrics: {report}\n---- scrape:\n{text}"
    );
}

#[test]
fn openmetrics_only_for_clients_that_ask() {
    let c = crawled();
    for accept in [None, Some("text/plain"), Some("*/*")] {
        let (ctype, text) = scrape(&c.daemon, accept);
        assert!(
            ctype.starts_with("text/plain; version=0.0.4"),
            "Accept {accept:?}: Content-Type {ctype}"
        );
        assert!(
            text.contains("# TYPE frontierd_page_fetches_total counter\n")
                && text.contains("# HELP frontierd_page_fetches_total "),
            "Accept {accept:?}: counter HELP/TYPE not on the _total name:\n{text}"
        );
        assert!(!text.contains("# EOF"), "Accept {accept:?}:\n{text}");
    }
    let (ctype, text) = scrape(&c.daemon, Some(PROMETHEUS_ACCEPT));
    assert!(
        ctype.starts_with("application/openmetrics-text; version=1.0.0"),
        "Content-Type {ctype}"
    );
    assert!(
        text.contains("# TYPE frontierd_page_fetches counter\n"),
        "OpenMetrics names the counter family without _total:\n{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    // the same samples either way
    let fetched = "frontierd_page_fetches_total{class=\"2xx\"}";
    let (_, plain) = scrape(&c.daemon, None);
    assert_eq!(metric(&text, fetched), metric(&plain, fetched), "{text}");
    assert!(metric(&plain, fetched).is_some_and(|n| n >= 3.0), "{plain}");
}

#[test]
fn clamped_crawl_delays_are_a_counter() {
    let c = crawled();
    let text = c.daemon.metrics();
    assert!(
        text.contains("# TYPE frontierd_crawl_delays_clamped_total counter\n"),
        "{text}"
    );
    // one host asked for 5 s, clamped once to the 200 ms cap
    assert_eq!(
        metric(&text, "frontierd_crawl_delays_clamped_total"),
        Some(1.0),
        "{text}"
    );
}

/// The series names a scrape (Prometheus text 0.0.4) exposes, or would once a labelled family
/// has a child: every sample name, and the names each TYPE line implies.
fn series_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            let (Some(name), Some(kind)) = (it.next(), it.next()) else {
                continue;
            };
            match kind {
                "histogram" => {
                    for s in ["_bucket", "_sum", "_count"] {
                        names.insert(format!("{name}{s}"));
                    }
                }
                "summary" => {
                    for s in ["", "_sum", "_count"] {
                        names.insert(format!("{name}{s}"));
                    }
                }
                _ => {
                    names.insert(name.to_string());
                }
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// The `frontierd_*` metric names a PromQL expression uses (string literals skipped).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut chars = expr.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        if ch == '"' || ch == '\'' || ch == '`' {
            // skip the string literal
            let mut escaped = false;
            for (_, c) in chars.by_ref() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == ch {
                    break;
                }
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' || ch == ':' {
            let mut end = i + ch.len_utf8();
            while let Some(&(j, c)) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                    end = j + c.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let word = &expr[i..end];
            if word.starts_with("frontierd_") {
                names.insert(word.to_string());
            }
        }
    }
    names
}

/// Every panel, rows' nested panels included.
fn panels(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut out = Vec::new();
    for p in v["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(panels(p));
    }
    out
}

#[test]
fn grafana_dashboard_queries_only_live_metrics() {
    let path = repo_root().join("deploy/grafana/frontierd.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let dash: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));

    // importable as is: it asks for a Prometheus data source and every panel uses it
    let inputs = dash["__inputs"].as_array().expect("__inputs");
    assert!(
        inputs
            .iter()
            .any(|i| i["name"] == "DS_PROMETHEUS" && i["pluginId"] == "prometheus"),
        "no DS_PROMETHEUS input: {inputs:?}"
    );
    let mut exprs = Vec::new();
    for p in panels(&dash) {
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"], "${DS_PROMETHEUS}",
            "panel {} has another data source",
            p["title"]
        );
        let targets = p["targets"].as_array().expect("panel targets");
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            let expr = t["expr"].as_str().expect("target expr");
            exprs.push((
                p["title"].as_str().unwrap_or("").to_string(),
                expr.to_string(),
            ));
        }
    }

    let c = crawled();
    let live = series_names(&c.daemon.metrics());
    let mut used = BTreeSet::new();
    for (title, expr) in &exprs {
        let names = metric_names(expr);
        assert!(
            !names.is_empty(),
            "panel {title}: no frontierd metric in {expr}"
        );
        for n in names {
            assert!(
                live.contains(&n),
                "panel {title}: {n} is not in a live scrape (query {expr});\nthe scrape has {live:?}"
            );
            used.insert(n);
        }
    }
    // what an operator looks at first
    for want in [
        "frontierd_page_fetches_total",
        "frontierd_urls_queued",
        "frontierd_robots_hosts",
        "frontierd_politeness_wait_seconds_bucket",
        "frontierd_hosts_in_backoff",
        "frontierd_warc_bytes_written_total",
        "frontierd_store_size_bytes",
        "frontierd_in_flight",
        "frontierd_urls_accepted_total",
        "frontierd_urls_rejected_total",
    ] {
        assert!(used.contains(want), "no panel queries {want}");
    }

    // and the queries parse: promtool checks them as recording rules
    if promtool_installed() {
        let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
        for (i, (_, expr)) in exprs.iter().enumerate() {
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$__interval", "1m")
                .replace("${instance:regex}", ".*")
                .replace("$instance", ".*")
                .replace("$job", "frontierd");
            rules.push_str(&format!(
                "      - record: dashboard:query{i}\n        expr: {}\n",
                serde_json::to_string(&expr).expect("json string")
            ));
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("dashboard-rules.yml");
        std::fs::write(&file, &rules).expect("write rules");
        let out = Command::new("promtool")
            .args(["check", "rules"])
            .arg(&file)
            .output()
            .expect("promtool check rules");
        assert!(
            out.status.success(),
            "promtool check rules on the dashboard's queries: {}{}\n{rules}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
