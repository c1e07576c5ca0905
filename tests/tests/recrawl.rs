//! Recrawl (docs/recrawl.md): fetched URLs come back on schedule; a page that changes is
//! fetched in full again, one with validators gets a conditional GET and a 304, one with
//! the same body and no validators an identical-payload-digest revisit record; a page
//! answering 404 three times leaves the schedule; warcio accepts the WARC files; the
//! schedule and the validators survive kill -9.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frontierd_e2e::{
    lines_for, metric, require_warcio, wait_until, warc_files, warc_record_at, warc_records,
    warcio_check, Env, Reply, Req, Site,
};

const ETAG: &str = "\"e1\"";
const LAST_MODIFIED: &str = "Mon, 23 Nov 2026 10:00:00 GMT";
/// The revisit interval of these tests.
const INTERVAL: Duration = Duration::from_secs(2);

fn recrawl_env() -> Env {
    Env::new(&[
        ("recrawl", "default_interval", "\"2s\""),
        ("recrawl", "min_interval", "\"1s\""),
        ("recrawl", "gone_after", "3"),
    ])
}

/// When each request for a path arrived, and its conditional headers.
type Seen = Arc<Mutex<BTreeMap<String, Vec<(Instant, Option<String>, Option<String>)>>>>;

fn header(req: &Req, name: &str) -> Option<String> {
    req.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
}

/// `/changing`: a new body each time, no validators. `/etag`: the same page with ETag and
/// Last-Modified, 304 to a request that sends them back. `/same`: the same body, no
/// validators. `/gone`: 404.
fn site(seen: Seen) -> Site {
    Site::start(move |req| {
        let inm = header(req, "if-none-match");
        let ims = header(req, "if-modified-since");
        seen.lock()
            .unwrap()
            .entry(req.path.clone())
            .or_default()
            .push((Instant::now(), inm.clone(), ims.clone()));
        match req.path.as_str() {
            "/robots.txt" => Reply::not_found(),
            "/changing" => Reply::html(format!("version {}", req.nth)),
            "/etag" | "/e1" | "/e2" | "/e3" => {
                if inm.as_deref() == Some(ETAG) {
                    Reply::status(304, "")
                        .with_header("ETag", ETAG)
                        .with_header("Last-Modified", LAST_MODIFIED)
                } else {
                    Reply::html("stable with validators")
                        .with_header("ETag", ETAG)
                        .with_header("Last-Modified", LAST_MODIFIED)
                }
            }
            "/same" => Reply::html("stable without validators"),
            _ => Reply::not_found(),
        }
    })
}

fn hits(seen: &Seen, path: &str) -> Vec<(Instant, Option<String>, Option<String>)> {
    seen.lock().unwrap().get(path).cloned().unwrap_or_default()
}

