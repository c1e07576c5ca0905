//! Link extraction from HTML pages, for following links within the configured scope, and
//! the robots directives (META tag, `X-Robots-Tag`) that decide whether the page's links may
//! be followed at all (spec/robots.md §9).
//!
//! Tokenizer choice: html5ever's spec-conformant *tokenizer* alone (no tree builder). It
//! decodes character references in attribute values (`&amp;` in query strings), never
//! panics on malformed markup, and lets us switch to raw-text states for `<script>`,
//! `<style>`, `<textarea>`…, so markup inside scripts is not mistaken for links. A DOM
//! (scraper) would cost memory for nothing here; `tl` does not decode entities and
//! `lol_html` is built for rewriting streams, with more machinery than we need.

use std::cell::RefCell;
use std::collections::HashSet;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use url::Url;

/// Default cap on the bytes of a page that are scanned: 4 MiB.
pub const DEFAULT_MAX_SCAN_BYTES: usize = 4 << 20;

/// Default cap on the links taken from one page: Heritrix's `maxOutlinks` (6,000). Each
/// link costs a few hundred bytes until it is queued (its URL, the page's URL as its `via`,
/// its hop path), so a page of a million links must not be taken whole.
pub const DEFAULT_MAX_LINKS: usize = 6_000;

/// How links are extracted.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Our robots product token (e.g. `frontierd`): `<meta name="frontierd">` and
    /// `X-Robots-Tag: frontierd: …` apply to us, compared case-insensitively.
    pub product_token: String,
    /// Keep links marked `rel=nofollow` (skipped by default).
    pub keep_nofollow_links: bool,
    /// Only the first this many bytes of the body are scanned.
    pub max_scan_bytes: usize,
    /// Only the first this many link targets (`href`/`src` of links, areas and frames) of a
    /// page are taken; the rest are counted in [`PageLinks::links_cut`].
    pub max_links: usize,
}

impl LinkConfig {
    /// Defaults: nofollow links skipped, first 4 MiB scanned, first 6,000 links taken.
    pub fn new(product_token: impl Into<String>) -> Self {
        LinkConfig {
            product_token: product_token.into(),
            keep_nofollow_links: false,
            max_scan_bytes: DEFAULT_MAX_SCAN_BYTES,
            max_links: DEFAULT_MAX_LINKS,
        }
    }
}

/// Robots directives of a page, from META tags and `X-Robots-Tag`. The most restrictive
/// value wins: one `nofollow` anywhere cannot be undone by a `follow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobotsDirectives {
    pub index: bool,
    pub follow: bool,
    pub archive: bool,
}

impl Default for RobotsDirectives {
    fn default() -> Self {
        RobotsDirectives {
            index: true,
            follow: true,
            archive: true,
        }
    }
}

impl RobotsDirectives {
    /// Applies a comma-separated directive list (`noindex, nofollow`); unknown directives
    /// are ignored. Returns whether any directive was recognised.
    pub fn apply(&mut self, content: &str) -> bool {
        let mut any = false;
        for item in content.split(',') {
            any |= self.apply_one(item);
        }
        any
    }

    fn apply_one(&mut self, item: &str) -> bool {
        match item.trim().to_ascii_lowercase().as_str() {
            "noindex" => self.index = false,
            "nofollow" => self.follow = false,
            "none" => {
                self.index = false;
                self.follow = false;
            }
            "noarchive" => self.archive = false,
            // Permissive values only restate the default.
            "index" | "follow" | "all" => {}
            _ => return false,
        }
        true
    }
}

/// What a page gave us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLinks {
    /// Absolute http(s) URLs without fragment, first-seen order, deduplicated. Empty when
    /// `robots.follow` is false. Parsed once, here: scope and queueing take them as they are.
    pub links: Vec<Url>,
    /// The page's robots directives.
    pub robots: RobotsDirectives,
    /// The URL links were resolved against (`<base href>` or the page URL).
    pub base: String,
    /// True when the body was longer than `max_scan_bytes` and only its start was scanned.
    pub scan_truncated: bool,
    /// Link targets past `max_links`, not taken.
    pub links_cut: u64,
}

