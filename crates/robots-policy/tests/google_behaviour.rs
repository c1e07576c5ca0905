//! Behaviour where the spec is silent and Google's robotstxt library is the reference:
//! each case states what that library answers.

use robots_policy::{AgentPolicy, DiagnosticKind, RobotsTxt};

fn allowed(robots: &[u8], agent: &str, url: &str) -> bool {
    AgentPolicy::parse(robots, agent).check_url(url).allowed
}

#[test]
fn rules_before_any_user_agent_are_ignored() {
    let robots = b"disallow: /\nuser-agent: foobot\nallow: /x\n";
    assert!(allowed(robots, "foobot", "http://x.com/y"));
    let parsed = RobotsTxt::parse(robots);
    assert_eq!(
        parsed.diagnostics()[0].kind,
        DiagnosticKind::RuleWithoutUserAgent
    );
}

#[test]
fn star_followed_by_space_and_text_is_global() {
    let robots = b"user-agent: * everyone\ndisallow: /\n";
    assert!(!allowed(robots, "foobot", "http://x.com/a"));
    // `*foo` is not global and its product token is empty.
    let robots = b"user-agent: *foo\ndisallow: /\n";
    assert!(allowed(robots, "foobot", "http://x.com/a"));
}

#[test]
fn caller_agent_is_compared_as_given() {
    // Google compares the caller's string whole; a version suffix never equals a token.
    let robots = b"user-agent: foobot\ndisallow: /\n";
    assert!(allowed(robots, "FooBot/1.0", "http://x.com/a"));
    assert!(!allowed(robots, "FOOBOT", "http://x.com/a"));
}

#[test]
fn digits_end_the_product_token() {
    let robots = b"user-agent: foobot2\ndisallow: /\n";
    assert!(!allowed(robots, "foobot", "http://x.com/a"));
}

#[test]
fn key_typos_and_prefixes_accepted() {
    for key in [
        "disalow",
        "dissallow",
        "dissalow",
        "diasllow",
        "disallaw",
        "DISALLOWED",
    ] {
        let robots = format!("user-agent: *\n{key}: /a\n");
        assert!(
            !allowed(robots.as_bytes(), "foobot", "http://x.com/a"),
            "{key}"
        );
    }
    for key in ["useragent", "user agent", "User-Agents"] {
        let robots = format!("{key}: foobot\ndisallow: /a\n");
        assert!(
            !allowed(robots.as_bytes(), "foobot", "http://x.com/a"),
            "{key}"
        );
    }
    // No typos for allow beyond the prefix rule.
    let robots = b"user-agent: *\ndisallow: /\nalow: /a\n";
    assert!(!allowed(robots, "foobot", "http://x.com/a"));
}

#[test]
fn missing_colon_accepted_for_two_words_only() {
    assert!(!allowed(
        b"user-agent foobot\ndisallow /a\n",
        "foobot",
        "http://x.com/a"
    ));
    assert!(allowed(
        b"user-agent foobot\ndisallow /a /b\n",
        "foobot",
        "http://x.com/a"
    ));
    let parsed = RobotsTxt::parse(b"user-agent foobot\ndisallow /a\n");
    assert!(parsed
        .diagnostics()
        .iter()
        .any(|d| d.line == 2 && d.kind == DiagnosticKind::MissingColonAccepted));
}

#[test]
fn index_html_allow_also_allows_the_directory() {
    let robots = b"user-agent: *\ndisallow: /\nallow: /folder/index.html\n";
    assert!(allowed(robots, "foobot", "http://x.com/folder/"));
    assert!(allowed(robots, "foobot", "http://x.com/folder/index.html"));
    assert!(!allowed(robots, "foobot", "http://x.com/folder/other"));
    assert!(!allowed(robots, "foobot", "http://x.com/folder/?q=1"));
    let robots = b"user-agent: *\ndisallow: /\nallow: /index.htm\n";
    assert!(allowed(robots, "foobot", "http://x.com/"));
}

#[test]
fn dollar_inside_a_pattern_is_literal() {
    let robots = b"user-agent: *\ndisallow: /a$b\n";
    assert!(!allowed(robots, "foobot", "http://x.com/a$bc"));
    assert!(allowed(robots, "foobot", "http://x.com/a"));
}

