//! `path_params_query` against a line-for-line port of Google's `GetPathParamsQuery`
//! (robots.cc), on random URLs made of the characters that matter to it. The reference
//! model of the matcher uses `path_params_query` too, so it is checked here on its own.

use proptest::prelude::*;
use proptest::sample::select;
use robots_policy::path_params_query;

/// Google's function, as written in C++ (`find_first_of`, `find`, npos as `None`).
fn google_get_path_params_query(url: &str) -> String {
    let find_first_of = |from: usize, set: &[u8]| {
        url.as_bytes()
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, b)| set.contains(b))
            .map(|(i, _)| i)
    };
    let search_start = if url.starts_with("//") { 2 } else { 0 };
    let early_path = find_first_of(search_start, b"/?;");
    let mut protocol_end = url.get(search_start..).and_then(|rest| rest.find("://"));
    protocol_end = protocol_end.map(|p| p + search_start);
    if let (Some(early), Some(protocol)) = (early_path, protocol_end) {
        if early < protocol {
            protocol_end = None;
        }
    }
    let protocol_end = protocol_end.map_or(search_start, |p| p + 3);
    let Some(path_start) = find_first_of(protocol_end, b"/?;") else {
        return "/".to_string();
    };
    let hash_pos = find_first_of(search_start, b"#");
    if hash_pos.is_some_and(|h| h < path_start) {
        return "/".to_string();
    }
    let path_end = hash_pos.unwrap_or(url.len());
    let path = &url[path_start..path_end];
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

fn url_text() -> impl Strategy<Value = String> {
    let parts = vec![
        "http",
        "https",
        "://",
        ":",
        "/",
        "//",
        "?",
        ";",
        "#",
        "a",
        "b.c",
        "www.example.com",
        "%2F",
    ];
    proptest::collection::vec(select(parts), 0..10).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn extraction_equals_googles(url in url_text()) {
        let ours = path_params_query(&url);
        prop_assert_eq!(ours.as_ref(), google_get_path_params_query(&url), "{}", url);
    }
}