/// Extracts the links of an HTML page and its robots directives.
///
/// `x_robots_tag` holds the values of every `X-Robots-Tag` response header. The body is
/// decoded as UTF-8 (invalid sequences replaced), which is exact for UTF-8 and ASCII-only
/// URLs in any ASCII-compatible charset; non-ASCII URLs in legacy charsets come out
/// mangled.
pub fn extract_links(
    page_url: &Url,
    body: &[u8],
    x_robots_tag: &[&str],
    config: &LinkConfig,
) -> PageLinks {
    let scan_truncated = body.len() > config.max_scan_bytes;
    let body = &body[..body.len().min(config.max_scan_bytes)];
    let text = String::from_utf8_lossy(body);

    let sink = Sink {
        token: config.product_token.to_ascii_lowercase(),
        keep_nofollow: config.keep_nofollow_links,
        max_links: config.max_links,
        state: RefCell::new(Scan::default()),
    };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(&text));
    while let html5ever::tokenizer::TokenizerResult::Script(_) = tokenizer.feed(&input) {}
    tokenizer.end();
    let scan = tokenizer.sink.state.into_inner();

    let mut robots = scan.robots;
    for value in x_robots_tag {
        apply_x_robots_tag(&mut robots, value, &config.product_token);
    }

    let base = scan
        .base_href
        .as_deref()
        .and_then(|href| page_url.join(href.trim()).ok())
        .filter(|u| !u.cannot_be_a_base())
        .unwrap_or_else(|| page_url.clone());

    let mut links = Vec::new();
    if robots.follow {
        let mut seen = HashSet::new();
        for href in &scan.hrefs {
            let href = href.trim();
            if href.is_empty() {
                continue;
            }
            let Ok(mut url) = base.join(href) else {
                continue;
            };
            if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                continue;
            }
            url.set_fragment(None);
            if seen.insert(url.as_str().to_string()) {
                links.push(url);
            }
        }
    }
    PageLinks {
        links,
        robots,
        base: base.into(),
        scan_truncated,
        links_cut: scan.hrefs_cut,
    }
}

/// Applies one `X-Robots-Tag` header value. Items may be prefixed by a user agent
/// (`googlebot: noindex, nofollow`); such a prefix holds for the items after it in the same
/// value, and they apply only if it is our product token. Items without a prefix apply to
/// every crawler.
pub fn apply_x_robots_tag(robots: &mut RobotsDirectives, value: &str, product_token: &str) {
    let mut applies = true;
    for item in value.split(',') {
        let mut item = item.trim();
        if let Some((prefix, rest)) = item.split_once(':') {
            let prefix = prefix.trim();
            // Directives that carry a value themselves (`unavailable_after: date`,
            // `max-snippet: 20`) are not agent prefixes.
            let valued_directive = matches!(
                prefix.to_ascii_lowercase().as_str(),
                "unavailable_after" | "max-snippet" | "max-image-preview" | "max-video-preview"
            );
            if !valued_directive && !prefix.is_empty() && !prefix.contains(char::is_whitespace) {
                applies = prefix.eq_ignore_ascii_case(product_token);
                item = rest.trim();
            }
        }
        if applies {
            robots.apply_one(item);
        }
    }
}

#[derive(Default)]
struct Scan {
    hrefs: Vec<String>,
    /// Link targets past the cap, counted only.
    hrefs_cut: u64,
    base_href: Option<String>,
    robots: RobotsDirectives,
}

struct Sink {
    /// Lower-cased product token.
    token: String,
    keep_nofollow: bool,
    max_links: usize,
    state: RefCell<Scan>,
}

fn attr<'t>(tag: &'t Tag, name: &str) -> Option<&'t str> {
    tag.attrs
        .iter()
        .find(|a| a.name.ns.is_empty() && &*a.name.local == name)
        .map(|a| &*a.value)
}

fn rel_has(tag: &Tag, token: &str) -> bool {
    attr(tag, "rel").is_some_and(|rel| {
        rel.split_ascii_whitespace()
            .any(|t| t.eq_ignore_ascii_case(token))
    })
}

impl Sink {
    fn start_tag(&self, tag: &Tag) {
        let mut scan = self.state.borrow_mut();
        let nofollow = !self.keep_nofollow && rel_has(tag, "nofollow");
        let href = match &*tag.name {
            "a" | "area" if !nofollow => attr(tag, "href"),
            "frame" | "iframe" => attr(tag, "src"),
            // Alternate stylesheets and icons are not pages.
            "link"
                if !nofollow
                    && (rel_has(tag, "alternate") || rel_has(tag, "canonical"))
                    && !rel_has(tag, "stylesheet")
                    && !rel_has(tag, "icon") =>
            {
                attr(tag, "href")
            }
            "base" => {
                // The first <base> with an href sets the document's base URL.
                if scan.base_href.is_none() {
                    scan.base_href = attr(tag, "href").map(str::to_string);
                }
                None
            }
            "meta" => {
                if let (Some(name), Some(content)) = (attr(tag, "name"), attr(tag, "content")) {
                    let name = name.trim().to_ascii_lowercase();
                    if name == "robots" || (!self.token.is_empty() && name == self.token) {
                        scan.robots.apply(content);
                    }
                }
                None
            }
            _ => None,
        };
        if let Some(href) = href {
            if scan.hrefs.len() < self.max_links {
                scan.hrefs.push(href.to_string());
            } else {
                scan.hrefs_cut += 1;
            }
        }
    }
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let Token::TagToken(tag) = token else {
            return TokenSinkResult::Continue;
        };
        if tag.kind != TagKind::StartTag {
            return TokenSinkResult::Continue;
        }
        self.start_tag(&tag);
        // What a tree builder would tell the tokenizer: these elements' content is text.
        match &*tag.name {
            "script" => TokenSinkResult::RawData(RawKind::ScriptData),
            "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                TokenSinkResult::RawData(RawKind::Rawtext)
            }
            "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
            "plaintext" => TokenSinkResult::Plaintext,
            _ => TokenSinkResult::Continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(links: &[Url]) -> Vec<&str> {
        links.iter().map(Url::as_str).collect()
    }

