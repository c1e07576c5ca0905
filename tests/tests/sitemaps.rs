//! Sitemaps end to end: robots.txt names an index, the index a plain and a gzip urlset, and
//! their URLs are crawled with the discovery path `sitemap`, through the host's queue (its
//! gap) and its robots.txt (a disallowed sitemap is never requested); hostile sitemaps are
//! cut with a reason while the crawl goes on; the switch and the API's sitemap kind.

use std::io::Write;
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use frontierd_e2e::{http, lines_for, logged, metric, wait_until, Env, Reply, Site};

const GAP_MS: u64 = 300;
const CLOCK_SLACK: Duration = Duration::from_millis(2);

fn urlset(locs: &[String]) -> Vec<u8> {
    let mut s = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#,
    );
    for l in locs {
        s.push_str(&format!(
            "<url><loc>{l}</loc><lastmod>2026-01-01</lastmod><changefreq>daily</changefreq></url>\n"
        ));
    }
    s.push_str("</urlset>\n");
    s.into_bytes()
}

fn index(locs: &[String]) -> Vec<u8> {
    let mut s = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#,
    );
    for l in locs {
        s.push_str(&format!("<sitemap><loc>{l}</loc></sitemap>\n"));
    }
    s.push_str("</sitemapindex>\n");
    s.into_bytes()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn xml(body: Vec<u8>) -> Reply {
    Reply::Full {
        status: 200,
        headers: vec![("Content-Type".into(), "application/xml".into())],
        body,
    }
}

/// A `.gz` file as servers send it: gzip bytes, no `Content-Encoding`.
fn gz_file(body: Vec<u8>) -> Reply {
    Reply::Full {
        status: 200,
        headers: vec![("Content-Type".into(), "application/gzip".into())],
        body,
    }
}

#[test]
fn robots_index_plain_and_gzip_sitemaps_lead_to_pages_logged_as_sitemap() {
    let site = Site::start(|_| Reply::not_found());
    let base = site.base("shop.site.test");
    let b = base.clone();
    site.set_handler(move |r| match r.path.as_str() {
        "/robots.txt" => Reply::text(format!(
            "User-agent: *\nDisallow: /private/\n\nSitemap: {b}/sitemap_index.xml\nSitemap: {b}/private/sitemap.xml\n"
        )),
        "/sitemap_index.xml" => xml(index(&[
            format!("{b}/sitemap-pages.xml"),
            format!("{b}/sitemap-more.xml.gz"),
        ])),
        "/sitemap-pages.xml" => xml(urlset(&[format!("{b}/p1"), format!("{b}/p2")])),
        "/sitemap-more.xml.gz" => {
            gz_file(gzip(&urlset(&[format!("{b}/p3"), format!("{b}/p4")])))
        }
        "/private/sitemap.xml" => xml(urlset(&[format!("{b}/secret")])),
        p if p.starts_with("/p") => Reply::html("a page"),
        _ => Reply::not_found(),
    });
    let env = Env::new(&[
        ("sitemaps", "enabled", "true"),
        ("politeness", "min_delay", &format!("\"{GAP_MS}ms\"")),
        ("politeness", "max_delay", &format!("\"{GAP_MS}ms\"")),
    ]);
    let d = env.start();
    d.submit(&[format!("{base}/")]);
    let pages: Vec<String> = (1..=4).map(|i| format!("{base}/p{i}")).collect();
    wait_until(
        "the sitemaps' pages fetched",
        Duration::from_secs(60),
        || {
            let log = env.crawl_log();
            pages.iter().all(|p| logged(&log, p, "fetched"))
        },
    );
    let log = env.crawl_log();
    // the pages: discovery sitemap, hop path robots -> index -> child -> page
    for (i, p) in pages.iter().enumerate() {
        let line = lines_for(&log, p)[0];
        let child = if i < 2 {
            "sitemap-pages.xml"
        } else {
            "sitemap-more.xml.gz"
        };
        assert_eq!(line["discovery"], "sitemap", "{line}");
        assert_eq!(line["hop_path"], "MMM", "{line}");
        assert_eq!(line["via"], format!("{base}/{child}"), "{line}");
        assert_eq!(line["status"], 200, "{line}");
    }
    // the sitemaps themselves: fetched, and their line says what they held
    let index_line = lines_for(&log, &format!("{base}/sitemap_index.xml"))[0];
    assert_eq!(index_line["discovery"], "sitemap");
    assert_eq!(index_line["hop_path"], "M");
    assert_eq!(index_line["via"], format!("{base}/robots.txt"));
    assert!(
        index_line["reason"]
            .as_str()
            .unwrap()
            .starts_with("sitemap sitemapindex: "),
        "{index_line}"
    );
    let gz_line = lines_for(&log, &format!("{base}/sitemap-more.xml.gz"))[0];
    assert!(
        gz_line["reason"]
            .as_str()
            .unwrap()
            .starts_with("sitemap urlset (gzip): "),
        "{gz_line}"
    );
    assert_eq!(gz_line["hop_path"], "MM");
    // robots.txt disallows /private/: that sitemap is never requested, its line says why
    let private = format!("{base}/private/sitemap.xml");
    wait_until(
        "the disallowed sitemap dropped",
        Duration::from_secs(10),
        || logged(&env.crawl_log(), &private, "blocked-by-robots"),
    );
    let hits = site.hits_for("shop.site.test");
    assert!(
        hits.iter().all(|h| !h.path.starts_with("/private/")),
        "{hits:?}"
    );
    assert!(!logged(
        &env.crawl_log(),
        &format!("{base}/secret"),
        "fetched"
    ));
    // one host queue: robots.txt first, and every request (sitemaps included) kept the gap
    assert_eq!(hits[0].path, "/robots.txt");
    for w in hits.windows(2) {
        let gap = w[1].start - w[0].sent.expect("a whole answer");
        assert!(
            gap + CLOCK_SLACK >= Duration::from_millis(GAP_MS),
            "{} then {} only {gap:?} apart",
            w[0].path,
            w[1].path
        );
    }
    for path in [
        "/sitemap_index.xml",
        "/sitemap-pages.xml",
        "/sitemap-more.xml.gz",
    ] {
        assert_eq!(
            hits.iter().filter(|h| h.path == path).count(),
            1,
            "{path} requested more than once"
        );
    }
    let m = d.metrics();
    assert_eq!(
        metric(&m, "frontierd_sitemaps_total{result=\"parsed\"}"),
        Some(3.0)
    );
    // robots.txt's 2 sitemaps, the index's 2 children and the 4 pages
    assert_eq!(
        metric(&m, "frontierd_sitemap_urls_total{result=\"queued\"}"),
        Some(8.0)
    );
}

