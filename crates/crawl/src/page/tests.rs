//! Each kind of answer, judged: what the frontier is told, the log outcome, what is queued.

use std::time::Duration;

use fetcher::{ContentCoding, NetworkErrorKind, StatusCode};
use regex::Regex;

use super::*;
use crate::scope::ScopeMode;

fn rules() -> FollowRules {
    FollowRules {
        follow_links: true,
        max_depth: 3,
        max_redirect_hops: 2,
        scope: Scope {
            mode: ScopeMode::SameHost,
            include: Vec::new(),
            exclude: vec![Regex::new("/private/").unwrap()],
        },
        links: LinkConfig::new("frontierd"),
    }
}

const PAGE: &str = "https://a.test/dir/page";

fn judge(rules: &FollowRules, depth: u32, hops: &str, fetched: &FetchOutcome) -> PageVerdict {
    let parsed = Url::parse(PAGE).unwrap();
    let page = Page {
        url: PAGE,
        parsed: &parsed,
        depth,
        hops,
    };
    judge_page(rules, &page, fetched, 42)
}

fn html(
    content_type: &'static str,
    body: &str,
    x_robots_tag: Option<&'static str>,
) -> FetchOutcome {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", content_type.parse().unwrap());
    if let Some(v) = x_robots_tag {
        headers.insert("x-robots-tag", v.parse().unwrap());
    }
    FetchOutcome::Success {
        status: StatusCode::OK,
        headers,
        body: body.as_bytes().to_vec().into(),
        truncated: false,
        content_coding: ContentCoding::Identity,
        max_age: None,
    }
}

const LINKS: &str = r#"<a href="a">a</a><a href="https://b.test/x">other host</a>
    <a href="/private/p">excluded</a><a href="mailto:x@a.test">mail</a>"#;

fn urls(v: &PageVerdict) -> Vec<&str> {
    v.discovered.iter().map(|i| i.url.as_str()).collect()
}

#[test]
fn an_html_page_leads_to_its_links_in_scope_one_level_deeper() {
    let v = judge(
        &rules(),
        1,
        "L",
        &html("Text/HTML; charset=utf-8", LINKS, None),
    );
    assert_eq!(v.outcome, PageOutcome::Done { response_ms: 42 });
    assert_eq!(v.log, Some((Outcome::Fetched, String::new())));
    assert_eq!(
        v.discovered,
        [EnqueueItem {
            url: "https://a.test/dir/a".into(),
            depth: 2,
            via: Some(PAGE.into()),
            hops: "LL".into(),
            ..EnqueueItem::default()
        }]
    );
    assert!(v.is_done() && v.redirect_stopped.is_none());
    let xhtml = judge(&rules(), 0, "", &html("application/xhtml+xml", LINKS, None));
    assert_eq!(urls(&xhtml), ["https://a.test/dir/a"]);
}