    fn extract_with(page: &str, html: &str, xrt: &[&str], config: &LinkConfig) -> PageLinks {
        extract_links(&Url::parse(page).unwrap(), html.as_bytes(), xrt, config)
    }

    fn extract(html: &str) -> PageLinks {
        extract_with(
            "https://example.org/dir/page.html",
            html,
            &[],
            &LinkConfig::new("frontierd"),
        )
    }

    #[test]
    fn each_element_kind() {
        let got = extract(
            r#"<html><head>
            <link rel="canonical" href="/canon">
            <link rel="alternate" hreflang="de" href="/de/">
            <LINK REL="Alternate" type="application/rss+xml" href="feed.xml">
            <link rel="stylesheet" href="/style.css">
            <link rel="alternate stylesheet" href="/alt.css">
            <link rel="icon" href="/favicon.ico">
            </head><body>
            <a href="a.html">a</a>
            <map><area href="area.html" alt=""></map>
            <frameset><frame src="frame.html"></frameset>
            <iframe src="iframe.html"></iframe>
            <img src="/img.png"><script src="/app.js"></script>
            <a name="anchor-without-href">x</a>
            </body></html>"#,
        );
        assert_eq!(
            strs(&got.links),
            [
                "https://example.org/canon",
                "https://example.org/de/",
                "https://example.org/dir/feed.xml",
                "https://example.org/dir/a.html",
                "https://example.org/dir/area.html",
                "https://example.org/dir/frame.html",
                "https://example.org/dir/iframe.html",
            ]
        );
        assert_eq!(got.robots, RobotsDirectives::default());
        assert_eq!(got.base, "https://example.org/dir/page.html");
        assert!(!got.scan_truncated);
    }

    #[test]
    fn relative_absolute_protocol_relative_and_dropped_schemes() {
        let got = extract_with(
            "http://example.org/dir/page.html",
            r##"<a href="../up">1</a>
            <a href="/root?q=1&amp;r=2">2</a>
            <a href="https://other.example/x#frag">3</a>
            <a href="//cdn.example.net/y">4</a>
            <a href="?only=query">5</a>
            <a href="  spaced.html  ">6</a>
            <a href="javascript:alert(1)">js</a>
            <a href="mailto:someone@example.org">mail</a>
            <a href="tel:+123">tel</a>
            <a href="data:text/html,hi">data</a>
            <a href="ftp://example.org/file">ftp</a>
            <a href="#top">fragment only</a>
            <a href="">empty</a>
            <a href="http://[bad">bad</a>
            <a href="/root?q=1&r=2">dup</a>
            <a href="https://other.example/x#other">dup</a>"##,
            &[],
            &LinkConfig::new("frontierd"),
        );
        assert_eq!(
            strs(&got.links),
            [
                "http://example.org/up",
                "http://example.org/root?q=1&r=2",
                "https://other.example/x",
                "http://cdn.example.net/y",
                "http://example.org/dir/page.html?only=query",
                "http://example.org/dir/spaced.html",
                "http://example.org/dir/page.html",
            ]
        );
    }