#[test]
fn hostile_sitemaps_are_cut_with_reasons_and_the_crawl_goes_on() {
    let site = Site::start(|_| Reply::not_found());
    let port = site.port;
    let base = move |h: &str| format!("http://{h}.site.test:{port}");
    let many_urls: Vec<String> = (0..60_000)
        .map(|i| format!("{}/u/{i}", base("many")))
        .collect();
    let many = urlset(&many_urls);
    // 64 MiB of XML inflated from well under 1 MiB of gzip
    let bomb = {
        let mut head = urlset(&[format!("{}/before-the-bomb", base("bomb"))]);
        head.truncate(head.len() - "</urlset>\n".len());
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(&head).unwrap();
        // comments of 1 KiB: each one event, so the byte cap is what cuts it
        let comments = format!("<!--{}-->\n", " ".repeat(1016)).repeat(1024);
        for _ in 0..64 {
            e.write_all(comments.as_bytes()).unwrap();
        }
        e.write_all(b"</urlset>").unwrap();
        e.finish().unwrap()
    };
    // one run of 8 MiB of whitespace between two entries: one XML event, past its limit
    let spaces = {
        let mut head = urlset(&[format!("{}/before-the-spaces", base("spaces"))]);
        head.truncate(head.len() - "</urlset>\n".len());
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(&head).unwrap();
        let run = vec![b' '; 1 << 20];
        for _ in 0..8 {
            e.write_all(&run).unwrap();
        }
        e.write_all(format!("<url><loc>{}/after</loc></url></urlset>", base("spaces")).as_bytes())
            .unwrap();
        e.finish().unwrap()
    };
    assert!(bomb.len() < 1 << 20);
    let b = base;
    site.set_handler(move |r| {
        let host = r.host.trim_end_matches(".site.test");
        match (host, r.path.as_str()) {
            (_, "/robots.txt") => Reply::text(format!(
                "User-agent: *\nAllow: /\nSitemap: {}/sitemap.xml\n",
                b(host)
            )),
            ("bomb", "/sitemap.xml") => gz_file(bomb.clone()),
            ("spaces", "/sitemap.xml") => gz_file(spaces.clone()),
            ("many", "/sitemap.xml") => xml(many.clone()),
            ("broken", "/sitemap.xml") => {
                let mut body = urlset(&[
                    format!("{}/ok1", b("broken")),
                    format!("{}/ok2", b("broken")),
                ]);
                body.truncate(body.len() - "</urlset>\n".len());
                body.extend_from_slice(b"<url><loc>http://broken.site.test/x</lo></url>");
                xml(body)
            }
            ("other", "/sitemap.xml") => xml(urlset(&[
                format!("{}/elsewhere", b("elsewhere")),
                format!("{}/mine", b("other")),
            ])),
            ("nest", "/sitemap.xml") => xml(index(&[format!("{}/level1.xml", b("nest"))])),
            ("nest", "/level1.xml") => xml(index(&[format!("{}/level2.xml", b("nest"))])),
            ("nest", "/level2.xml") => xml(urlset(&[format!("{}/deep", b("nest"))])),
            ("endless", "/sitemap.xml") => Reply::Endless,
            (_, p) if p != "/sitemap.xml" => Reply::html("a page"),
            _ => Reply::not_found(),
        }
    });
    let env = Env::new(&[
        ("sitemaps", "enabled", "true"),
        // the 60,000-URL sitemap comes from the configuration, the others from robots.txt
        (
            "sitemaps",
            "urls",
            &format!("[\"{}/sitemap.xml\"]", base("many")),
        ),
        ("sitemaps", "max_uncompressed_bytes", "8388608"),
        // its 50,000 kept URLs are parsed and judged, not crawled
        ("scope", "exclude", "[\"/u/\"]"),
    ]);
    let d = env.start();
    let hosts = ["bomb", "spaces", "broken", "other", "nest", "endless"];
    d.submit(
        &hosts
            .iter()
            .map(|h| format!("{}/", base(h)))
            .collect::<Vec<_>>(),
    );
    let reason = |url: &str| -> Option<String> {
        lines_for(&env.crawl_log(), url)
            .first()
            .map(|l| l["reason"].as_str().unwrap_or("").to_string())
    };
    let sitemap = |h: &str| format!("{}/sitemap.xml", base(h));
    wait_until(
        "every hostile sitemap logged",
        Duration::from_secs(90),
        || {
            [
                "bomb", "spaces", "broken", "other", "nest", "many", "endless",
            ]
            .iter()
            .all(|h| reason(&sitemap(h)).is_some())
                && reason(&format!("{}/level1.xml", base("nest"))).is_some()
        },
    );
    let bomb_reason = reason(&sitemap("bomb")).unwrap();
    assert!(
        bomb_reason.contains("(gzip): 8388608 bytes, 1 queued")
            && bomb_reason.contains("cut: more than 8388608 uncompressed bytes"),
        "{bomb_reason}"
    );
    let spaces_reason = reason(&sitemap("spaces")).unwrap();
    assert!(
        spaces_reason.contains("1 queued")
            && spaces_reason.contains("is longer than 262144 bytes: not read further"),
        "{spaces_reason}"
    );
    // the 60,000-URL sitemap came from sitemaps.urls (a seed), not from its robots.txt
    // line (which found it already queued)
    let many_line = lines_for(&env.crawl_log(), &sitemap("many"))[0].clone();
    assert_eq!(
        (&many_line["discovery"], &many_line["hop_path"]),
        (&"seed".into(), &"".into())
    );
    let many_reason = reason(&sitemap("many")).unwrap();
    assert!(
        many_reason.contains("0 queued, 50000 out-of-scope, 10000 over-limit")
            && many_reason.contains("cut: more than 50000 entries: 10000 more were cut"),
        "{many_reason}"
    );
    let broken_reason = reason(&sitemap("broken")).unwrap();
    assert!(
        broken_reason.contains("2 queued") && broken_reason.contains("cut: malformed XML at byte"),
        "{broken_reason}"
    );
    let other_reason = reason(&sitemap("other")).unwrap();
    assert!(
        other_reason.contains("1 queued, 1 out-of-scope"),
        "{other_reason}"
    );
    let nested = reason(&format!("{}/level1.xml", base("nest"))).unwrap();
    assert!(
        nested.contains("1 nested-index") && nested.contains("one level of nesting"),
        "{nested}"
    );
    // an endless body: cut by fetch.page_body_cap (or, on a slow machine, the fetch's
    // time limit: then retried and given up), never parsed past the first bytes
    let log = env.crawl_log();
    let endless = lines_for(&log, &sitemap("endless"))[0];
    let endless_reason = endless["reason"].as_str().unwrap();
    assert!(
        (endless["outcome"] == "fetched"
            && endless_reason.contains("0 queued; cut: ")
            && endless_reason.contains("body cut at fetch.page_body_cap"))
            || endless["outcome"] == "given-up",
        "{endless}"
    );
    // what the cut sitemaps held before the cut is crawled; what they must not push is not
    wait_until(
        "the URLs before the cuts fetched",
        Duration::from_secs(30),
        || {
            let log = env.crawl_log();
            [
                format!("{}/before-the-bomb", base("bomb")),
                format!("{}/before-the-spaces", base("spaces")),
                format!("{}/ok1", base("broken")),
                format!("{}/ok2", base("broken")),
                format!("{}/mine", base("other")),
            ]
            .iter()
            .all(|u| logged(&log, u, "fetched"))
        },
    );
    let hits = site.hits();
    assert!(
        hits.iter().all(|h| h.path != "/after"),
        "an entry after the over-long whitespace run was read"
    );
    assert!(
        hits.iter().all(|h| h.host != "elsewhere.site.test"),
        "another host was pushed"
    );
    assert!(
        hits.iter()
            .all(|h| !(h.host == "nest.site.test" && h.path == "/level2.xml")),
        "an index two levels down was followed"
    );
    assert!(hits.iter().all(|h| !h.path.starts_with("/u/")));
    // the daemon is still crawling: a page submitted now is fetched
    let after = format!("{}/after", base("fine"));
    d.submit(std::slice::from_ref(&after));
    wait_until(
        "a page after the hostile sitemaps",
        Duration::from_secs(30),
        || logged(&env.crawl_log(), &after, "fetched"),
    );
    assert!(d.healthy());
    let m = d.metrics();
    // too-large: the bomb, and the endless body when it was cut by the byte cap
    for result in ["too-large", "too-many-urls", "malformed", "nested-index"] {
        let n = metric(
            &m,
            &format!("frontierd_sitemaps_total{{result=\"{result}\"}}"),
        );
        assert!(n >= Some(1.0), "{result}: {n:?}");
    }
    assert_eq!(
        metric(&m, "frontierd_sitemap_urls_total{result=\"over-limit\"}"),
        Some(10_000.0)
    );
    assert!(
        env.daemon_log_count("sitemap cut") >= 4,
        "{}",
        env.daemon_log()
    );
}

