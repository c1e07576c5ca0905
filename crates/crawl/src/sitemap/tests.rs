use std::io::Write;

use fetcher::{ContentCoding, FetchOutcome, HeaderMap, StatusCode};
use flate2::write::GzEncoder;
use flate2::Compression;
use regex::Regex;
use url::Url;

use super::*;
use crate::crawl_log::Outcome;
use crate::links::LinkConfig;
use crate::page::{FollowRules, Page};
use crate::scope::{Scope, ScopeMode};
use frontier::{EntryKind, PageOutcome, SitemapSource};

fn urlset(locs: &[&str]) -> String {
    let mut s = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#,
    );
    for l in locs {
        s.push_str(&format!("<url><loc>{l}</loc></url>\n"));
    }
    s.push_str("</urlset>");
    s
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn locs(p: &ParsedSitemap) -> Vec<&str> {
    p.entries.iter().map(|e| e.loc.as_str()).collect()
}

#[test]
fn urlset_fields_namespaces_and_entities() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment -->
<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"
           xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <sm:url>
    <sm:loc> http://a.test/p?x=1&amp;y=&#50; </sm:loc>
    <sm:lastmod>2005-01-01</sm:lastmod>
    <sm:changefreq>Monthly</sm:changefreq>
    <sm:priority>0.8</sm:priority>
    <image:image><image:loc>http://a.test/img.png</image:loc></image:image>
  </sm:url>
  <sm:url><sm:loc><![CDATA[http://a.test/c]]></sm:loc><sm:priority>7</sm:priority>
    <sm:changefreq>sometimes</sm:changefreq><sm:lastmod>soon</sm:lastmod></sm:url>
  <sm:url><sm:lastmod>2005-01-01</sm:lastmod></sm:url>
  <sm:url/>
</sm:urlset>"#;
    let p = parse_sitemap(xml.as_bytes(), &SitemapLimits::default());
    assert_eq!(p.kind, Some(SitemapType::UrlSet));
    assert_eq!(p.cut, None);
    assert!(!p.gzip);
    assert_eq!(locs(&p), ["http://a.test/p?x=1&y=2", "http://a.test/c"]);
    assert_eq!(
        p.entries[0].hints,
        SitemapHints {
            lastmod_ms: Some(12_784 * 86_400_000),
            changefreq: Some(ChangeFreq::Monthly),
            priority_permille: Some(800),
        }
    );
    // values that do not parse are left out, the entry is kept
    assert_eq!(p.entries[1].hints, SitemapHints::default());
    // entries without a loc
    assert_eq!(p.invalid, 2);
    assert_eq!(p.bytes, xml.len() as u64);
}

#[test]
fn index_lists_sitemaps_with_lastmod_only() {
    let xml = r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <sitemap><loc>http://a.test/s1.xml</loc><lastmod>2005-01-01T12:00:00Z</lastmod>
        <changefreq>daily</changefreq></sitemap>
      <sitemap><loc>http://a.test/s2.xml.gz</loc></sitemap>
      <url><loc>http://a.test/not-in-an-index</loc></url>
    </sitemapindex>"#;
    let p = parse_sitemap(xml.as_bytes(), &SitemapLimits::default());
    assert_eq!(p.kind, Some(SitemapType::Index));
    assert_eq!(
        locs(&p),
        ["http://a.test/s1.xml", "http://a.test/s2.xml.gz"]
    );
    assert_eq!(
        p.entries[0].hints,
        SitemapHints {
            lastmod_ms: Some(12_784 * 86_400_000 + 12 * 3_600_000),
            ..SitemapHints::default()
        }
    );
}

#[test]
fn gzip_reads_like_plain() {
    let xml = urlset(&["http://a.test/1", "http://a.test/2"]);
    let plain = parse_sitemap(xml.as_bytes(), &SitemapLimits::default());
    let zipped = parse_sitemap(&gzip(xml.as_bytes()), &SitemapLimits::default());
    assert!(zipped.gzip);
    assert_eq!(zipped.entries, plain.entries);
    assert_eq!(zipped.bytes, plain.bytes);
    assert_eq!(zipped.cut, None);
}

#[test]
fn past_fifty_thousand_urls_the_rest_is_counted_and_cut() {
    let many: Vec<String> = (0..60_000).map(|i| format!("http://a.test/{i}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let p = parse_sitemap(urlset(&refs).as_bytes(), &SitemapLimits::default());
    assert_eq!(p.entries.len(), PROTOCOL_MAX_URLS);
    assert_eq!(p.entries.last().unwrap().loc, "http://a.test/49999");
    assert_eq!(
        p.cut,
        Some(Cut::TooManyUrls {
            limit: 50_000,
            over: 10_000
        })
    );
    assert!(p.cut.unwrap().to_string().contains("10000 more were cut"));
}

#[test]
fn a_gzip_bomb_is_cut_at_the_uncompressed_cap() {
    // 16 MiB of inflated XML from a gzip body of well under 1 MiB
    // (comments of 1 KiB each: one event over MAX_EVENT_BYTES is another cut, below)
    let xml = urlset(&["http://a.test/first"]).replace("</urlset>", "");
    let mut bomb = GzEncoder::new(Vec::new(), Compression::fast());
    bomb.write_all(xml.as_bytes()).unwrap();
    let comment = format!("<!--{}-->\n", " ".repeat(1016));
    let chunk = comment.repeat(1024);
    for _ in 0..16 {
        bomb.write_all(chunk.as_bytes()).unwrap();
    }
    bomb.write_all(b"</urlset>").unwrap();
    let body = bomb.finish().unwrap();
    assert!(body.len() < 1 << 20, "{}", body.len());
    let limits = SitemapLimits {
        max_bytes: 4 << 20,
        ..SitemapLimits::default()
    };
    let p = parse_sitemap(&body, &limits);
    assert_eq!(p.cut, Some(Cut::TooLarge { limit: 4 << 20 }));
    assert_eq!(p.bytes, 4 << 20);
    assert_eq!(locs(&p), ["http://a.test/first"]);
    // the same document within the cap reads to its end
    let whole = parse_sitemap(
        &body,
        &SitemapLimits {
            max_bytes: 17 << 20,
            ..limits
        },
    );
    assert_eq!(whole.cut, None);
}

/// Whitespace between entries, one giant text node, a giant attribute, a giant comment:
/// each is one XML event, held whole while read; past MAX_EVENT_BYTES the parse ends there
/// with what came before kept.
#[test]
fn an_event_longer_than_its_limit_ends_the_parse_where_it_starts() {
    let limit = MAX_EVENT_BYTES as usize;
    let head = urlset(&["http://a.test/1"]).replace("</urlset>", "");
    let cases = [
        (
            "whitespace",
            format!(
                "{head}{}<url><loc>http://a.test/2</loc></url></urlset>",
                " ".repeat(limit + 1)
            ),
        ),
        (
            "text",
            format!(
                "{head}<url><loc>http://a.test/{}</loc></url></urlset>",
                "x".repeat(limit + 1)
            ),
        ),
        (
            "attribute",
            format!(
                "{head}<url a=\"{}\"><loc>http://a.test/2</loc></url></urlset>",
                "y".repeat(limit + 1)
            ),
        ),
        (
            "comment",
            format!("{head}<!--{}--></urlset>", "<>".repeat(limit / 2 + 1)),
        ),
    ];
    for (what, xml) in cases {
        for body in [xml.as_bytes().to_vec(), gzip(xml.as_bytes())] {
            let p = parse_sitemap(&body, &SitemapLimits::default());
            match &p.cut {
                Some(Cut::EventTooLarge { position, limit: l }) => {
                    assert_eq!(*l, MAX_EVENT_BYTES, "{what}");
                    assert!(*position >= head.len() as u64 - 1, "{what}: {position}");
                }
                other => panic!("{what}: {other:?}"),
            }
            assert_eq!(locs(&p), ["http://a.test/1"], "{what}");
            // not read much past the event's limit
            assert!(
                p.bytes <= head.len() as u64 + 2 * MAX_EVENT_BYTES,
                "{what}: {}",
                p.bytes
            );
        }
    }
    // just under the limit is read
    let xml = format!(
        "{head}{}<url><loc>http://a.test/2</loc></url></urlset>",
        " ".repeat(limit - 64)
    );
    let p = parse_sitemap(xml.as_bytes(), &SitemapLimits::default());
    assert_eq!(p.cut, None);
    assert_eq!(locs(&p), ["http://a.test/1", "http://a.test/2"]);
}

#[test]
fn a_body_of_exactly_the_cap_is_not_cut() {
    let xml = urlset(&["http://a.test/1"]);
    let limits = SitemapLimits {
        max_bytes: xml.len() as u64,
        ..SitemapLimits::default()
    };
    assert_eq!(parse_sitemap(xml.as_bytes(), &limits).cut, None);
    let smaller = SitemapLimits {
        max_bytes: xml.len() as u64 - 1,
        ..limits
    };
    let p = parse_sitemap(xml.as_bytes(), &smaller);
    assert_eq!(
        p.cut,
        Some(Cut::TooLarge {
            limit: xml.len() as u64 - 1
        })
    );
    assert_eq!(locs(&p), ["http://a.test/1"]);
}

#[test]
fn malformed_xml_keeps_what_came_before_and_says_where() {
    let good = urlset(&["http://a.test/1", "http://a.test/2"]).replace("</urlset>", "");
    let xml = format!("{good}<url><loc>http://a.test/3</lo></url></urlset>");
    let p = parse_sitemap(xml.as_bytes(), &SitemapLimits::default());
    assert_eq!(locs(&p), ["http://a.test/1", "http://a.test/2"]);
    let Some(Cut::Malformed { position, error }) = &p.cut else {
        panic!("{:?}", p.cut);
    };
    assert!(*position >= good.len() as u64, "{position}");
    assert!(error.contains("lo"), "{error}");
    // a document that stops in the middle
    let p = parse_sitemap(good.as_bytes(), &SitemapLimits::default());
    assert_eq!(p.entries.len(), 2);
    assert!(matches!(p.cut, Some(Cut::Malformed { .. })), "{:?}", p.cut);
    // a gzip stream cut short: the entries inflated before the end are kept
    let xml = urlset(&(0..2000).map(|_| "http://a.test/x").collect::<Vec<_>>());
    let mut body = gzip(xml.as_bytes());
    body.truncate(body.len() / 2);
    let p = parse_sitemap(&body, &SitemapLimits::default());
    assert!(matches!(p.cut, Some(Cut::Gzip { .. })), "{:?}", p.cut);
    assert!(!p.entries.is_empty());
}

#[test]
fn what_is_not_a_sitemap_says_so() {
    let p = parse_sitemap(
        b"<!DOCTYPE html><html><body><a href='/x'>x</a></body></html>",
        &SitemapLimits::default(),
    );
    assert_eq!(
        p.cut,
        Some(Cut::NotASitemap {
            start: "<html>".into()
        })
    );
    let p = parse_sitemap(
        format!("{}<urlset>", "a".repeat(100_000)).as_bytes(),
        &SitemapLimits::default(),
    );
    assert_eq!(
        p.cut,
        Some(Cut::NotASitemap {
            start: "text".into()
        })
    );
    for nothing in [
        &b""[..],
        b"<?xml version=\"1.0\"?>",
        b" <!-- only a comment --> ",
    ] {
        let p = parse_sitemap(nothing, &SitemapLimits::default());
        assert_eq!(p.kind, None);
        assert_eq!(
            p.cut,
            Some(Cut::Malformed {
                position: nothing.len() as u64,
                error: "no root element".into()
            })
        );
    }
    let p = parse_sitemap(b"\x1f\x8b", &SitemapLimits::default());
    assert!(matches!(p.cut, Some(Cut::Gzip { .. })), "{:?}", p.cut);
}

#[test]
fn an_overlong_loc_makes_its_entry_invalid() {
    let long = format!("http://a.test/{}", "x".repeat(MAX_FIELD_BYTES));
    let p = parse_sitemap(
        urlset(&[&long, "http://a.test/ok"]).as_bytes(),
        &SitemapLimits::default(),
    );
    assert_eq!(locs(&p), ["http://a.test/ok"]);
    assert_eq!(p.invalid, 1);
}

#[test]
fn changefreq_maps_to_a_revisit_interval() {
    let h = |n: u64| Some(Duration::from_secs(n * 3600));
    assert_eq!(revisit_interval(ChangeFreq::Always), h(1));
    assert_eq!(revisit_interval(ChangeFreq::Hourly), h(1));
    assert_eq!(revisit_interval(ChangeFreq::Daily), h(24));
    assert_eq!(revisit_interval(ChangeFreq::Weekly), h(7 * 24));
    assert_eq!(revisit_interval(ChangeFreq::Monthly), h(30 * 24));
    assert_eq!(revisit_interval(ChangeFreq::Yearly), h(365 * 24));
    assert_eq!(revisit_interval(ChangeFreq::Never), None);
    let with = |c| SitemapHints {
        changefreq: Some(c),
        ..SitemapHints::default()
    };
    assert_eq!(
        revisit_interval_ms(&with(ChangeFreq::Daily)),
        Some(86_400_000)
    );
    assert_eq!(revisit_interval_ms(&with(ChangeFreq::Never)), Some(0));
    assert_eq!(revisit_interval_ms(&SitemapHints::default()), None);
    let hints = SitemapHints {
        lastmod_ms: Some(2_000),
        ..SitemapHints::default()
    };
    assert!(changed_since_fetch(&hints, 1_000));
    assert!(!changed_since_fetch(&hints, 2_000));
    assert!(!changed_since_fetch(&SitemapHints::default(), 0));
}

// ------------------------------------------------------------------ judge

fn rules(mode: ScopeMode, exclude: &[&str]) -> FollowRules {
    FollowRules {
        follow_links: true,
        max_depth: 3,
        max_redirect_hops: 10,
        scope: Scope {
            mode,
            include: Vec::new(),
            exclude: exclude.iter().map(|r| Regex::new(r).unwrap()).collect(),
        },
        links: LinkConfig::new("frontierd"),
    }
}

fn ok(body: &str) -> FetchOutcome {
    FetchOutcome::Success {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: body.as_bytes().to_vec().into(),
        truncated: false,
        content_coding: ContentCoding::Identity,
        max_age: None,
    }
}

fn judge(
    rules: &FollowRules,
    at: &str,
    source: SitemapSource,
    fetched: &FetchOutcome,
) -> SitemapVerdict {
    let parsed = Url::parse(at).unwrap();
    let page = Page {
        url: at,
        parsed: &parsed,
        depth: 0,
        hops: "M",
    };
    judge_sitemap(rules, &SitemapLimits::default(), &page, source, fetched, 7)
}

#[test]
fn listed_urls_are_queued_as_sitemap_hops_with_their_hints() {
    let xml = r#"<urlset><url><loc>http://a.test/p</loc><changefreq>daily</changefreq></url>
        <url><loc>http://b.test/other-host</loc></url>
        <url><loc>/relative</loc></url>
        <url><loc>mailto:x@a.test</loc></url>
        <url><loc>http://a.test/private/x</loc></url></urlset>"#;
    let r = rules(ScopeMode::SameHost, &["/private/"]);
    let v = judge(
        &r,
        "http://a.test/sitemap.xml",
        SitemapSource::Robots,
        &ok(xml),
    );
    assert_eq!(v.page.outcome, PageOutcome::Done { response_ms: 7 });
    assert_eq!(v.page.discovered.len(), 1);
    let item = &v.page.discovered[0];
    assert_eq!(
        (
            item.url.as_str(),
            item.depth,
            item.via.as_deref(),
            item.hops.as_str()
        ),
        (
            "http://a.test/p",
            0,
            Some("http://a.test/sitemap.xml"),
            "MM"
        )
    );
    assert_eq!(item.kind, EntryKind::Page);
    assert_eq!(
        item.hints.and_then(|h| h.changefreq),
        Some(ChangeFreq::Daily)
    );
    // changefreq daily: the URL's own revisit interval
    assert_eq!(item.revisit_interval_ms, Some(86_400_000));
    assert_eq!(item.refetch_at_ms, None);
    let report = v.report.unwrap();
    assert_eq!(report.admitted, 1);
    assert_eq!(report.dropped(Dropped::OutOfScope), 2);
    assert_eq!(report.dropped(Dropped::InvalidUrl), 2);
    assert_eq!(report.result(), "parsed");
    let (outcome, reason) = v.page.log.unwrap();
    assert_eq!(outcome, Outcome::Fetched);
    assert_eq!(
        reason,
        format!(
            "sitemap urlset: {} bytes, 1 queued, 2 invalid-url, 2 out-of-scope",
            xml.len()
        )
    );
    // a scope that allows other hosts lets the sitemap list them
    let any = rules(ScopeMode::Any, &[]);
    let v = judge(
        &any,
        "http://a.test/sitemap.xml",
        SitemapSource::Robots,
        &ok(xml),
    );
    assert_eq!(v.report.unwrap().admitted, 3);
}

#[test]
fn a_sitemap_not_named_by_robots_lists_only_under_its_directory() {
    let xml = r#"<urlset><url><loc>http://a.test/catalog/x</loc></url>
        <url><loc>http://a.test/images/y</loc></url></urlset>"#;
    let r = rules(ScopeMode::SameHost, &[]);
    for source in [SitemapSource::Listed, SitemapSource::IndexChild] {
        let v = judge(&r, "http://a.test/catalog/sitemap.xml", source, &ok(xml));
        let urls: Vec<&str> = v.page.discovered.iter().map(|i| i.url.as_str()).collect();
        assert_eq!(urls, ["http://a.test/catalog/x"]);
        assert_eq!(v.report.unwrap().dropped(Dropped::OutsideSitemapPath), 1);
    }
    // robots.txt speaks for the whole host
    let v = judge(
        &r,
        "http://a.test/catalog/sitemap.xml",
        SitemapSource::Robots,
        &ok(xml),
    );
    assert_eq!(v.page.discovered.len(), 2);
}

#[test]
fn an_index_queues_its_sitemaps_and_an_index_in_an_index_is_cut() {
    let xml = r#"<sitemapindex><sitemap><loc>http://a.test/s1.xml</loc></sitemap>
        <sitemap><loc>http://a.test/s2.xml.gz</loc><lastmod>2026-01-02</lastmod></sitemap></sitemapindex>"#;
    let r = rules(ScopeMode::SameHost, &[]);
    let v = judge(
        &r,
        "http://a.test/index.xml",
        SitemapSource::Robots,
        &ok(xml),
    );
    let kinds: Vec<(&str, EntryKind)> = v
        .page
        .discovered
        .iter()
        .map(|i| (i.url.as_str(), i.kind))
        .collect();
    let child = EntryKind::Sitemap(SitemapSource::IndexChild);
    assert_eq!(
        kinds,
        [
            ("http://a.test/s1.xml", child),
            ("http://a.test/s2.xml.gz", child)
        ]
    );
    // a child keeps its lastmod only (for its schedule), and no interval of its own here
    let lastmods: Vec<Option<i64>> = v
        .page
        .discovered
        .iter()
        .map(|i| i.hints.and_then(|h| h.lastmod_ms))
        .collect();
    assert_eq!(lastmods, [None, Some(1_767_312_000_000)]);
    assert!(v
        .page
        .discovered
        .iter()
        .all(|i| i.revisit_interval_ms.is_none()));
    // the same index found as a child of an index: nothing queued, said why
    let v = judge(
        &r,
        "http://a.test/index.xml",
        SitemapSource::IndexChild,
        &ok(xml),
    );
    assert!(v.page.discovered.is_empty());
    let report = v.report.unwrap();
    assert_eq!(report.dropped(Dropped::NestedIndex), 2);
    assert_eq!(report.result(), "nested-index");
    assert!(report.summary().contains("one level of nesting"));
}

#[test]
fn answers_other_than_2xx_are_judged_like_a_page_and_keep_the_sitemap_kind() {
    let r = rules(ScopeMode::SameHost, &[]);
    let redirect = FetchOutcome::Redirect {
        status: StatusCode::MOVED_PERMANENTLY,
        location: Some(Url::parse("http://a.test/new-sitemap.xml").unwrap()),
    };
    let v = judge(
        &r,
        "http://a.test/sitemap.xml",
        SitemapSource::Robots,
        &redirect,
    );
    assert!(v.report.is_none());
    assert_eq!(v.page.discovered.len(), 1);
    assert_eq!(
        v.page.discovered[0].kind,
        EntryKind::Sitemap(SitemapSource::Robots)
    );
    let v = judge(
        &r,
        "http://a.test/sitemap.xml",
        SitemapSource::Robots,
        &FetchOutcome::ServerError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: None,
        },
    );
    assert!(!v.page.is_done());
    // a 2xx HTML page where a sitemap was expected: fetched, nothing queued, said why
    let v = judge(
        &r,
        "http://a.test/sitemap.xml",
        SitemapSource::Listed,
        &ok("<html><a href='/x'>x</a></html>"),
    );
    assert!(v.page.discovered.is_empty());
    assert_eq!(v.report.unwrap().result(), "not-a-sitemap");
}

#[test]
fn priority_is_relative_to_its_sitemap_and_bounded() {
    const H: u64 = 3_600_000;
    let hint = |p: Option<u16>| SitemapHints {
        priority_permille: p,
        ..SitemapHints::default()
    };
    // every URL at 1.0: the mean is 1.0, nobody gains
    let all_top = [hint(Some(1000)), hint(Some(1000))];
    let mean = mean_priority_permille(all_top.iter().map(Some));
    assert_eq!(mean, 1000);
    assert_eq!(
        priority_scaled_interval(24 * H, 1000, mean, H, 720 * H),
        24 * H
    );
    // one at 1.0 among 0.5s (and a missing one, read as 0.5)
    let mixed = [hint(Some(1000)), hint(Some(500)), hint(None)];
    let mean = mean_priority_permille(mixed.iter().map(Some));
    assert_eq!(mean, 666);
    let top = priority_scaled_interval(24 * H, 1000, mean, H, 720 * H);
    let mid = priority_scaled_interval(24 * H, 500, mean, H, 720 * H);
    assert!(top < 24 * H && 24 * H < mid, "{top} {mid}");
    // never less than half nor more than twice, and within min/max
    assert_eq!(
        priority_scaled_interval(24 * H, 1000, 0, H, 720 * H),
        12 * H
    );
    assert_eq!(
        priority_scaled_interval(24 * H, 0, 1000, H, 720 * H),
        48 * H
    );
    assert_eq!(
        priority_scaled_interval(24 * H, 1000, 0, 20 * H, 720 * H),
        20 * H
    );
    assert_eq!(priority_scaled_interval(24 * H, 0, 1000, H, 30 * H), 30 * H);
    // out-of-range input is read as 1.0
    assert_eq!(
        priority_scaled_interval(24 * H, 5000, 1000, H, 720 * H),
        24 * H
    );
    assert_eq!(mean_priority_permille(std::iter::empty()), 500);
}
