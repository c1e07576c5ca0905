//! The example tables of `shared/spec/robots.md`, sections 6, 7 and 8, one case per row.

use robots_policy::{AgentPolicy, GroupChoice, RobotsTxt};

fn allowed(robots: &str, agent: &str, url: &str) -> bool {
    AgentPolicy::parse(robots.as_bytes(), agent)
        .check_url(url)
        .allowed
}

/// Section 7: one pattern as a disallow rule; `matches` are disallowed, the rest allowed.
fn pattern_case(pattern: &str, matches: &[&str], no_match: &[&str]) {
    let robots = format!("user-agent: *\ndisallow: {pattern}\n");
    for path in matches {
        assert!(
            !allowed(&robots, "foobot", &format!("http://example.com{path}")),
            "pattern {pattern} should match {path}"
        );
    }
    for path in no_match {
        assert!(
            allowed(&robots, "foobot", &format!("http://example.com{path}")),
            "pattern {pattern} should not match {path}"
        );
    }
}

#[test]
fn s7_root_matches_everything() {
    pattern_case("/", &["/", "/a", "/a/b.html?x=1"], &[]);
}

#[test]
fn s7_trailing_star_is_ignored() {
    pattern_case("/*", &["/", "/a", "/a/b.html?x=1"], &[]);
}

#[test]
fn s7_dollar_root_only() {
    pattern_case("/$", &["/"], &["/a", "/index.html", "/?q=1"]);
}

#[test]
fn s7_fish() {
    let matches = [
        "/fish",
        "/fish.html",
        "/fish/salmon.html",
        "/fishheads",
        "/fishheads/yummy.html",
        "/fish.php?id=anything",
    ];
    let no_match = ["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"];
    pattern_case("/fish", &matches, &no_match);
    pattern_case("/fish*", &matches, &no_match);
}

#[test]
fn s7_fish_directory() {
    pattern_case(
        "/fish/",
        &["/fish/", "/fish/?id=anything", "/fish/salmon.htm"],
        &["/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"],
    );
}

#[test]
fn s7_star_php() {
    pattern_case(
        "/*.php",
        &[
            "/index.php",
            "/filename.php",
            "/folder/filename.php",
            "/folder/filename.php?parameters",
            "/folder/any.php.file.html",
            "/filename.php/",
        ],
        &["/", "/windows.PHP"],
    );
}

#[test]
fn s7_star_php_dollar() {
    pattern_case(
        "/*.php$",
        &["/filename.php", "/folder/filename.php"],
        &[
            "/filename.php?parameters",
            "/filename.php/",
            "/filename.php5",
            "/windows.PHP",
        ],
    );
}

#[test]
fn s7_fish_star_php() {
    pattern_case(
        "/fish*.php",
        &["/fish.php", "/fishheads/catfish.php?parameters"],
        &["/Fish.PHP"],
    );
}

#[test]
fn s7_chinese_article_examples() {
    pattern_case("/tmp", &["/tmp", "/tmp.html", "/tmp/a.html"], &[]);
    pattern_case("/tmp/", &["/tmp/a.html"], &["/tmp", "/tmphoho"]);
    pattern_case("/He*lo", &["/Hello,lolo"], &[]);
    pattern_case("/Heap*lo", &[], &["/Hello,lolo"]);
    pattern_case("/a.html$", &["/a.html"], &["/a.html?x", "/a.htmlx"]);
    pattern_case("/*?*", &["/a?b", "/?", "/x/y?z=1"], &["/a", "/x/y"]);
}

#[test]
fn s7_raw_and_encoded_non_ascii_pattern_are_equal() {
    // The URL arrives canonical (percent-encoded); a raw UTF-8 pattern is encoded to match.
    let raw = "user-agent: *\ndisallow: /café\n";
    let encoded = "user-agent: *\ndisallow: /caf%C3%A9\n";
    let lower = "user-agent: *\ndisallow: /caf%c3%a9\n";
    for robots in [raw, encoded, lower] {
        assert!(
            !allowed(robots, "foobot", "http://x.com/caf%C3%A9/menu"),
            "{robots}"
        );
        assert!(allowed(robots, "foobot", "http://x.com/cafe"), "{robots}");
    }
}

fn precedence_case(url_path: &str, rules: &str, expect_allowed: bool) {
    let robots = format!("user-agent: *\n{rules}\n");
    assert_eq!(
        allowed(&robots, "foobot", &format!("http://example.com{url_path}")),
        expect_allowed,
        "{url_path} with {rules:?}"
    );
}

#[test]
fn s8_precedence_table() {
    precedence_case("/page", "allow: /p\ndisallow: /", true);
    precedence_case("/folder/page", "allow: /folder\ndisallow: /folder", true);
    precedence_case("/page.htm", "allow: /page\ndisallow: /*.htm", false);
    precedence_case("/page.php5", "allow: /page\ndisallow: /*.ph", true);
    precedence_case("/", "allow: /$\ndisallow: /", true);
    precedence_case("/page.htm", "allow: /$\ndisallow: /", false);
}

#[test]
fn s8_rule_order_in_file_does_not_matter() {
    precedence_case("/page", "disallow: /\nallow: /p", true);
    precedence_case("/folder/page", "disallow: /folder\nallow: /folder", true);
}