#[test]
fn sitemaps_are_off_by_default_and_a_submitted_one_needs_them_on() {
    let site = Site::start(|_| Reply::not_found());
    let base = site.base("plain.site.test");
    let b = base.clone();
    site.set_handler(move |r| match r.path.as_str() {
        "/robots.txt" => Reply::text(format!(
            "User-agent: *\nAllow: /\nSitemap: {b}/sitemap.xml\n"
        )),
        "/sitemap.xml" | "/listed.xml" => xml(urlset(&[format!("{b}/from-sitemap")])),
        _ => Reply::html("a page"),
    });
    // off (the default): robots.txt's Sitemap line is not followed, a submitted sitemap
    // is refused with the key to change
    let env = Env::new(&[]);
    let d = env.start();
    let body = format!("[{{\"url\": \"{base}/listed.xml\", \"kind\": \"sitemap\"}}]");
    let (status, answer) = http(&d.admin, "POST", "/v1/urls", body.as_bytes());
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("sitemaps.enabled = false"), "{answer}");
    d.submit(&[format!("{base}/")]);
    wait_until("the page fetched", Duration::from_secs(20), || {
        logged(&env.crawl_log(), &format!("{base}/"), "fetched")
    });
    drop(d);
    assert!(site.hits().iter().all(|h| !h.path.ends_with(".xml")));

    // on: the submitted sitemap is parsed, its URL crawled; a plain string stays a page
    let env = Env::new(&[("sitemaps", "enabled", "true")]);
    let d = env.start();
    let body = format!(
        "[{{\"url\": \"{base}/listed.xml\", \"kind\": \"sitemap\"}}, \"{base}/plain\", {{\"url\": \"{base}/page\", \"kind\": \"page\"}}]"
    );
    let (status, answer) = http(&d.admin, "POST", "/v1/urls", body.as_bytes());
    assert_eq!(status, 200, "{answer}");
    let from = format!("{base}/from-sitemap");
    wait_until(
        "the submitted sitemap's URL fetched",
        Duration::from_secs(30),
        || logged(&env.crawl_log(), &from, "fetched"),
    );
    let log = env.crawl_log();
    let listed = lines_for(&log, &format!("{base}/listed.xml"))[0];
    assert_eq!(
        (&listed["discovery"], &listed["hop_path"]),
        (&"seed".into(), &"".into())
    );
    assert!(listed["reason"]
        .as_str()
        .unwrap()
        .starts_with("sitemap urlset"));
    assert_eq!(lines_for(&log, &from)[0]["hop_path"], "M");
    let (status, answer) = http(
        &d.admin,
        "POST",
        "/v1/urls",
        b"[{\"url\": \"x\", \"kind\": \"feed\"}]",
    );
    assert_eq!(status, 400, "{answer}");
}

