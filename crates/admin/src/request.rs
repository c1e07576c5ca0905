//! What an admin API request asks for, checked before anything is done: query parameters
//! (decoded with `url::form_urlencoded`; unknown names and bad values are refused by name),
//! host arguments (`a.test`, `a.test:8080`, `HTTPS://A.Test/`) mapped to the politeness key
//! the frontier files them under, and the bearer token compared in constant time.

use frontier::canon::{canonicalize, politeness_key_of};
use frontier::PolitenessKeyMode;

/// Robots states `GET /v1/hosts?state=` filters on (`unknown`: no robots record yet).
pub const ROBOTS_STATES: [&str; 5] = ["unknown", "fresh", "stale", "5xx-disallow", "fallback"];

/// Hosts listed when `limit` is not given.
pub const DEFAULT_HOST_LIMIT: usize = 100;

/// A refused request part: the answer is a 400 with this text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest(pub String);

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Decoded `name=value` pairs; each name at most once and one of `allowed`.
fn params(query: Option<&str>, allowed: &[&str]) -> Result<Vec<(String, String)>, BadRequest> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if name.is_empty() && value.is_empty() {
            continue; // `?&` or a trailing `&`
        }
        if !allowed.contains(&name.as_ref()) {
            return Err(BadRequest(format!(
                "unknown query parameter {name:?}; allowed: {}",
                allowed.join(", ")
            )));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(BadRequest(format!(
                "query parameter {name:?} given more than once"
            )));
        }
        out.push((name.into_owned(), value.into_owned()));
    }
    Ok(out)
}

/// `GET /v1/hosts?state=&limit=&sort=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostsQuery {
    /// Only hosts in this robots state (one of [`ROBOTS_STATES`]); None: every host.
    pub state: Option<String>,
    pub limit: usize,
    /// Ranked (the hosts in memory, highest first) instead of every host in key order.
    pub sort: Option<frontier::HostRank>,
}

/// The values of `sort`, and what each ranks by.
pub const HOST_SORTS: [(&str, Option<frontier::HostRank>); 4] = [
    ("key", None),
    ("completed", Some(frontier::HostRank::Completed)),
    ("slowest", Some(frontier::HostRank::Slowest)),
    ("queued", Some(frontier::HostRank::Queued)),
];

pub fn hosts_query(query: Option<&str>) -> Result<HostsQuery, BadRequest> {
    let mut q = HostsQuery {
        state: None,
        limit: DEFAULT_HOST_LIMIT,
        sort: None,
    };
    for (name, value) in params(query, &["state", "limit", "sort"])? {
        match name.as_str() {
            "sort" => match HOST_SORTS.iter().find(|(n, _)| *n == value) {
                Some((_, by)) => q.sort = *by,
                None => {
                    return Err(BadRequest(format!(
                        "sort={value:?} is not a host order; allowed: {}",
                        HOST_SORTS.map(|(n, _)| n).join(", ")
                    )))
                }
            },
            // an empty value means "not given" (older clients send `state=`)
            "state" if value.is_empty() => {}
            "state" if ROBOTS_STATES.contains(&value.as_str()) => q.state = Some(value),
            "state" => {
                return Err(BadRequest(format!(
                    "state={value:?} is not a robots state; allowed: {}",
                    ROBOTS_STATES.join(", ")
                )))
            }
            _ => match value.parse::<usize>() {
                Ok(n) if n > 0 => q.limit = n,
                _ => {
                    return Err(BadRequest(format!(
                        "limit={value:?} is not a whole number of at least 1"
                    )))
                }
            },
        }
    }
    Ok(q)
}

/// `POST /v1/hosts/{host}/pause?create=true`: whether to pause a host the frontier has no
/// record of (yet).
pub fn pause_query(query: Option<&str>) -> Result<bool, BadRequest> {
    let mut create = false;
    for (_, value) in params(query, &["create"])? {
        create = match value.as_str() {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => {
                return Err(BadRequest(format!(
                    "create={value:?}: allowed: true or false"
                )))
            }
        };
    }
    Ok(create)
}

