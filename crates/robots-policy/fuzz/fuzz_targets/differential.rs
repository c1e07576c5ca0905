//! The compiled matcher agrees with the naive reference model of Google's matcher.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_policy::{
    glob_match, path_params_query, reference, AgentPolicy, ParseOptions, RobotsTxt,
    DEFAULT_MAX_BYTES,
};

#[path = "split.rs"]
mod split;

/// Bounds that keep the quadratic reference model fast.
const MAX_BODY: usize = 4096;
const MAX_URL: usize = 256;

fuzz_target!(|data: &[u8]| {
    let input = split::Input::split(data, MAX_BODY, MAX_URL);
    let policy = AgentPolicy::parse(input.body, &input.agent);
    // The same body under a size limit that falls inside it.
    let max_bytes = split::size_limit(input.body);
    let cut =
        RobotsTxt::parse_with(input.body, &ParseOptions { max_bytes }).for_agent(&input.agent);
    for raw in &input.urls {
        let url = split::lossy(raw);
        let ours = policy.check_url(&url).allowed;
        let naive = reference::naive_allowed(input.body, &input.agent, &url, DEFAULT_MAX_BYTES);
        assert_eq!(
            ours,
            naive,
            "verdicts differ: body={:?} agent={:?} url={:?} ours={ours} naive={naive}",
            String::from_utf8_lossy(input.body),
            input.agent,
            url
        );
        let ours_cut = cut.check_url(&url).allowed;
        let naive_cut = reference::naive_allowed(input.body, &input.agent, &url, max_bytes);
        assert_eq!(
            ours_cut,
            naive_cut,
            "verdicts differ under max_bytes={max_bytes}: body={:?} agent={:?} url={:?} \
             ours={ours_cut} naive={naive_cut}",
            String::from_utf8_lossy(input.body),
            input.agent,
            url
        );
        // Every compiled rule pattern against this URL's path.
        let path = path_params_query(&url);
        for rule in policy.rules() {
            let p = rule.pattern.as_bytes();
            assert_eq!(
                glob_match(p, path.as_bytes()),
                reference::naive_match(path.as_bytes(), p),
                "glob_match differs: pattern={:?} path={:?}",
                rule.pattern,
                path
            );
        }
    }
    // A raw pattern/path pair straight from the input: the agent field as the pattern,
    // each URL field as the path.
    for raw in &input.urls {
        assert_eq!(
            glob_match(input.agent_bytes, raw),
            reference::naive_match(raw, input.agent_bytes),
            "glob_match differs: pattern={:?} path={:?}",
            String::from_utf8_lossy(input.agent_bytes),
            String::from_utf8_lossy(raw)
        );
    }
});
