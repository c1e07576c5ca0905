//! End to end: the real `frontierd run` against a local site reached through `[resolve]`,
//! fed through the spool and the API; checks the crawl log, WARC (with warcio), metrics,
//! the admin API and a clean SIGTERM exit.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn page(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let html = |body: &str| {
        Response::builder()
            .header("content-type", "text/html; charset=utf-8")
            .body(Full::new(Bytes::from(format!(
                "<!doctype html><html><body>{body}</body></html>"
            ))))
            .unwrap()
    };
    match req.uri().path() {
        "/robots.txt" => Response::builder()
            .header("content-type", "text/plain")
            .body(Full::new(Bytes::from_static(
                b"User-agent: *\nDisallow: /private\nSitemap: https://www.site.test/sitemap.xml\n",
            )))
            .unwrap(),
        "/" => html(
            r#"<a href="/a">a</a> <a href="b">b</a> <a href="/private/x">p</a>
               <a href="http://elsewhere.example/">out of scope</a>"#,
        ),
        "/a" => html(r#"<a href="/c">c</a>"#),
        "/b" => Response::builder()
            .status(301)
            .header("location", "/d")
            .body(Full::new(Bytes::new()))
            .unwrap(),
        "/c" | "/d" | "/seed2" => html("leaf"),
        _ => Response::builder()
            .status(404)
            .body(Full::new(Bytes::from_static(b"not found")))
            .unwrap(),
    }
}

async fn site() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc =
                    service_fn(
                        |req: Request<Incoming>| async move { Ok::<_, Infallible>(page(&req)) },
                    );
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

async fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_for<F: FnMut() -> bool>(what: &str, deadline: Duration, mut f: F) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn crawl_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn has(log: &[serde_json::Value], url: &str, outcome: &str) -> bool {
    log.iter()
        .any(|l| l["url"] == url && l["outcome"] == outcome)
}

