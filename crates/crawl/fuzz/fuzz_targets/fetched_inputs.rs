//! What a server sends that the crawl crate reads: a sitemap body (plain or gzip), an
//! HTML page with its META robots tags, an `X-Robots-Tag` value, a W3C datetime. Any
//! bytes: never a panic, never more than the limits, and only fetchable links come out.
//!
//! Input: byte 0 sets the limits (max links, max sitemap entries, the scan cap, whether
//! nofollow links are kept); the rest is the body. Its first line, read as text, is also
//! the `X-Robots-Tag` value and the datetime.

#![no_main]

use std::collections::HashSet;

use crawl::links::apply_x_robots_tag;
use crawl::sitemap::{parse_sitemap, SitemapLimits};
use crawl::{extract_links, LinkConfig, RobotsDirectives};
use libfuzzer_sys::fuzz_target;
use url::Url;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, body)) = data.split_first() else {
        return;
    };
    let max_links = usize::from(knobs & 0x0f);
    let max_urls = usize::from((knobs >> 4) & 0x07);
    let keep_nofollow = knobs & 0x80 != 0;

    // a sitemap: at most its limits, whatever the bytes
    let max_bytes = (body.len() as u64 / 2).max(64);
    let sitemap = parse_sitemap(
        body,
        &SitemapLimits {
            max_urls,
            max_bytes,
        },
    );
    assert!(
        sitemap.entries.len() <= max_urls,
        "{} entries",
        sitemap.entries.len()
    );
    assert!(sitemap.bytes <= max_bytes, "{} bytes read", sitemap.bytes);

    // a page: only absolute http(s) URLs with a host, no fragment, each once, at most
    // max_links of them, none when the page says nofollow
    let text = String::from_utf8_lossy(body);
    let first_line = text.lines().next().unwrap_or("");
    let page_url = Url::parse("http://a.test/dir/page?q=1").expect("a fixed URL");
    let config = LinkConfig {
        product_token: "frontierd".into(),
        keep_nofollow_links: keep_nofollow,
        max_scan_bytes: body.len().max(1) - usize::from(knobs & 0x40 != 0) * body.len() / 2,
        max_links,
    };
    let page = extract_links(&page_url, body, &[first_line], &config);
    assert!(page.links.len() <= max_links, "{} links", page.links.len());
    if !page.robots.follow {
        assert!(page.links.is_empty());
    }
    let mut seen = HashSet::new();
    for link in &page.links {
        assert!(matches!(link.scheme(), "http" | "https"), "{link}");
        assert!(link.host().is_some(), "{link}");
        assert!(link.fragment().is_none(), "{link}");
        assert!(seen.insert(link.as_str()), "{link} twice");
    }
    Url::parse(&page.base).expect("the base is a URL");

    // a header value: directives only ever get more restrictive
    let mut robots = RobotsDirectives::default();
    apply_x_robots_tag(&mut robots, first_line, "frontierd");
    let before = robots;
    apply_x_robots_tag(&mut robots, first_line, "frontierd");
    assert!(before.follow || !robots.follow);
    assert!(before.index || !robots.index);

    let _ = crawl::sitemap::parse_w3c_datetime(first_line);
});
