//! The status page at the admin API's `/`, in a real browser: headless Chromium (Debian's
//! `chromium`) driven over the DevTools protocol, against a daemon crawling loopback sites.
//! The page loads with no console message (a CSP refusal or a script error would be one),
//! its counters match `/v1/stats` once the crawl is over, its pages/s chart moves and its
//! busiest hosts are listed while the crawl runs (kept running by the test, whatever the
//! machine's speed), and a submitted line holding `<script>` shows as text without running. A
//! screenshot is kept in `target/status-page.png`. Chromium resolves nothing but 127.0.0.1
//! (`--host-resolver-rules`) and its background services are off: no traffic leaves the
//! machine.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use frontierd_e2e::{http, wait_until, Env, Reply, Req, Site};
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

const XSS: &str = "<script>document.title='pwned'</script>";

fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        let out = Command::new("which").arg(name).output().ok()?;
        out.status
            .success()
            .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed (Debian: apt-get install chromium)"
        );
        eprintln!("skipped: chromium not installed");
    }
    found
}

/// A headless Chromium with the DevTools protocol on a loopback port, showing `url`.
struct Browser {
    child: Child,
    ws: WebSocket<TcpStream>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn open(bin: &Path, url: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-default-apps",
                "--disable-extensions",
                "--disable-sync",
                "--metrics-recording-only",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1280,1600",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromium");
        let port_file = profile.path().join("DevToolsActivePort");
        let mut port = String::new();
        wait_until("chromium's DevTools port", Duration::from_secs(30), || {
            port = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.lines().next().map(str::to_string))
                .unwrap_or_default();
            !port.is_empty()
        });
        let devtools = format!("127.0.0.1:{port}");
        let mut page_ws = String::new();
        wait_until("the page's target", Duration::from_secs(30), || {
            let list: Value =
                serde_json::from_str(&devtools_get(&devtools, "/json/list")).unwrap_or(Value::Null);
            page_ws = list
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["type"] == "page")
                .and_then(|t| t["webSocketDebuggerUrl"].as_str())
                .unwrap_or_default()
                .to_string();
            !page_ws.is_empty()
        });
        let stream = TcpStream::connect(&devtools).unwrap();
        let (ws, _) = tungstenite::client(page_ws.as_str(), stream).expect("DevTools websocket");
        let mut b = Browser {
            child,
            ws,
            next_id: 1,
            _profile: profile,
        };
        b.call("Runtime.enable", json!({}));
        b.call("Log.enable", json!({}));
        b
    }

    /// Send a command; the events that came before its answer are returned with it.
    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws.send(Message::text(msg.to_string())).unwrap();
        let mut events = Vec::new();
        loop {
            let Message::Text(text) = self.ws.read().expect("DevTools message") else {
                continue;
            };
            let v: Value = serde_json::from_str(text.as_str()).unwrap();
            if v["id"] == id {
                return (v, events);
            }
            events.push(v);
        }
    }

    /// A JavaScript expression's value in the page, and the console messages, exceptions
    /// and log entries seen since the last call.
    fn eval(&mut self, expr: &str) -> (Value, Vec<Value>) {
        let (v, events) = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true}),
        );
        let noise = events
            .into_iter()
            .filter(|e| {
                matches!(
                    e["method"].as_str(),
                    Some("Runtime.consoleAPICalled" | "Runtime.exceptionThrown" | "Log.entryAdded")
                )
            })
            .collect();
        (v["result"]["result"]["value"].clone(), noise)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/v1/stats` (Null if it did not answer).
fn stats(d: &frontierd_e2e::Daemon) -> Value {
    let (_, text) = http(&d.admin, "GET", "/v1/stats", b"");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn page(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        return Reply::text("User-agent: *\nAllow: /\n");
    }
    Reply::html("<html><body>a page</body></html>").delayed(Duration::from_millis(40))
}

#[test]
fn the_status_page_shows_the_crawl_in_a_real_browser() {
    let Some(bin) = chromium() else { return };
    let env = Env::new(&[
        ("fetch", "workers", "2"),
        ("politeness", "min_delay", "\"150ms\""),
        ("politeness", "max_delay", "\"150ms\""),
    ]);
    let site = Site::start(page);
    // the crawl is topped up while the chart is read, so it runs as long as the browser
    // needs on any machine: 3 hosts, 10 more pages each whenever few are left queued
    let bases: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|h| site.base(&format!("{h}.status.site.test")))
        .collect();
    let mut urls: Vec<String> = Vec::new();
    let top_up = |d: &frontierd_e2e::Daemon, urls: &mut Vec<String>| {
        let from = urls.len() / bases.len();
        let more: Vec<String> = bases
            .iter()
            .flat_map(|b| (from..from + 10).map(move |i| format!("{b}/p{i}")))
            .collect();
        d.submit(&more);
        urls.extend(more);
    };
    let d = env.start();
    top_up(&d, &mut urls);
    top_up(&d, &mut urls);
    wait_until("the crawl under way", Duration::from_secs(20), || {
        site.hits().len() > 5
    });

    let mut b = Browser::open(&bin, &format!("http://{}/", d.admin));
    let mut messages = Vec::new();
    let mut eval = |b: &mut Browser, expr: &str| {
        let (v, noise) = b.eval(expr);
        messages.extend(noise);
        v
    };
    // while the crawl runs the chart moves (points are added, the last rate is > 0) and the
    // busiest hosts are listed (hosts with work: the table empties once the crawl is over)
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut points = 0;
    let mut moving = false;
    let mut busiest = Value::Null;
    let listed = |busiest: &Value| {
        busiest
            .as_str()
            .unwrap_or("")
            .contains("a.status.site.test")
    };
    while Instant::now() < deadline && !(points >= 3 && moving && listed(&busiest)) {
        let queued = stats(&d)["queued"].as_u64().unwrap_or(0);
        if queued < 15 {
            top_up(&d, &mut urls);
        }
        std::thread::sleep(Duration::from_millis(500));
        let chart = eval(
            &mut b,
            "[document.getElementById('chart-pages').dataset.points, \
              document.getElementById('chart-pages').dataset.last]",
        );
        points = chart[0].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
        moving = chart[1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .is_some_and(|r| r > 0.0);
        busiest = eval(&mut b, "document.getElementById('busiest').textContent");
    }
    assert!(
        points >= 3 && moving,
        "pages/s chart: {points} points, moving: {moving}"
    );
    assert!(listed(&busiest), "busiest hosts: {busiest}");

    // a submitted line holding <script> shows as text in the recent table, and never runs
    let answer = d.submit(&[XSS.to_string()]);
    assert_eq!(answer["rejected"], 1, "{answer}");
    wait_until(
        "the rejected line in the table",
        Duration::from_secs(10),
        || {
            let shown = eval(&mut b, "document.getElementById('recent').textContent");
            shown.as_str().unwrap_or("").contains(XSS)
        },
    );
    let title = eval(&mut b, "document.title");
    assert_eq!(title, "frontierd");
    let scripts = eval(&mut b, "document.scripts.length");
    assert_eq!(scripts, 1, "only the page's own script");

    // once the crawl is over the counters on the page are /v1/stats's
    wait_until("every page fetched", Duration::from_secs(60), || {
        let s = stats(&d);
        s["pages_fetched"].as_u64() == Some(urls.len() as u64) && s["queued"] == 0
    });
    let stats = stats(&d);
    wait_until("the page caught up", Duration::from_secs(10), || {
        let shown = eval(
            &mut b,
            "['pages_fetched', 'queued', 'hosts_paused'].map(k => \
               document.getElementById('stat-' + k).dataset.value)",
        );
        shown
            == json!([
                stats["pages_fetched"].to_string(),
                stats["queued"].to_string(),
                stats["hosts_paused"].to_string()
            ])
    });
    let classes = eval(
        &mut b,
        "document.getElementById('fetch-classes').textContent",
    );
    assert!(classes.as_str().unwrap_or("").contains("2xx"), "{classes}");

    // a screenshot for whoever reads the test's output
    let (shot, _) = b.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = shot["result"]["data"].as_str().unwrap_or("");
    let out = frontierd_e2e::repo_root().join("target/status-page.png");
    std::fs::write(&out, base64_decode(png)).unwrap();
    eprintln!("screenshot: {}", out.display());

    assert!(messages.is_empty(), "console messages: {messages:#?}");
}

/// GET from Chromium's DevTools HTTP endpoint, which keeps the connection open whatever the
/// request says: the body is read by its Content-Length. Empty on any failure (retried).
fn devtools_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n @ 1..) = s.read(&mut chunk) {
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok());
            if len.is_some_and(|len| body.len() >= len) {
                return body.to_string();
            }
        }
    }
    String::new()
}

/// Standard base64 (the screenshot), without a dependency for one call.
fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
