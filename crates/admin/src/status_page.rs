//! The status page at `/`: one HTML page, its script and its style sheet, all built into the
//! binary (no CDN, nothing fetched at run time). The script reads `/v1/stats`, `/v1/recent`
//! and `/v1/hosts`, the same counters as `/metrics`, and writes every value as text. A strict
//! Content-Security-Policy lets the page load only these files and talk only to this API:
//! no inline script, no other origin, so nothing from a crawled page can run in it.

use axum::body::Body;
use axum::http::{header, HeaderValue, Response, StatusCode};

/// The page.
pub const INDEX_HTML: &str = include_str!("status/index.html");
/// Its script.
pub const STATUS_JS: &str = include_str!("status/status.js");
/// Its style sheet.
pub const STATUS_CSS: &str = include_str!("status/status.css");

/// The policy every file of the page is served with.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// One of the page's files, with its type and the policy.
pub(crate) fn asset(content_type: &'static str, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files_and_writes_values_as_text() {
        // no inline script or style for the policy to refuse, no other origin named
        assert!(!INDEX_HTML.contains("<script>"));
        assert!(!INDEX_HTML.contains("style="));
        assert!(!INDEX_HTML.contains("http://") && !INDEX_HTML.contains("https://"));
        assert!(INDEX_HTML.contains(r#"<script src="/status.js" defer></script>"#));
        // daemon values go through textContent and setAttribute only
        assert!(!STATUS_JS.contains("innerHTML") && !STATUS_JS.contains("outerHTML"));
        assert!(!STATUS_JS.contains("insertAdjacentHTML") && !STATUS_JS.contains("eval("));
        assert!(CONTENT_SECURITY_POLICY.starts_with("default-src 'none'"));
    }
}