fn warcio_available() -> bool {
    Command::new("python3")
        .args(["-c", "import warcio"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_end_to_end() {
    assert!(
        warcio_available(),
        "this test needs the PyPI package warcio (pip install warcio) to check WARC output"
    );
    let site = site().await;
    let port = site.port();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let spool = data.join("spool");
    for sub in ["incoming", "tmp"] {
        std::fs::create_dir_all(spool.join(sub)).unwrap();
    }
    let config = dir.path().join("frontierd.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[store]
data_dir = "{data}"
[fetch]
user_agent = "frontierd-test/0.1 (+https://example.org/bot)"
workers = 4
total_timeout = "10s"
shutdown_grace = "5s"
[politeness]
min_delay = "0s"
max_delay = "0s"
delay_factor = 0.0
[scope]
follow_links = true
max_depth = 3
mode = "same-host"
[intake]
poll_interval = "100ms"
[admin]
listen = "127.0.0.1:0"
[log]
stats_interval = "1s"
[resolve]
"*.site.test" = ["127.0.0.1"]
"#,
            data = data.display()
        ),
    )
    .unwrap();

    let check = Command::new(env!("CARGO_BIN_EXE_frontierd"))
        .args(["config", "check"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");

    let child = Command::new(env!("CARGO_BIN_EXE_frontierd"))
        .arg("run")
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.path().join("daemon.log")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let mut daemon = Daemon(child);
    let addr_file = data.join("admin.addr");
    wait_for("the admin address file", Duration::from_secs(30), || {
        addr_file.exists()
    })
    .await;
    let admin = std::fs::read_to_string(&addr_file)
        .unwrap()
        .trim()
        .to_string();
    let (status, body) = http(&admin, "GET", "/healthz", "").await;
    assert_eq!(status, 200, "{body}");

    // seeds through the spool: written in tmp, renamed into incoming
    let base = format!("http://www.site.test:{port}");
    let tmp = spool.join("tmp").join("seeds.txt");
    std::fs::write(&tmp, format!("# seeds\n{base}/\n\nnot a url\n")).unwrap();
    std::fs::rename(&tmp, spool.join("incoming").join("seeds.txt")).unwrap();

    // and through the API
    let api_url = format!("http://api.site.test:{port}/seed2");
    let (status, body) = http(
        &admin,
        "POST",
        "/v1/urls",
        &serde_json::json!([api_url, format!("{api_url}#frag"), "ftp://x.site.test/"]).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["accepted"], 1, "{body}");
    assert_eq!(v["duplicate"], 1, "{body}");
    assert_eq!(v["rejected"], 1, "{body}");

    let log_path = data.join("crawl.log.jsonl");
    let expected = [
        (format!("{base}/"), "fetched"),
        (format!("{base}/a"), "fetched"),
        (format!("{base}/b"), "redirected"),
        (format!("{base}/c"), "fetched"),
        (format!("{base}/d"), "fetched"),
        (format!("{base}/private/x"), "blocked-by-robots"),
        (api_url.clone(), "fetched"),
        ("not a url".to_string(), "rejected"),
    ];
    wait_for(
        "every URL in the crawl log",
        Duration::from_secs(60),
        || {
            let log = crawl_log(&log_path);
            expected.iter().all(|(u, o)| has(&log, u, o))
        },
    )
    .await;
    let log = crawl_log(&log_path);
    assert!(
        !log.iter().any(|l| l["url"]
            .as_str()
            .unwrap_or("")
            .contains("elsewhere.example")),
        "out-of-scope link was followed"
    );
    let root = log.iter().find(|l| l["url"] == format!("{base}/")).unwrap();
    assert_eq!(root["status"], 200);
    assert!(root["bytes"].as_u64().unwrap() > 0);

    // spool bookkeeping
    wait_for("the spool file in done/", Duration::from_secs(10), || {
        spool.join("done").join("seeds.txt").exists()
    })
    .await;
    let rejected = std::fs::read_to_string(spool.join("rejected").join("seeds.txt")).unwrap();
    assert!(rejected.contains("4\t"), "line number recorded: {rejected}");
    assert!(rejected.contains("not a url"), "{rejected}");

    // metrics
    let (status, metrics) = http(&admin, "GET", "/metrics", "").await;
    assert_eq!(status, 200);
    for name in [
        "frontierd_urls_accepted_total",
        "frontierd_urls_duplicate_total",
        "frontierd_urls_rejected_total",
        "frontierd_urls_queued",
        "frontierd_robots_hosts{state=\"fresh\"}",
        "frontierd_robots_fetches_total",
        "frontierd_page_fetches_total{class=\"2xx\"}",
        "frontierd_page_fetches_total{class=\"3xx\"}",
        "frontierd_fetched_bytes_total",
        "frontierd_fetch_latency_seconds_bucket",
        "frontierd_politeness_wait_seconds_bucket",
        "frontierd_hosts_in_backoff",
        "frontierd_crawl_delays_clamped",
        "frontierd_warc_bytes_written_total",
        "frontierd_in_flight",
        "frontierd_store_size_bytes",
    ] {
        assert!(metrics.contains(name), "metric {name} missing:\n{metrics}");
    }

    // admin API
    let (status, hosts) = http(&admin, "GET", "/v1/hosts?state=fresh&limit=10", "").await;
    assert_eq!(status, 200);
    assert!(hosts.contains("www.site.test"), "{hosts}");
    let (status, host) = http(&admin, "GET", "/v1/hosts/www.site.test", "").await;
    assert_eq!(status, 200, "{host}");
    let hv: serde_json::Value = serde_json::from_str(&host).unwrap();
    assert_eq!(hv["origins"][0]["robots_state"], "fresh", "{host}");
    assert_eq!(
        hv["origins"][0]["sitemaps"][0], "https://www.site.test/sitemap.xml",
        "{host}"
    );
    let (status, paused) = http(&admin, "POST", "/v1/hosts/www.site.test/pause", "").await;
    assert_eq!(status, 200);
    assert!(paused.contains("\"paused\": true"), "{paused}");
    let (status, stats) = http(&admin, "GET", "/v1/stats", "").await;
    assert_eq!(status, 200);
    let sv: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(sv["pages_fetched"].as_u64().unwrap() >= 6, "{stats}");

    // the CLI client
    let out = Command::new(env!("CARGO_BIN_EXE_frontierd"))
        .args(["hosts", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("www.site.test"));

    // the periodic INFO line (stats_interval = 1s)
    let daemon_log_path = dir.path().join("daemon.log");
    wait_for(
        "the periodic progress line",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&daemon_log_path)
                .unwrap_or_default()
                .contains("progress")
        },
    )
    .await;

    // SIGTERM: clean exit, no .open file
    let pid = daemon.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = daemon.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "daemon did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let daemon_log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
    assert!(status.success(), "exit {status:?}\n{daemon_log}");
    assert!(
        daemon_log.contains("progress"),
        "periodic stats line:\n{daemon_log}"
    );

    let warcs: Vec<PathBuf> = std::fs::read_dir(data.join("warc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        !warcs.iter().any(|p| p.to_string_lossy().ends_with(".open")),
        "{warcs:?}"
    );
    let gz: Vec<&PathBuf> = warcs
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".warc.gz"))
        .collect();
    assert!(!gz.is_empty(), "no WARC file: {warcs:?}");
    for f in &gz {
        let out = Command::new("python3")
            .args(["-m", "warcio.cli", "check", "-v"])
            .arg(f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "warcio check {}: {}{}",
            f.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // robots.txt fetches are archived too
    let mut all = Vec::new();
    for f in &gz {
        let out = Command::new("python3")
            .args([
                "-m",
                "warcio.cli",
                "index",
                "-f",
                "warc-type,warc-target-uri",
            ])
            .arg(f)
            .output()
            .unwrap();
        all.extend_from_slice(&out.stdout);
    }
    let index = String::from_utf8_lossy(&all);
    assert!(
        index.contains(&format!("{base}/robots.txt")),
        "robots.txt not in WARC:\n{index}"
    );
    assert!(index.contains(&format!("{base}/c")), "{index}");
}
