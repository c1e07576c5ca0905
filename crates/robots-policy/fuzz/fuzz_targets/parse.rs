//! The parser and matcher never panic, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_policy::{ParseOptions, RobotsTxt};

#[path = "split.rs"]
mod split;

fn exercise(body: &[u8], agent: &str, urls: &[String]) {
    exercise_robots(RobotsTxt::parse(body), agent, urls);
    let max_bytes = split::size_limit(body);
    let cut = RobotsTxt::parse_with(body, &ParseOptions { max_bytes });
    assert_eq!(cut.bytes_parsed(), body.len().min(max_bytes));
    assert_eq!(cut.bytes_parsed() + cut.bytes_ignored(), body.len());
    exercise_robots(cut, agent, urls);
}

fn exercise_robots(robots: RobotsTxt, agent: &str, urls: &[String]) {
    for d in robots.diagnostics() {
        std::hint::black_box(format!("{d:?}"));
    }
    std::hint::black_box(robots.sitemaps());
    std::hint::black_box((
        robots.diagnostics_omitted(),
        robots.bytes_parsed(),
        robots.bytes_ignored(),
    ));
    let policy = robots.for_agent(agent);
    for url in urls {
        let verdict = policy.check_url(url);
        if let Some(id) = verdict.rule {
            let rule = policy.rule(id).expect("deciding rule id must resolve");
            assert_eq!(verdict.allowed, rule.kind == robots_policy::RuleKind::Allow);
        }
        std::hint::black_box(policy.check(url));
    }
    for rule in policy.rules() {
        std::hint::black_box((
            rule.kind.as_str(),
            rule.pattern,
            rule.line,
            rule.synthesized,
        ));
    }
    std::hint::black_box(policy.crawl_delay());
    std::hint::black_box(format!("{:?}", policy.group()));
}

fuzz_target!(|data: &[u8]| {
    let input = split::Input::split(data, usize::MAX, usize::MAX);
    let urls: Vec<String> = input.urls.iter().map(|u| split::lossy(u)).collect();
    exercise(input.body, &input.agent, &urls);
    // The whole input as one body too, so NUL bytes inside a body are covered.
    if input.body.len() != data.len() {
        exercise(data, "googlebot", &urls);
    }
});