#[test]
fn no_links_from_other_types_the_depth_limit_nofollow_or_follow_links_off() {
    let text = judge(&rules(), 0, "", &html("text/plain", LINKS, None));
    assert!(text.discovered.is_empty() && text.is_done());
    let deep = judge(&rules(), 3, "LLL", &html("text/html", LINKS, None));
    assert!(deep.discovered.is_empty());
    let header = judge(&rules(), 0, "", &html("text/html", LINKS, Some("nofollow")));
    assert!(header.discovered.is_empty());
    let meta = format!(r#"<meta name="robots" content="nofollow">{LINKS}"#);
    assert!(judge(&rules(), 0, "", &html("text/html", &meta, None))
        .discovered
        .is_empty());
    let mut off = rules();
    off.follow_links = false;
    assert!(judge(&off, 0, "", &html("text/html", LINKS, None))
        .discovered
        .is_empty());
    // other crawlers' X-Robots-Tag lines do not apply
    let other = judge(
        &rules(),
        0,
        "",
        &html("text/html", LINKS, Some("googlebot: nofollow")),
    );
    assert_eq!(urls(&other), ["https://a.test/dir/a"]);
}

fn redirect_to(location: Option<&str>) -> FetchOutcome {
    FetchOutcome::Redirect {
        status: StatusCode::MOVED_PERMANENTLY,
        location: location.map(|l| Url::parse(l).unwrap()),
    }
}

#[test]
fn a_redirect_target_is_queued_at_the_same_depth_even_off_scope() {
    let v = judge(
        &rules(),
        2,
        "LR",
        &redirect_to(Some("https://b.test/private/x")),
    );
    assert_eq!(v.outcome, PageOutcome::Done { response_ms: 42 });
    assert_eq!(
        v.log,
        Some((
            Outcome::Redirected,
            "location https://b.test/private/x".into()
        ))
    );
    assert_eq!(
        v.discovered,
        [EnqueueItem {
            url: "https://b.test/private/x".into(),
            depth: 2,
            via: Some(PAGE.into()),
            hops: "LRR".into(),
            ..EnqueueItem::default()
        }]
    );
    let none = judge(&rules(), 0, "", &redirect_to(None));
    assert_eq!(
        none.log,
        Some((Outcome::Redirected, "no usable Location".into()))
    );
    assert!(none.discovered.is_empty());
}

#[test]
fn a_redirect_chain_stops_at_the_limit() {
    let v = judge(
        &rules(),
        1,
        "LRR",
        &redirect_to(Some("https://a.test/next")),
    );
    assert!(v.discovered.is_empty() && v.is_done());
    let (outcome, reason) = v.log.clone().unwrap();
    assert_eq!(outcome, Outcome::RedirectLimit);
    assert_eq!(
        reason,
        "scope.max_redirect_hops = 2 reached (2 redirects led here): location https://a.test/next not followed"
    );
    assert_eq!(
        v.redirect_stopped,
        Some(RedirectStopped {
            location: Url::parse("https://a.test/next").unwrap(),
            chain: 2,
            limit: 2
        })
    );
    // a link in between starts a new chain
    let v = judge(
        &rules(),
        1,
        "RRL",
        &redirect_to(Some("https://a.test/next")),
    );
    assert_eq!(urls(&v), ["https://a.test/next"]);
}

#[test]
fn client_errors_are_final_throttling_and_failures_are_retried() {
    let not_found = judge(
        &rules(),
        0,
        "",
        &FetchOutcome::ClientError {
            status: StatusCode::NOT_FOUND,
        },
    );
    assert_eq!(not_found.log, Some((Outcome::Fetched, String::new())));
    assert!(not_found.is_done());
    let wait = Some(Duration::from_secs(7));
    let too_many = judge(
        &rules(),
        0,
        "",
        &FetchOutcome::TooManyRequests { retry_after: wait },
    );
    assert_eq!(
        too_many.outcome,
        PageOutcome::Throttled {
            status: 429,
            retry_after: wait,
            response_ms: 42
        }
    );
    assert_eq!(too_many.log, None);
    let unavailable = judge(
        &rules(),
        0,
        "",
        &FetchOutcome::ServerError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: None,
        },
    );
    assert!(matches!(
        unavailable.outcome,
        PageOutcome::Throttled { status: 503, .. }
    ));
    let failed = judge(
        &rules(),
        0,
        "",
        &FetchOutcome::ServerError {
            status: StatusCode::BAD_GATEWAY,
            retry_after: None,
        },
    );
    assert_eq!(
        failed.outcome,
        PageOutcome::Failed {
            reason: "status 502".into()
        }
    );
    assert!(!failed.is_done() && failed.log.is_none());
    // any 5xx with Retry-After throttles the host
    let with_wait = judge(
        &rules(),
        0,
        "",
        &FetchOutcome::ServerError {
            status: StatusCode::BAD_GATEWAY,
            retry_after: wait,
        },
    );
    assert!(matches!(
        with_wait.outcome,
        PageOutcome::Throttled { status: 502, .. }
    ));
    let network = |kind| {
        judge(
            &rules(),
            0,
            "",
            &FetchOutcome::Network {
                kind,
                detail: "after 30s".into(),
            },
        )
        .outcome
    };
    assert_eq!(
        network(NetworkErrorKind::Timeout),
        PageOutcome::TimedOut {
            reason: "timeout: after 30s".into()
        }
    );
    assert!(matches!(
        network(NetworkErrorKind::Connect),
        PageOutcome::Unreachable { .. }
    ));
    assert_eq!(
        network(NetworkErrorKind::BrokenChunking),
        PageOutcome::Failed {
            reason: "malformed: after 30s".into()
        }
    );
    let refused = PageVerdict::not_fetched("bad scheme".into());
    assert!(!refused.is_done() && refused.log.is_none());
}