#[test]
fn url_is_not_re_encoded() {
    // A raw non-ASCII URL does not match an (escaped) non-ASCII pattern, as in Google.
    let robots = "user-agent: *\ndisallow: /café\n".as_bytes();
    assert!(allowed(robots, "foobot", "http://x.com/café"));
    assert!(!allowed(robots, "foobot", "http://x.com/caf%C3%A9"));
    // Lower-case escapes in the URL are not upper-cased either.
    let robots = b"user-agent: *\ndisallow: /a%2Fb\n";
    assert!(allowed(robots, "foobot", "http://x.com/a%2fb"));
}

#[test]
fn bom_and_invalid_utf8_do_not_abort() {
    let robots = b"\xEF\xBB\xBFuser-agent: *\ndisallow: /\xFF\xFE\ndisallow: /b\n";
    assert!(!allowed(robots, "foobot", "http://x.com/b"));
    assert!(!allowed(robots, "foobot", "http://x.com/%FF%FE"));
    let partial = b"\xEF\xBBuser-agent: *\ndisallow: /b\n";
    assert!(!allowed(partial, "foobot", "http://x.com/b"));
}

#[test]
fn long_lines_are_cut_not_dropped() {
    let mut robots = b"user-agent: *\ndisallow: /".to_vec();
    robots.extend(std::iter::repeat_n(b'a', 30_000));
    robots.extend_from_slice(b"\n");
    let parsed = RobotsTxt::parse(&robots);
    assert!(matches!(
        parsed.diagnostics()[0].kind,
        DiagnosticKind::LineCut { original_len } if original_len > 30_000
    ));
    let long_url = format!("http://x.com/{}", "a".repeat(20_000));
    assert!(!allowed(&robots, "foobot", &long_url));
    assert!(allowed(&robots, "foobot", "http://x.com/aaa"));
}

#[test]
fn group_ends_only_at_a_user_agent_after_a_rule() {
    let robots = b"user-agent: a\ndisallow: /x\nuser-agent: b\ndisallow: /y\n";
    assert!(!allowed(robots, "a", "http://x.com/x"));
    assert!(allowed(robots, "a", "http://x.com/y"));
    assert!(allowed(robots, "b", "http://x.com/x"));
    assert!(!allowed(robots, "b", "http://x.com/y"));
    // An empty disallow is still a rule line: it closes the user-agent list.
    let robots = b"user-agent: a\ndisallow:\nuser-agent: b\ndisallow: /y\n";
    assert!(allowed(robots, "a", "http://x.com/y"));
}

#[test]
fn crawl_delay_of_the_chosen_group() {
    let robots = b"user-agent: *\ncrawl-delay: 3\n\nuser-agent: foobot\ncrawl-delay: 1.5\ndisallow: /x\n\nuser-agent: other\ncrawl-delay: soon\n";
    let foobot = AgentPolicy::parse(robots, "foobot");
    assert_eq!(
        foobot.crawl_delay(),
        Some(std::time::Duration::from_millis(1500))
    );
    let any = AgentPolicy::parse(robots, "anybot");
    assert_eq!(any.crawl_delay(), Some(std::time::Duration::from_secs(3)));
    let other = AgentPolicy::parse(robots, "other");
    assert_eq!(other.crawl_delay(), None);
    let parsed = RobotsTxt::parse(robots);
    assert!(parsed
        .diagnostics()
        .iter()
        .any(|d| d.line == 9 && matches!(d.kind, DiagnosticKind::BadCrawlDelay(_))));
}

#[test]
fn deciding_rule_and_line_are_reported() {
    let robots = b"user-agent: *\nallow: /p\ndisallow: /\n";
    let policy = AgentPolicy::parse(robots, "foobot");
    let verdict = policy.check("/page");
    let rule = verdict.rule.and_then(|id| policy.rule(id)).expect("a rule");
    assert_eq!((rule.pattern, rule.line), ("/p", 2));
    let verdict = policy.check("/other");
    let rule = verdict.rule.and_then(|id| policy.rule(id)).expect("a rule");
    assert_eq!((rule.pattern, rule.line, verdict.allowed), ("/", 3, false));
}

#[test]
fn pathological_pattern_is_fast_enough_to_finish() {
    // Linear in pattern x path: a 100 KB path against a backtracking-hostile pattern.
    let robots = b"user-agent: *\ndisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b\n";
    let path = format!("/{}", "a".repeat(100_000));
    let policy = AgentPolicy::parse(robots, "foobot");
    assert!(policy.is_allowed(&path));
    assert!(!policy.is_allowed(&format!("{path}b")));
}
