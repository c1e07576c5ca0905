//! proptest: the compiled, indexed matcher agrees with the naive reference model of
//! Google's matcher (`robots_policy::reference`) on random robots.txt bodies, agents and
//! URLs, and the greedy glob agrees with the position-set matcher on random patterns.

use proptest::prelude::*;
use proptest::sample::select;
use robots_policy::reference::{naive_allowed, naive_match};
use robots_policy::{glob_match, AgentPolicy, DEFAULT_MAX_BYTES};

/// Paths and patterns over a small alphabet, so that matches are frequent.
fn path_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("/[ab/.?=$%]{0,12}").expect("valid regex")
}

fn pattern_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("/?[ab/.?*$%]{0,10}").expect("valid regex")
}

fn rule_line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (select(vec!["allow", "disallow", "Disallow", "disalow", "allow "]), pattern_text())
            .prop_map(|(k, p)| format!("{k}: {p}")),
        1 => pattern_text().prop_map(|p| format!("allow: {p}/index.html")),
        1 => select(vec!["a", "b", "A", "*", "* x", "*b", "a/1.0", "c"])
            .prop_map(|a| format!("user-agent: {a}")),
        1 => Just("sitemap: https://x.com/s.xml".to_string()),
        1 => Just("crawl-delay: 2".to_string()),
        1 => Just(String::new()),
        1 => Just("# comment".to_string()),
        1 => Just("disallow /a".to_string()),
        1 => Just("garbage line here".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn glob_agrees_with_position_set_matcher(pattern in pattern_text(), path in path_text()) {
        prop_assert_eq!(
            glob_match(pattern.as_bytes(), path.as_bytes()),
            naive_match(path.as_bytes(), pattern.as_bytes()),
            "pattern {:?} path {:?}", pattern, path
        );
    }

    #[test]
    fn compiled_policy_agrees_with_reference(
        lines in proptest::collection::vec(rule_line(), 0..24),
        agent in select(vec!["a", "b", "c", "A"]),
        paths in proptest::collection::vec(path_text(), 1..8),
        crlf in any::<bool>(),
    ) {
        let body = lines.join(if crlf { "\r\n" } else { "\n" });
        let policy = AgentPolicy::parse(body.as_bytes(), agent);
        for path in &paths {
            let url = format!("http://example.com{path}");
            prop_assert_eq!(
                policy.check_url(&url).allowed,
                naive_allowed(body.as_bytes(), agent, &url, DEFAULT_MAX_BYTES),
                "body {:?} agent {} url {}", body, agent, url
            );
        }
    }
}

/// Many rules with shared literal prefixes and floating pieces, so the index is exercised
/// beyond what small random files reach.
#[test]
fn large_generated_file_agrees_with_reference() {
    let words = ["a", "ab", "abc", "b", "ba", "x/y", "x", "index.html", "q=1"];
    let mut body = String::from("user-agent: *\n");
    let mut n = 0u64;
    let mut next = || {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (n >> 33) as usize
    };
    for _ in 0..400 {
        let kind = if next() % 2 == 0 { "allow" } else { "disallow" };
        let mut pattern = String::from("/");
        for _ in 0..(next() % 4) {
            match next() % 5 {
                0 => pattern.push('*'),
                1 => pattern.push('/'),
                _ => pattern.push_str(words[next() % words.len()]),
            }
        }
        if next() % 7 == 0 {
            pattern.push('$');
        }
        body.push_str(&format!("{kind}: {pattern}\n"));
    }
    let policy = AgentPolicy::parse(body.as_bytes(), "foobot");
    for _ in 0..3000 {
        let mut path = String::from("/");
        for _ in 0..(next() % 5) {
            path.push_str(words[next() % words.len()]);
            if next() % 3 == 0 {
                path.push('/');
            }
        }
        let url = format!("http://e.com{path}");
        assert_eq!(
            policy.check_url(&url).allowed,
            naive_allowed(body.as_bytes(), "foobot", &url, DEFAULT_MAX_BYTES),
            "{url}"
        );
    }
}

/// Rules and paths from the words of real files, so that literal pieces are long and
/// shared: exercises the prefix search past its 8-byte keys, the pair filter in front of
/// wildcard rules, and both ways of finding floating rules (tried in turn below 48 of
/// them, through the automaton above).
fn word_pattern() -> impl Strategy<Value = String> {
    let words = vec![
        "/",
        "wishlist",
        "/wishlist",
        "universal",
        "/gp/",
        "?ie=",
        "UTF8",
        "%2F",
        "index.html",
        "ab",
        "b",
        "-",
        "*",
    ];
    (
        select(vec!["/", "/", "*", "/*", "*/"]),
        proptest::collection::vec(select(words), 0..5),
        select(vec!["", "", "", "$"]),
    )
        .prop_map(|(start, parts, end)| format!("{start}{}{end}", parts.concat()))
}

fn word_path() -> impl Strategy<Value = String> {
    let words = vec![
        "/",
        "wishlist",
        "/wishlist",
        "universal",
        "/gp/",
        "?ie=",
        "UTF8",
        "%2F",
        "index.html",
        "ab",
        "b",
        "-",
        "Wishlist",
    ];
    proptest::collection::vec(select(words), 0..7).prop_map(|parts| format!("/{}", parts.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn word_built_files_agree_with_reference(
        rules in proptest::collection::vec(
            (select(vec!["allow", "disallow"]), word_pattern()), 0..120),
        paths in proptest::collection::vec(word_path(), 1..12),
    ) {
        let mut body = String::from("user-agent: *\n");
        for (kind, pattern) in &rules {
            body.push_str(&format!("{kind}: {pattern}\n"));
        }
        let policy = AgentPolicy::parse(body.as_bytes(), "foobot");
        for path in &paths {
            let url = format!("https://www.example.com{path}");
            prop_assert_eq!(
                policy.check_url(&url).allowed,
                naive_allowed(body.as_bytes(), "foobot", &url, DEFAULT_MAX_BYTES),
                "body {:?} url {}", body, url
            );
        }
    }
}