/// `POST /v1/hosts/{host}/resume` takes no parameters.
pub fn no_query(query: Option<&str>) -> Result<(), BadRequest> {
    params(query, &[]).map(|_| ())
}

/// A path segment with its `%xx` escapes decoded (a host argument may be a whole origin,
/// `http%3A%2F%2Fa.test%3A8080%2F`).
pub fn path_segment(segment: &str) -> Result<String, BadRequest> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| {
            BadRequest(format!(
                "path segment {segment:?} is not UTF-8 once decoded"
            ))
        })
}

/// The politeness key of a host argument: a host (`a.test`, `A.Test`), host and port
/// (`a.test:8080`, `[::1]:8080`) or an http(s) origin or URL (`https://a.test:8443/`). It
/// goes through the frontier's own canonicalization, so it names the queue its URLs are in:
/// the port and scheme are dropped, the case folded, IDNs turned into punycode, and with
/// `politeness.key = "domain"` the registrable domain is kept (with `"origin"`, the
/// canonical origin: scheme and port kept).
pub fn host_key(arg: &str, mode: PolitenessKeyMode) -> Result<String, BadRequest> {
    let arg = arg.trim();
    let url = if arg.contains("://") {
        arg.to_string()
    } else {
        format!("http://{arg}")
    };
    let not_a_host = |why: &dyn std::fmt::Display| {
        BadRequest(format!(
            "{arg:?} is not a host, host:port or http(s) origin ({why})"
        ))
    };
    if arg.is_empty() {
        return Err(not_a_host(&"empty"));
    }
    let canon = canonicalize(&url, 8192).map_err(|e| not_a_host(&e))?;
    Ok(politeness_key_of(&canon, mode).to_string())
}