#[test]
fn s6_consecutive_user_agents_share_one_group() {
    let robots = "user-agent: e\nuser-agent: f\ndisallow: /g\n";
    assert!(!allowed(robots, "e", "http://x.com/g"));
    assert!(!allowed(robots, "f", "http://x.com/g"));
    assert!(allowed(robots, "h", "http://x.com/g"));
}

#[test]
fn s6_non_rule_lines_do_not_break_a_group() {
    let robots = "user-agent: a\nsitemap: https://x.com/s.xml\nuser-agent: b\ndisallow: /\n";
    assert!(!allowed(robots, "a", "http://x.com/page"));
    assert!(!allowed(robots, "b", "http://x.com/page"));
    let robots = "user-agent: a\ncrawl-delay: 5\nuser-agent: b\ndisallow: /\n";
    assert!(!allowed(robots, "a", "http://x.com/page"));
    let unknown = "user-agent: a\nnoindex: /x\nuser-agent: b\ndisallow: /\n";
    assert!(!allowed(unknown, "a", "http://x.com/page"));
}

#[test]
fn s6_most_specific_group_and_product_tokens() {
    let robots = "user-agent: googlebot-news\ndisallow: /news-only\n\n\
                  user-agent: *\ndisallow: /star-only\n\n\
                  user-agent: googlebot\ndisallow: /googlebot-only\n";
    let verdicts = |agent: &str| {
        ["/news-only", "/star-only", "/googlebot-only"]
            .map(|p| allowed(robots, agent, &format!("http://x.com{p}")))
    };
    assert_eq!(verdicts("googlebot-news"), [false, true, true]);
    assert_eq!(verdicts("googlebot"), [true, true, false]);
    assert_eq!(verdicts("Storebot-Google"), [true, false, true]);
}

#[test]
fn s6_user_agent_value_reduced_to_product_token() {
    for line in [
        "googlebot/1.2",
        "googlebot*",
        "Googlebot/2.1 (+http://www.google.com/bot.html)",
        "GOOGLEBOT",
    ] {
        let robots = format!("user-agent: {line}\ndisallow: /\n");
        assert!(!allowed(&robots, "googlebot", "http://x.com/a"), "{line}");
    }
}

#[test]
fn s6_same_agent_groups_merge_and_star_is_ignored_when_specific_exists() {
    let robots = "user-agent: foobot\ndisallow: /a\n\nuser-agent: *\ndisallow: /b\n\n\
                  user-agent: FooBot\ndisallow: /c\n";
    assert!(!allowed(robots, "foobot", "http://x.com/a"));
    assert!(allowed(robots, "foobot", "http://x.com/b"));
    assert!(!allowed(robots, "foobot", "http://x.com/c"));
    let policy = AgentPolicy::parse(robots.as_bytes(), "foobot");
    match policy.group() {
        GroupChoice::Specific(lines) => {
            assert_eq!(lines.iter().map(|l| l.line).collect::<Vec<_>>(), vec![1, 7])
        }
        other => panic!("wrong group {other:?}"),
    }
}

#[test]
fn s6_specific_group_without_rules_still_hides_star() {
    let robots = "user-agent: *\ndisallow: /\n\nuser-agent: foobot\n";
    assert!(allowed(robots, "foobot", "http://x.com/a"));
    assert!(!allowed(robots, "otherbot", "http://x.com/a"));
}

#[test]
fn s5_rule_without_path_is_ignored() {
    let robots = "user-agent: *\ndisallow:\n";
    assert!(allowed(robots, "foobot", "http://x.com/a"));
    let diagnostics = RobotsTxt::parse(robots.as_bytes());
    assert!(diagnostics
        .diagnostics()
        .iter()
        .any(|d| d.line == 2 && d.kind == robots_policy::DiagnosticKind::RuleWithoutPath));
}

#[test]
fn s5_paths_case_sensitive_agents_not() {
    let robots = "User-Agent: FOOBOT\nDisallow: /Secret\n";
    assert!(!allowed(robots, "foobot", "http://x.com/Secret"));
    assert!(allowed(robots, "foobot", "http://x.com/secret"));
}

#[test]
fn s5_sitemaps_belong_to_no_group() {
    let robots = RobotsTxt::parse(
        b"sitemap: https://a.com/1.xml\nuser-agent: x\nsitemap: https://b.org/2.xml\ndisallow: /\n",
    );
    assert_eq!(
        robots.sitemaps(),
        ["https://a.com/1.xml", "https://b.org/2.xml"]
    );
}

#[test]
fn s4_html_page_is_scanned_for_valid_lines() {
    let html = "<html><body>\n<p>hello</p>\nuser-agent: *\ndisallow: /private\n</body></html>";
    assert!(!allowed(html, "foobot", "http://x.com/private/x"));
    assert!(allowed(html, "foobot", "http://x.com/public"));
}

#[test]
fn s4_content_past_the_size_limit_is_ignored() {
    let mut body = b"user-agent: *\n".to_vec();
    body.extend(std::iter::repeat_n(b'#', 600 * 1024));
    body.extend_from_slice(b"\ndisallow: /\n");
    assert!(allowed(
        std::str::from_utf8(&body).unwrap(),
        "foobot",
        "http://x.com/a"
    ));
    let small_limit = robots_policy::ParseOptions {
        max_bytes: 1024 * 1024,
    };
    let robots = RobotsTxt::parse_with(&body, &small_limit);
    assert!(!robots.for_agent("foobot").is_allowed("/a"));
}