    #[test]
    fn base_href_applies_to_all_links() {
        let got = extract(
            r#"<a href="before.html">0</a><base href="https://base.example/sub/"><base href="/ignored/">
            <a href="x.html">1</a><a href="/abs">2</a><iframe src="f"></iframe>"#,
        );
        assert_eq!(got.base, "https://base.example/sub/");
        assert_eq!(
            strs(&got.links),
            [
                "https://base.example/sub/before.html",
                "https://base.example/sub/x.html",
                "https://base.example/abs",
                "https://base.example/sub/f",
            ]
        );
        // A relative base resolves against the page; a base without href is ignored.
        let got = extract(r#"<base target="_blank"><base href="../other/"><a href="x">x</a>"#);
        assert_eq!(strs(&got.links), ["https://example.org/other/x"]);
        // An unusable base falls back to the page URL.
        let got = extract(r#"<base href="mailto:x@example.org"><a href="x">x</a>"#);
        assert_eq!(strs(&got.links), ["https://example.org/dir/x"]);
    }

    #[test]
    fn rel_nofollow_links_skipped_unless_kept() {
        let html = r#"<a href="/keep">k</a><a rel="external NoFollow" href="/skip">s</a>
            <area rel=nofollow href="/skip2"><link rel="alternate nofollow" href="/skip3">"#;
        assert_eq!(strs(&extract(html).links), ["https://example.org/keep"]);
        let mut config = LinkConfig::new("frontierd");
        config.keep_nofollow_links = true;
        let got = extract_with("https://example.org/", html, &[], &config);
        assert_eq!(
            strs(&got.links),
            [
                "https://example.org/keep",
                "https://example.org/skip",
                "https://example.org/skip2",
                "https://example.org/skip3",
            ]
        );
    }

    #[test]
    fn meta_robots() {
        let links = r#"<a href="/x">x</a>"#;
        let cases = [
            (
                r#"<meta name="robots" content="nofollow">"#,
                true,
                false,
                true,
            ),
            (
                r#"<META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW">"#,
                false,
                false,
                true,
            ),
            (r#"<meta name="robots" content="none">"#, false, false, true),
            (r#"<meta name="robots" content="all">"#, true, true, true),
            (
                r#"<meta name="robots" content="noindex,follow,noarchive">"#,
                false,
                true,
                false,
            ),
            (
                r#"<meta name=" Robots " content=" noarchive ">"#,
                true,
                true,
                false,
            ),
            (
                r#"<meta name="FrontierD" content="nofollow">"#,
                true,
                false,
                true,
            ),
            // Another crawler's tag is not ours.
            (
                r#"<meta name="googlebot" content="none">"#,
                true,
                true,
                true,
            ),
            // Restrictive wins over permissive, in any order.
            (
                r#"<meta name="robots" content="nofollow"><meta name="frontierd" content="follow">"#,
                true,
                false,
                true,
            ),
            (
                r#"<meta name="robots" content="unknown, max-snippet:3">"#,
                true,
                true,
                true,
            ),
        ];
        for (meta, index, follow, archive) in cases {
            // The META tag may come after the links.
            let got = extract(&format!("<html><body>{links}{meta}</body></html>"));
            let want = RobotsDirectives {
                index,
                follow,
                archive,
            };
            assert_eq!(got.robots, want, "{meta}");
            assert_eq!(got.links.is_empty(), !follow, "{meta}");
        }
    }

    #[test]
    fn x_robots_tag_with_and_without_agent() {
        let config = LinkConfig::new("frontierd");
        let html = r#"<a href="/x">x</a>"#;
        let page = "https://example.org/";
        let run = |values: &[&str]| extract_with(page, html, values, &config);

        let got = run(&["noindex, nofollow"]);
        assert!(!got.robots.index && !got.robots.follow);
        assert!(got.links.is_empty());

        let got = run(&["googlebot: nofollow"]);
        assert!(got.robots.follow && got.links.len() == 1);

        let got = run(&["FrontierD: none"]);
        assert!(!got.robots.index && !got.robots.follow && got.links.is_empty());

        let got = run(&["googlebot: noindex", "noarchive"]);
        assert_eq!(
            got.robots,
            RobotsDirectives {
                index: true,
                follow: true,
                archive: false
            }
        );

        // A prefix covers the items after it in the same value.
        let got = run(&["googlebot: noindex, nofollow, frontierd: noarchive"]);
        assert_eq!(
            got.robots,
            RobotsDirectives {
                index: true,
                follow: true,
                archive: false
            }
        );

        // Valued directives are not agent names.
        let got = run(&["unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow"]);
        assert!(!got.robots.follow);

        // Header and META combine.
        let got = extract_with(
            page,
            r#"<meta name="robots" content="noindex"><a href="/x">x</a>"#,
            &["noarchive"],
            &config,
        );
        assert_eq!(
            got.robots,
            RobotsDirectives {
                index: false,
                follow: true,
                archive: false
            }
        );
    }

    #[test]
    fn script_style_and_comments_hold_no_links() {
        let got = extract(
            r#"<script>document.write('<a href="/in-script">')</script>
            <style>a[href="/in-style"] {}</style>
            <!-- <a href="/in-comment"> -->
            <textarea><a href="/in-textarea"></textarea>
            <title><a href="/in-title"></title>
            <a href="/real">r</a>"#,
        );
        assert_eq!(strs(&got.links), ["https://example.org/real"]);
    }

    #[test]
    fn malformed_html_does_not_panic() {
        let inputs: &[&[u8]] = &[
            b"",
            b"<",
            b"<a href",
            b"<a href=",
            b"<a href=\"unterminated",
            b"<a href='/x' <a href=/y>",
            b"<<<>>><a/href=/z>",
            b"<a href=\"/\xff\xfe\">bad utf8</a>",
            b"\0\0<a\0href=/nul>",
            b"<script>",
            b"<!--",
            b"<![CDATA[<a href=/c>",
            b"<svg><a href=/svg></a></svg>",
            b"<a href=\"&#0;&#xD800;&bogus;&amp\">",
            b"</a href=/end-tag>",
        ];
        for input in inputs {
            let got = extract_links(
                &Url::parse("https://example.org/").unwrap(),
                input,
                &["::,:", ":", "frontierd:"],
                &LinkConfig::new("frontierd"),
            );
            assert!(got
                .links
                .iter()
                .all(|l| l.as_str().starts_with("https://example.org/")));
        }
        let got = extract("<a href='/x' <a href=/y>");
        assert_eq!(strs(&got.links), ["https://example.org/x"]);
        let got = extract("<a href=/unquoted>");
        assert_eq!(strs(&got.links), ["https://example.org/unquoted"]);
    }

    #[test]
    fn random_markup_soup_does_not_panic() {
        let pieces: &[&str] = &[
            "<a href=",
            "\"",
            "'",
            "/x",
            ">",
            "<",
            "</a>",
            "<base href=",
            "//h/",
            "#",
            "?",
            "<meta name=robots content=",
            "nofollow",
            ",",
            "<script>",
            "</script>",
            "<!--",
            "-->",
            "&amp;",
            "&#x",
            "\u{e9}",
            "\0",
            " ",
            "<iframe src=",
            "<link rel=canonical href=",
            "javascript:",
            "http://[",
            "%zz",
            "\\",
            "<![CDATA[",
            "<svg>",
            "<plaintext>",
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let page = Url::parse("https://example.org/a/b").unwrap();
        let config = LinkConfig::new("frontierd");
        for _ in 0..2000 {
            let mut html = String::new();
            for _ in 0..(x % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                html.push_str(pieces[(x % pieces.len() as u64) as usize]);
            }
            let got = extract_links(&page, html.as_bytes(), &[&html], &config);
            for url in got.links {
                assert!(matches!(url.scheme(), "http" | "https") && url.fragment().is_none());
            }
            x = x.wrapping_add(1);
        }
    }

    #[test]
    fn only_the_first_bytes_are_scanned() {
        let mut html = String::from(r#"<a href="/first">f</a>"#);
        html.push_str(&" ".repeat(2000));
        html.push_str(r#"<a href="/late">l</a><meta name="robots" content="nofollow">"#);
        let mut config = LinkConfig::new("frontierd");
        config.max_scan_bytes = 1000;
        let got = extract_with("https://example.org/", &html, &[], &config);
        assert_eq!(strs(&got.links), ["https://example.org/first"]);
        assert!(got.scan_truncated && got.robots.follow);
        config.max_scan_bytes = DEFAULT_MAX_SCAN_BYTES;
        let got = extract_with("https://example.org/", &html, &[], &config);
        assert!(got.links.is_empty() && !got.robots.follow && !got.scan_truncated);
    }

    #[test]
    fn links_past_the_cap_are_counted_not_taken() {
        let page = Url::parse("http://a.test/").unwrap();
        let body: String = (0..100).map(|i| format!("<a href=/l{i}>x</a>")).collect();
        let mut config = LinkConfig::new("frontierd");
        config.max_links = 10;
        let found = extract_links(
            &page,
            format!("<meta name=robots content=nofollow>{body}").as_bytes(),
            &[],
            &config,
        );
        assert!(!found.robots.follow, "directives still read");
        let found = extract_links(&page, body.as_bytes(), &[], &config);
        assert_eq!(found.links.len(), 10);
        assert_eq!(found.links[9].as_str(), "http://a.test/l9");
        assert_eq!(found.links_cut, 90);
        // a robots META tag after the cap still counts
        let late = format!("{body}<meta name=robots content=nofollow>");
        assert!(
            !extract_links(&page, late.as_bytes(), &[], &config)
                .robots
                .follow
        );
    }
}
