//! `Retry-After` and `Cache-Control: max-age`, parsed once here as pure functions.

use std::time::{Duration, SystemTime};

use http::header::{CACHE_CONTROL, RETRY_AFTER};
use http::HeaderMap;

/// RFC 9111 5.2.1: a delta-seconds too large to represent means 2^31 seconds.
const DELTA_SECONDS_CEILING: u64 = 1 << 31;

/// Parses one `Retry-After` value, delta-seconds (`120`) or HTTP-date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, also the obsolete RFC 850 and asctime forms), into
/// the wait from `now`. A date in the past means no wait (zero). Anything else is None.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(parse_delta_seconds(value)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The first parseable `Retry-After` header of a response, relative to `now`.
pub fn retry_after_from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    headers
        .get_all(RETRY_AFTER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| parse_retry_after(v, now))
}

/// The `max-age` directive of one `Cache-Control` value (`public, max-age=3600`).
/// Directive names ignore case; a quoted value (`max-age="60"`) is accepted; an
/// unparseable max-age is ignored.
pub fn parse_cache_control_max_age(value: &str) -> Option<Duration> {
    split_directives(value).find_map(|directive| {
        let (name, arg) = directive.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("max-age") {
            return None;
        }
        let arg = arg.trim();
        let arg = arg
            .strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .unwrap_or(arg);
        if arg.is_empty() || !arg.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Duration::from_secs(parse_delta_seconds(arg)))
    })
}

/// The first `max-age` across all `Cache-Control` headers of a response.
pub fn max_age_from_headers(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(parse_cache_control_max_age)
}

/// All-digit input; saturates at the RFC 9111 ceiling instead of overflowing.
fn parse_delta_seconds(digits: &str) -> u64 {
    digits
        .parse::<u64>()
        .map_or(DELTA_SECONDS_CEILING, |s| s.min(DELTA_SECONDS_CEILING))
}

/// Splits on commas that are not inside a quoted string.
fn split_directives(value: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&value[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    // 1445412480 = Wed, 21 Oct 2015 07:28:00 GMT
    const DATE: u64 = 1_445_412_480;

    #[test]
    fn retry_after_delta_seconds() {
        assert_eq!(
            parse_retry_after("120", at(0)),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", at(0)), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("99999999999999999999999", at(0)),
            Some(Duration::from_secs(1 << 31))
        );
    }

    #[test]
    fn retry_after_http_date_is_relative_to_now() {
        let imf = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(
            parse_retry_after(imf, at(DATE - 90)),
            Some(Duration::from_secs(90))
        );
        // Obsolete forms still parse.
        assert_eq!(
            parse_retry_after("Wednesday, 21-Oct-15 07:28:00 GMT", at(DATE - 5)),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            parse_retry_after("Wed Oct 21 07:28:00 2015", at(DATE - 5)),
            Some(Duration::from_secs(5))
        );
        // A date already past means retry now.
        assert_eq!(parse_retry_after(imf, at(DATE + 600)), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_garbage_is_none() {
        for bad in [
            "",
            "soon",
            "-5",
            "1.5",
            "12 seconds",
            "Wed, 99 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, at(DATE)), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_from_headers_takes_the_first_valid() {
        let mut h = HeaderMap::new();
        h.append(RETRY_AFTER, HeaderValue::from_static("later"));
        h.append(RETRY_AFTER, HeaderValue::from_static("30"));
        assert_eq!(
            retry_after_from_headers(&h, at(0)),
            Some(Duration::from_secs(30))
        );
        assert_eq!(retry_after_from_headers(&HeaderMap::new(), at(0)), None);
    }

    #[test]
    fn max_age_directive() {
        let cases: &[(&str, Option<u64>)] = &[
            ("max-age=3600", Some(3600)),
            ("public, max-age=60", Some(60)),
            ("Max-Age = 7 , no-cache", Some(7)),
            ("max-age=\"60\"", Some(60)),
            ("private, community=\"a,max-age=1\", max-age=5", Some(5)),
            ("s-maxage=100", None),
            ("no-store", None),
            ("max-age=", None),
            ("max-age=-1", None),
            ("max-age=1h", None),
            ("max-age=99999999999999999999", Some(1 << 31)),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(
                parse_cache_control_max_age(value),
                want.map(Duration::from_secs),
                "{value:?}"
            );
        }
    }

    #[test]
    fn max_age_across_headers() {
        let mut h = HeaderMap::new();
        h.append(CACHE_CONTROL, HeaderValue::from_static("public"));
        h.append(CACHE_CONTROL, HeaderValue::from_static("max-age=86400"));
        assert_eq!(max_age_from_headers(&h), Some(Duration::from_secs(86400)));
        assert_eq!(max_age_from_headers(&HeaderMap::new()), None);
    }
}