/// Whether the `Authorization` header value carries `token`. The comparison takes the
/// same time wherever the first difference is: both sides are hashed to equal-length
/// digests and every byte of them is compared, so response times leak neither the
/// token's bytes nor its length.
pub fn token_matches(authorization: Option<&[u8]>, token: &str) -> bool {
    let given = authorization
        .and_then(|v| v.strip_prefix(b"Bearer "))
        .map(|t| t.trim_ascii())
        .unwrap_or(b"");
    let a = sha1_smol::Sha1::from(given).digest().bytes();
    let b = sha1_smol::Sha1::from(token.as_bytes()).digest().bytes();
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    // an empty token never matches (an empty token file means "no token", see daemon.rs)
    std::hint::black_box(diff) == 0 && !token.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_query_decodes_and_defaults() {
        assert_eq!(
            hosts_query(None),
            Ok(HostsQuery {
                state: None,
                limit: DEFAULT_HOST_LIMIT,
                sort: None,
            })
        );
        let q = hosts_query(Some("sort=slowest&limit=10")).unwrap();
        assert_eq!(q.sort, Some(frontier::HostRank::Slowest));
        assert_eq!(hosts_query(Some("sort=key")).unwrap().sort, None);
        let q = hosts_query(Some("state=5xx%2Ddisallow&limit=7")).unwrap();
        assert_eq!(q.state.as_deref(), Some("5xx-disallow"));
        assert_eq!(q.limit, 7);
        // what the old CLI sent
        assert_eq!(hosts_query(Some("limit=50&state=")).unwrap().state, None);
    }

    #[test]
    fn hosts_query_refuses_bad_parameters_by_name() {
        let e = hosts_query(Some("state=bogus&limit=3")).unwrap_err().0;
        assert!(
            e.contains("state=\"bogus\"") && e.contains("fallback"),
            "{e}"
        );
        let e = hosts_query(Some("limit=abc")).unwrap_err().0;
        assert!(e.contains("limit=\"abc\""), "{e}");
        let e = hosts_query(Some("limit=0")).unwrap_err().0;
        assert!(e.contains("limit=\"0\""), "{e}");
        let e = hosts_query(Some("limit=-1")).unwrap_err().0;
        assert!(e.contains("limit=\"-1\""), "{e}");
        let e = hosts_query(Some("stat=fresh")).unwrap_err().0;
        assert!(
            e.contains("\"stat\"") && e.contains("state, limit, sort"),
            "{e}"
        );
        let e = hosts_query(Some("sort=fastest")).unwrap_err().0;
        assert!(
            e.contains("sort=\"fastest\"") && e.contains("completed, slowest"),
            "{e}"
        );
        let e = hosts_query(Some("limit=1&limit=2")).unwrap_err().0;
        assert!(e.contains("\"limit\" given more than once"), "{e}");
    }

    #[test]
    fn pause_query_create() {
        assert_eq!(pause_query(None), Ok(false));
        assert_eq!(pause_query(Some("create=true")), Ok(true));
        assert_eq!(pause_query(Some("create=false")), Ok(false));
        assert!(pause_query(Some("create=yes"))
            .unwrap_err()
            .0
            .contains("yes"));
        assert!(pause_query(Some("force=1"))
            .unwrap_err()
            .0
            .contains("force"));
        assert!(no_query(Some("create=true")).is_err());
        assert!(no_query(Some("")).is_ok());
    }

    #[test]
    fn origin_forms_map_to_the_politeness_key() {
        let key = |s: &str| host_key(s, PolitenessKeyMode::Host);
        for arg in [
            "a.test",
            "A.Test",
            "a.test:8080",
            "http://a.test:8080/",
            "HTTPS://A.Test/",
            "https://a.test:8443/some/page?q=1",
            " a.test ",
        ] {
            assert_eq!(key(arg).as_deref(), Ok("a.test"), "{arg}");
        }
        assert_eq!(key("[::1]:8080").as_deref(), Ok("[::1]"));
        assert_eq!(key("127.0.0.1:9").as_deref(), Ok("127.0.0.1"));
        assert_eq!(key("bücher.test").as_deref(), Ok("xn--bcher-kva.test"));
        assert_eq!(
            host_key("www.a.example.co.uk:81", PolitenessKeyMode::Domain).as_deref(),
            Ok("example.co.uk")
        );
        // politeness.key = "origin": the key is the canonical origin
        assert_eq!(
            host_key("HTTP://A.test:8080/x", PolitenessKeyMode::Origin).as_deref(),
            Ok("http://a.test:8080")
        );
        assert_eq!(
            host_key("a.test:80", PolitenessKeyMode::Origin).as_deref(),
            Ok("http://a.test")
        );
    }

    #[test]
    fn not_a_host_is_refused_by_name() {
        for arg in ["not a host", "", "ftp://a.test/", "http://", "a.test:99999"] {
            let e = host_key(arg, PolitenessKeyMode::Host).unwrap_err().0;
            assert!(e.contains(&format!("{:?}", arg.trim())), "{arg}: {e}");
        }
    }

    #[test]
    fn path_segments_are_percent_decoded() {
        assert_eq!(
            path_segment("http%3A%2F%2Fa.test%3A8080%2F").unwrap(),
            "http://a.test:8080/"
        );
        assert_eq!(path_segment("a.test:8080").unwrap(), "a.test:8080");
        assert!(path_segment("%FF").is_err());
    }

    #[test]
    fn token_comparison() {
        let t = "s3cret-token";
        assert!(token_matches(Some(b"Bearer s3cret-token"), t));
        assert!(token_matches(Some(b"Bearer s3cret-token \r"), t));
        assert!(!token_matches(Some(b"Bearer s3cret-tokeN"), t));
        assert!(!token_matches(Some(b"Bearer s3cret"), t));
        assert!(!token_matches(Some(b"Bearer s3cret-token-and-more"), t));
        assert!(!token_matches(Some(b"Basic s3cret-token"), t));
        assert!(!token_matches(None, t));
        assert!(!token_matches(Some(b"Bearer "), ""));
    }
}
