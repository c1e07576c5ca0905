//! Scenario 4: hostile input. Seed files with binary junk, invalid UTF-8, a 1 MiB line,
//! `javascript:`/`file:`/`data:` URLs and 100 000 duplicates; robots.txt of 5 MiB, with NUL
//! bytes, as an HTML page, as one endless line; servers that stall, drip, never end a body,
//! send a gzip bomb, garbage instead of HTTP, or reset mid-body. The daemon keeps running,
//! gives every URL an outcome with a reason, and its peak RSS stays under a ceiling.

use std::time::{Duration, Instant};

use frontierd_e2e::{lines_for, wait_until, Env, Reply, Req, Site};

const RSS_CEILING_KIB: u64 = 400 * 1024;
const TERMINAL: [&str; 5] = [
    "fetched",
    "redirected",
    "blocked-by-robots",
    "given-up",
    "rejected",
];

fn handler(req: &Req) -> Reply {
    let name = req.host.split('.').next().unwrap_or("").to_string();
    if req.path == "/robots.txt" {
        return match name.as_str() {
            "rbig" => {
                let mut body = b"User-agent: *\nDisallow: /blocked\n".to_vec();
                while body.len() < 5 << 20 {
                    body.extend_from_slice(b"# padding padding padding padding padding padding\n");
                }
                Reply::text(body)
            }
            "rnul" => Reply::text(
                &b"User-agent: *\nDisallow: /blocked\n\0\0\0\x01\x02junk\0\nAllow: /ok\n"[..],
            ),
            "rhtml" => Reply::html("<h1>Welcome</h1><p>This is not a robots.txt</p>"),
            "rendless" => Reply::Endless,
            _ => Reply::not_found(),
        };
    }
    match name.as_str() {
        "stall" => Reply::Stall,
        "drip" => Reply::Drip(Duration::from_secs(1)),
        "endless" => Reply::Endless,
        "bomb" => Reply::GzipBomb(32 << 20),
        "garbage" => Reply::Garbage,
        "reset" => Reply::ResetMidBody,
        _ => Reply::html(format!("{} on {}", req.path, req.host)),
    }
}

