//! Scenario 5: output. Every WARC file (rotated at 1 MiB) passes `warcio check`, and the
//! crawl log and the WARC response records agree URL for URL.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

use frontierd_e2e::{
    require_warcio, wait_until, warc_files, warc_records, warcio_check, Env, Reply, Req, Site,
};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `data` in lower-case hex (text that gzip halves, not more).
fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Incompressible bytes.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn handler(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        return Reply::text("User-agent: *\nDisallow: /private\n");
    }
    let n: usize = req
        .path
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or(0);
    match req.path.get(..2).unwrap_or("") {
        "/h" => Reply::html(format!("page {n} {}", "lorem ipsum ".repeat(n * 10))),
        "/b" => Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), "application/octet-stream".into())],
            body: noise(150_000, n as u64),
        },
        "/z" => Reply::Full {
            status: 200,
            headers: vec![
                ("Content-Type".into(), "text/html".into()),
                ("Content-Encoding".into(), "gzip".into()),
            ],
            // a content-encoded body of a few KiB: its record (over 1 KiB) is one that
            // `[warc] deflate_compressed_payloads = false` stores instead of deflating
            body: gzip(
                format!(
                    "<html><body>gzipped {n} {}</body></html>",
                    hex(&noise(2_000, 1_000 + n as u64))
                )
                .as_bytes(),
            ),
        },
        "/r" => Reply::redirect(301, &format!("/h{n}")),
        _ => Reply::not_found(),
    }
}

#[test]
fn warc_files_are_valid_and_match_the_crawl_log() {
    require_warcio();
    let site = Site::start(handler);
    let env = Env::new(&[
        ("fetch", "workers", "8"),
        ("warc", "max_file_size", "1048576"),
    ]);
    let mut urls = Vec::new();
    for host in ["o1", "o2", "o3"] {
        let base = site.base(&format!("{host}.site.test"));
        for n in 0..8 {
            urls.push(format!("{base}/h{n}"));
            urls.push(format!("{base}/b{n}"));
            urls.push(format!("{base}/z{n}"));
            urls.push(format!("{base}/missing{n}"));
            urls.push(format!("{base}/private/{n}"));
        }
        for n in 100..104 {
            urls.push(format!("{base}/r{n}"));
        }
    }
    let mut daemon = env.start();
    let answer = daemon.submit(&urls);
    assert_eq!(answer["accepted"], urls.len(), "{answer}");
    // redirect targets /h100.. are discovered URLs
    let expected = urls.len() + 3 * 4;
    wait_until("an outcome for every URL", Duration::from_secs(120), || {
        env.crawl_log().len() >= expected
    });
    daemon.signal(libc::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(30))
        .expect("exit after SIGTERM");
    assert!(status.success(), "{status}");

    let (closed, open) = warc_files(&env.warc_dir());
    assert!(open.is_empty(), "{open:?}");
    assert!(closed.len() >= 2, "expected rotation at 1 MiB: {closed:?}");
    let mut responses: BTreeMap<String, usize> = BTreeMap::new();
    let mut requests: BTreeMap<String, usize> = BTreeMap::new();
    for f in &closed {
        if let Err(e) = warcio_check(f) {
            panic!("warcio check {}: {e}", f.display());
        }
        let records = warc_records(f);
        assert_eq!(
            records.first().map(|r| r.0.as_str()),
            Some("warcinfo"),
            "{}",
            f.display()
        );
        for (kind, uri) in records {
            match kind.as_str() {
                "response" => *responses.entry(uri).or_default() += 1,
                "request" => *requests.entry(uri).or_default() += 1,
                _ => {}
            }
        }
    }
    let log = env.crawl_log();
    let logged: BTreeSet<String> = log
        .iter()
        .filter(|l| l["outcome"] == "fetched" || l["outcome"] == "redirected")
        .map(|l| l["url"].as_str().unwrap().to_string())
        .collect();
    let page_responses: BTreeSet<String> = responses
        .keys()
        .filter(|u| !u.ends_with("/robots.txt"))
        .cloned()
        .collect();
    assert_eq!(
        logged
            .symmetric_difference(&page_responses)
            .collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "crawl log (fetched/redirected) and WARC responses differ"
    );
    for (u, n) in &responses {
        assert_eq!(*n, 1, "{u}: {n} response records");
        assert_eq!(requests.get(u), Some(&1), "{u}: request records");
    }
    for host in ["o1", "o2", "o3"] {
        let robots = format!("{}/robots.txt", site.base(&format!("{host}.site.test")));
        assert!(responses.contains_key(&robots), "{robots} not archived");
    }
    // one line per URL; blocked ones are not archived
    let mut per_url: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &log {
        *per_url.entry(l["url"].as_str().unwrap()).or_default() += 1;
        if l["outcome"] == "blocked-by-robots" {
            assert!(!responses.contains_key(l["url"].as_str().unwrap()), "{l}");
        }
    }
    assert!(per_url.values().all(|n| *n == 1), "{per_url:?}");
    assert_eq!(log.len(), expected);
}