#[test]
fn pages_are_revisited_on_schedule_with_conditional_get_and_revisit_records() {
    require_warcio();
    let seen: Seen = Arc::default();
    let site = site(seen.clone());
    let env = recrawl_env();
    let mut daemon = env.start();
    let base = site.base("r.site.test");
    let url = |p: &str| format!("{base}{p}");
    daemon.submit(&[url("/changing"), url("/etag"), url("/same"), url("/gone")]);

    // every page visited at least three times, the 404 three times
    wait_until(
        "three visits of every page",
        Duration::from_secs(60),
        || {
            ["/changing", "/etag", "/same", "/gone"]
                .iter()
                .all(|p| hits(&seen, p).len() >= 3)
        },
    );
    let gone_hits = hits(&seen, "/gone").len();
    // the schedule goes on for two more intervals ...
    let changing_then = hits(&seen, "/changing").len();
    wait_until(
        "two more visits of /changing",
        Duration::from_secs(30),
        || hits(&seen, "/changing").len() >= changing_then + 2,
    );
    // ... without the page that answered 404 three times in a row
    assert_eq!(gone_hits, 3, "/gone fetched {gone_hits} times");
    assert_eq!(
        hits(&seen, "/gone").len(),
        3,
        "/gone fetched after it was gone"
    );

    // on schedule: never earlier than the interval after the last visit
    let changing = hits(&seen, "/changing");
    for pair in changing.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= INTERVAL - Duration::from_millis(50),
            "revisit after {gap:?}"
        );
    }
    // conditional GET: the first request plain, every later one with the validators
    let etag = hits(&seen, "/etag");
    assert_eq!((etag[0].1.as_deref(), etag[0].2.as_deref()), (None, None));
    for h in &etag[1..] {
        assert_eq!(h.1.as_deref(), Some(ETAG));
        assert_eq!(h.2.as_deref(), Some(LAST_MODIFIED));
    }
    // no validators to send for the others
    assert!(hits(&seen, "/same").iter().all(|h| h.1.is_none()));

    let m = daemon.metrics();
    let count = |outcome: &str| {
        metric(
            &m,
            &format!("frontierd_revisits_total{{outcome=\"{outcome}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert!(count("changed") >= 2.0, "{m}");
    assert!(count("not-modified") >= 2.0, "{m}");
    assert!(count("identical-digest") >= 2.0, "{m}");
    assert_eq!(
        metric(&m, "frontierd_revisits_gone_total"),
        Some(1.0),
        "{m}"
    );
    assert!(
        metric(&m, "frontierd_revisits_due_total").unwrap_or(0.0) >= 8.0,
        "{m}"
    );

    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit(Duration::from_secs(30)).is_some());

    // the crawl log: first visit, then revisits and what they found
    let log = env.crawl_log();
    let visits = |p: &str| -> Vec<(String, String, u64)> {
        lines_for(&log, &url(p))
            .iter()
            .map(|l| {
                (
                    l["visit"].as_str().unwrap_or("-").to_string(),
                    l["revisit"].as_str().unwrap_or("-").to_string(),
                    l["status"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };
    for (path, revisit, status) in [
        ("/changing", "changed", 200),
        ("/etag", "not-modified", 304),
        ("/same", "identical-digest", 200),
        ("/gone", "changed", 404),
    ] {
        let v = visits(path);
        assert!(v.len() >= 3, "{path}: {v:?}");
        assert_eq!(v[0].0, "first", "{path}: {v:?}");
        assert_eq!(v[0].1, "-", "{path}: {v:?}");
        for later in &v[1..] {
            assert_eq!(
                (later.0.as_str(), later.1.as_str(), later.2),
                ("revisit", revisit, status),
                "{path}: {v:?}"
            );
        }
    }

    // the WARC files: warcio checks and indexes them; the revisits are revisit records
    // referring to the first capture, the changed page full responses every time
    let (closed, open) = warc_files(&env.warc_dir());
    assert!(open.is_empty(), "{open:?}");
    let mut types: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in &closed {
        warcio_check(f).unwrap_or_else(|e| panic!("warcio check {}: {e}", f.display()));
        for (t, uri) in warc_records(f) {
            *types.entry((t, uri)).or_default() += 1;
        }
    }
    let n = |t: &str, p: &str| types.get(&(t.to_string(), url(p))).copied().unwrap_or(0);
    assert!(
        n("revisit", "/etag") >= 2 && n("response", "/etag") == 1,
        "{types:?}"
    );
    assert!(
        n("revisit", "/same") >= 2 && n("response", "/same") == 1,
        "{types:?}"
    );
    assert!(
        n("revisit", "/changing") == 0 && n("response", "/changing") >= 3,
        "{types:?}"
    );
    let first_date = |p: &str| {
        let l = lines_for(&log, &url(p))[0];
        let file = env.warc_dir().join(l["warc_file"].as_str().unwrap());
        warc_record_at(&file, l["warc_offset"].as_u64().unwrap()).0["warc-date"].clone()
    };
    for (path, profile) in [
        ("/etag", "server-not-modified"),
        ("/same", "identical-payload-digest"),
    ] {
        let l = lines_for(&log, &url(path))[1];
        let file = env.warc_dir().join(l["warc_file"].as_str().unwrap());
        let (fields, block) = warc_record_at(&file, l["warc_offset"].as_u64().unwrap());
        assert_eq!(fields["warc-type"], "revisit", "{fields:?}");
        assert_eq!(
            fields["warc-profile"],
            format!("http://netpreserve.org/warc/1.1/revisit/{profile}")
        );
        assert_eq!(fields["warc-refers-to-target-uri"], url(path));
        assert_eq!(fields["warc-refers-to-date"], first_date(path));
        // headers only
        assert!(block.ends_with(b"\r\n\r\n") && !block.windows(6).any(|w| w == b"stable"));
    }
}

#[test]
fn the_schedule_and_the_validators_survive_kill_9() {
    let seen: Seen = Arc::default();
    let site = site(seen.clone());
    let env = recrawl_env();
    let daemon = env.start();
    let base = site.base("k.site.test");
    let paths = ["/e1", "/e2", "/e3"];
    let urls: Vec<String> = paths.iter().map(|p| format!("{base}{p}")).collect();
    daemon.submit(&urls);
    // each page visited, its completion durable (its due-index entry was read back: it
    // came due and went back to its queue)
    wait_until(
        "each page's revisit coming due",
        Duration::from_secs(30),
        || {
            let log = env.crawl_log();
            urls.iter().all(|u| !lines_for(&log, u).is_empty())
                && metric(&daemon.metrics(), "frontierd_revisits_due_total").unwrap_or(0.0) >= 3.0
        },
    );
    daemon.kill9();
    let before: BTreeMap<&str, usize> = paths.iter().map(|p| (*p, hits(&seen, p).len())).collect();

    // restart: every page comes back (none lost), and its first request is conditional,
    // with the validators stored before the kill
    let daemon = env.start();
    wait_until(
        "a visit of each page after the restart",
        Duration::from_secs(60),
        || paths.iter().all(|p| hits(&seen, p).len() > before[p]),
    );
    for p in paths {
        let after = &hits(&seen, p)[before[p]];
        assert_eq!(
            (after.1.as_deref(), after.2.as_deref()),
            (Some(ETAG), Some(LAST_MODIFIED)),
            "{p}: first request after the restart"
        );
    }
    wait_until("the 304 revisits logged", Duration::from_secs(30), || {
        let log = env.crawl_log();
        urls.iter().all(|u| {
            lines_for(&log, u)
                .iter()
                .any(|l| l["revisit"] == "not-modified" && l["status"] == 304)
        })
    });
    drop(daemon);
}

/// RFC 3339 UTC of a time `ahead` from now, and that time (whole seconds, as written).
fn rfc3339_in(ahead: Duration) -> (String, std::time::SystemTime) {
    let at = std::time::SystemTime::now() + ahead;
    let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let at = std::time::UNIX_EPOCH + Duration::from_secs(secs);
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap().trim().to_string(),
        at,
    )
}

/// With revisits off in the configuration, a submitted URL's own interval still schedules
/// it, and one with `refetch_at` is not fetched before that time; a bad field is a 400
/// naming it.
#[test]
fn per_url_fields_of_the_api_schedule_and_defer() {
    let seen: Seen = Arc::default();
    let site = site(seen.clone());
    let env = Env::new(&[("recrawl", "min_interval", "\"1s\"")]);
    let daemon = env.start();
    let base = site.base("u.site.test");
    let (later_at, later_time) = rfc3339_in(Duration::from_secs(4));
    let submitted = (Instant::now(), std::time::SystemTime::now());
    let body = format!(
        r#"[{{"url": "{base}/changing", "revisit_interval": "1s"}}, "{base}/same",
            {{"url": "{base}/etag", "refetch_at": "{later_at}"}}]"#
    );
    let (status, answer) = frontierd_e2e::http(&daemon.admin, "POST", "/v1/urls", body.as_bytes());
    assert_eq!(status, 200, "{answer}");
    wait_until(
        "three visits of the URL with its own interval",
        Duration::from_secs(60),
        || hits(&seen, "/changing").len() >= 3 && !hits(&seen, "/etag").is_empty(),
    );
    // the deferred URL: not before its time (the daemon and this process share the clock)
    let first_etag = submitted.1 + (hits(&seen, "/etag")[0].0 - submitted.0);
    let early = later_time.duration_since(first_etag).unwrap_or_default();
    assert!(
        early <= Duration::from_millis(50),
        "fetched {early:?} early"
    );
    // the plain URL follows the configuration: one pass
    assert_eq!(hits(&seen, "/same").len(), 1);

    let (status, answer) = frontierd_e2e::http(
        &daemon.admin,
        "POST",
        "/v1/urls",
        format!(r#"["{base}/a", {{"url": "{base}/b", "revisit_interval": "soon"}}]"#).as_bytes(),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("element 2") && answer.contains("revisit_interval"),
        "{answer}"
    );
}