/// RFC 3339 UTC of now, in whole seconds (as a site writes `lastmod`).
fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A page whose sitemap `lastmod` moves past its last fetch is fetched again once the
/// sitemap is read again (`sitemaps.refetch_interval`), while its neighbour, whose
/// `lastmod` did not move, is not: the pages' own revisit interval is 30 days, so only
/// `lastmod` explains the refetch. A lastmod read again after that refetch moves nothing.
#[test]
fn a_lastmod_later_than_the_last_fetch_makes_a_known_page_due_now() {
    use std::sync::{Arc, Mutex};
    let site = Site::start(|_| Reply::not_found());
    let base = site.base("news.site.test");
    let b = base.clone();
    // the lastmod the sitemap gives /changed (from the start: long ago)
    let changed_lastmod = Arc::new(Mutex::new("2026-01-01".to_string()));
    let lm = changed_lastmod.clone();
    site.set_handler(move |r| match r.path.as_str() {
        "/robots.txt" => Reply::text(format!("User-agent: *\nSitemap: {b}/sitemap.xml\n")),
        "/sitemap.xml" => xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>{b}/changed</loc><lastmod>{}</lastmod></url>
<url><loc>{b}/same</loc><lastmod>2026-01-01</lastmod></url>
</urlset>
"#,
            lm.lock().unwrap()
        )
        .into_bytes()),
        "/changed" | "/same" => Reply::html(format!("{} {}", r.path, r.nth)),
        _ => Reply::not_found(),
    });
    let env = Env::new(&[
        ("sitemaps", "enabled", "true"),
        ("sitemaps", "refetch_interval", "\"2s\""),
        ("recrawl", "default_interval", "\"30d\""),
        ("recrawl", "min_interval", "\"1s\""),
    ]);
    let d = env.start();
    d.submit(&[format!("{base}/")]);
    let count = |path: &str| site.hits().iter().filter(|h| h.path == path).count();
    wait_until("both pages fetched once", Duration::from_secs(30), || {
        count("/changed") == 1 && count("/same") == 1
    });
    // the site changes /changed a second after our fetch of it (lastmod in whole seconds)
    let fetched = site
        .hits()
        .iter()
        .find(|h| h.path == "/changed")
        .unwrap()
        .start;
    wait_until("a second after the fetch", Duration::from_secs(5), || {
        fetched.elapsed() > Duration::from_millis(1100)
    });
    *changed_lastmod.lock().unwrap() = rfc3339_now();
    let sitemap_reads_at_change = count("/sitemap.xml");
    wait_until(
        "/changed fetched again after the sitemap was read again",
        Duration::from_secs(30),
        || count("/changed") == 2,
    );
    assert!(count("/sitemap.xml") > sitemap_reads_at_change);
    // two more reads of the sitemap: /same keeps its 30 days, /changed is not fetched a
    // third time (its refetch came after its lastmod)
    let reads = count("/sitemap.xml");
    wait_until(
        "the sitemap read twice more",
        Duration::from_secs(30),
        || count("/sitemap.xml") >= reads + 2,
    );
    // (the read before the last one is applied: the last came a refetch interval later)
    let m = d.metrics();
    assert_eq!(count("/same"), 1, "/same refetched without a newer lastmod");
    assert_eq!(
        count("/changed"),
        2,
        "/changed refetched again for the same lastmod"
    );
    assert_eq!(
        metric(&m, "frontierd_sitemap_lastmod_total{result=\"due\"}"),
        Some(1.0),
        "{m}"
    );
    assert!(
        metric(&m, "frontierd_sitemap_lastmod_total{result=\"not-newer\"}").unwrap_or(0.0) >= 3.0,
        "{m}"
    );
}