#[test]
fn hostile_input_is_survived() {
    let site = Site::start(handler);
    let env = Env::new(&[
        ("fetch", "workers", "8"),
        ("fetch", "total_timeout", "\"3s\""),
        ("fetch", "page_body_cap", "1048576"),
        ("fetch", "max_decoded_bytes", "1048576"),
        ("politeness", "max_attempts", "2"),
        ("politeness", "backoff_base", "\"1s\""),
        ("politeness", "backoff_max", "\"1s\""),
    ]);
    let u = |host: &str, path: &str| format!("{}{path}", site.base(&format!("{host}.site.test")));
    let daemon = env.start();
    let t0 = Instant::now();

    // the seed file: line numbers matter for the rejected list
    let mut seed: Vec<u8> = Vec::new();
    let mut line = 0usize;
    let mut push = |seed: &mut Vec<u8>, bytes: &[u8]| {
        seed.extend_from_slice(bytes);
        seed.push(b'\n');
        line += 1;
        line
    };
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .filter(|b| *b != b'\n')
        .collect();
    let junk_line = push(&mut seed, &junk);
    let bad_utf8_line = push(&mut seed, format!("{}\u{0}", u("utf", "/x")).as_bytes());
    let mut bad = u("utf", "/y").into_bytes();
    bad.extend_from_slice(b"\xff\xfe\xc3");
    let bad_utf8_line2 = push(&mut seed, &bad);
    let mut long = u("long", "/").into_bytes();
    long.resize(1 << 20, b'a');
    let long_line = push(&mut seed, &long);
    let js_line = push(&mut seed, b"javascript:alert(document.cookie)");
    let file_line = push(&mut seed, b"file:///etc/passwd");
    let data_line = push(&mut seed, b"data:text/html,<script>alert(1)</script>");
    let dup = u("dup", "/same");
    for _ in 0..100_000 {
        push(&mut seed, dup.as_bytes());
    }
    let mut good = Vec::new();
    for host in ["rbig", "rnul", "rhtml", "rendless"] {
        good.push(u(host, "/ok"));
        good.push(u(host, "/blocked"));
    }
    for host in [
        "stall", "drip", "endless", "bomb", "garbage", "reset", "fine",
    ] {
        good.push(u(host, "/x"));
    }
    for g in &good {
        push(&mut seed, g.as_bytes());
    }
    env.spool("hostile.txt", &seed);

    wait_until(
        "the seed file in spool/done",
        Duration::from_secs(120),
        || env.data.join("spool/done/hostile.txt").exists(),
    );
    let rejected = std::fs::read_to_string(env.data.join("spool/rejected/hostile.txt"))
        .expect("a rejected list for the seed file");
    let rejected_lines: Vec<(usize, String)> = rejected
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let n = parts.next()?.parse().ok()?;
            Some((n, parts.next().unwrap_or("").to_string()))
        })
        .collect();
    for (what, n) in [
        ("binary junk", junk_line),
        ("a 1 MiB line", long_line),
        ("javascript:", js_line),
        ("file:", file_line),
        ("data:", data_line),
    ] {
        let hit = rejected_lines.iter().find(|(l, _)| *l == n);
        assert!(
            hit.is_some_and(|(_, reason)| !reason.is_empty()),
            "{what} (line {n}) not rejected with a reason:\n{}",
            &rejected[..rejected.len().min(2000)]
        );
    }
    // invalid UTF-8: rejected with a reason, or accepted (percent-encoded) and crawled
    let utf_outcomes = |log: &[serde_json::Value]| {
        log.iter()
            .filter(|l| {
                l["url"].as_str().unwrap_or("").starts_with(&u("utf", "/"))
                    && TERMINAL.contains(&l["outcome"].as_str().unwrap_or(""))
            })
            .count()
    };
    let utf_rejected = [bad_utf8_line, bad_utf8_line2]
        .iter()
        .filter(|n| rejected_lines.iter().any(|(l, r)| l == *n && !r.is_empty()))
        .count();
    wait_until(
        "an outcome for the invalid UTF-8 lines",
        Duration::from_secs(60),
        || utf_rejected + utf_outcomes(&env.crawl_log()) >= 2,
    );
    assert!(daemon.healthy(), "{}", env.daemon_log());

    // every good URL gets an outcome
    let outcome = |url: &str| -> Option<serde_json::Value> {
        env.crawl_log()
            .into_iter()
            .find(|l| l["url"] == url && TERMINAL.contains(&l["outcome"].as_str().unwrap_or("")))
    };
    let mut expect: Vec<String> = good.clone();
    expect.push(dup.clone());
    wait_until(
        "an outcome for every seeded URL",
        Duration::from_secs(120),
        || expect.iter().all(|u| outcome(u).is_some()),
    );
    eprintln!("outcomes after {:?}", t0.elapsed());
    assert!(daemon.healthy(), "{}", env.daemon_log());
    let log = env.crawl_log();
    for u in &expect {
        for l in lines_for(&log, u) {
            if l["outcome"] == "given-up" {
                assert!(!l["reason"].as_str().unwrap_or("").is_empty(), "{l}");
            }
        }
        eprintln!("{u}: {:?}", lines_for(&log, u));
    }
    let (_, stats) = daemon.get("/v1/stats");
    let sv: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(
        sv["duplicate"].as_u64().unwrap_or(0) >= 99_999,
        "100 000 copies of one URL: {stats}"
    );
    let hits = site.hits();
    assert_eq!(
        hits.iter().filter(|h| h.path == "/same").count(),
        1,
        "duplicates fetched"
    );
    // the 5 MiB robots.txt still had its rules read (they are at the top)
    assert!(
        lines_for(&log, &u("rbig", "/blocked"))
            .iter()
            .any(|l| l["outcome"] == "blocked-by-robots"),
        "{:?}",
        lines_for(&log, &u("rbig", "/blocked"))
    );
    assert!(hits
        .iter()
        .all(|h| !(h.host == "rbig.site.test" && h.path == "/blocked")));
    for host in ["stall", "drip", "garbage", "reset"] {
        let l = lines_for(&log, &u(host, "/x"));
        assert!(
            l.iter()
                .any(|l| l["outcome"] == "given-up" || l["outcome"] == "fetched"),
            "{host}: {l:?}"
        );
    }
    // endless robots.txt: cut at robots_body_cap, read as a (rule-less) robots.txt
    let (status, host) = daemon.get("/v1/hosts/rendless.site.test");
    assert_eq!(status, 200, "{host}");
    let hv: serde_json::Value = serde_json::from_str(&host).unwrap();
    assert!(hv["origins"][0]["robots_state"].is_string(), "{host}");

    let hwm = daemon.vm_hwm_kib();
    eprintln!("VmHWM {} MiB", hwm / 1024);
    assert!(
        hwm < RSS_CEILING_KIB,
        "peak RSS {hwm} KiB above {RSS_CEILING_KIB} KiB"
    );
}
