//! Canonical URL form (see `docs/urls.md`).
//!
//! Two spellings of one URL become one string: WHATWG parsing via the `url` crate (scheme and
//! host lower-cased, IDN to punycode, default port dropped, dot segments resolved), fragment
//! dropped, empty path -> `/`, and percent-encoding in path and query made canonical:
//! upper-case hex, unreserved characters decoded, non-ASCII and stray `%` encoded.

use std::fmt;

use url::{Host, Url};

/// Why a URL was refused. The caller sees the variant; [`Rejection::code`] is a stable name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The input is empty or only whitespace.
    #[error("empty URL")]
    Empty,
    /// The WHATWG parser refused it.
    #[error("unparsable URL: {0}")]
    Unparsable(String),
    /// Scheme other than http or https.
    #[error("unsupported scheme {0:?} (only http and https)")]
    UnsupportedScheme(String),
    /// No host, or an empty host.
    #[error("URL has no host")]
    NoHost,
    /// Longer than the configured limit (checked on input and on the canonical form).
    #[error("URL is {len} bytes, longer than the limit of {limit}")]
    TooLong {
        /// Length in bytes.
        len: usize,
        /// Configured limit.
        limit: usize,
    },
    /// `user:password@` in the authority: never crawled, never stored.
    #[error("URL carries credentials (userinfo)")]
    Credentials,
    /// Port 0.
    #[error("invalid port {0}")]
    InvalidPort(u16),
}

impl Rejection {
    /// Stable short name of the reason (for logs and counters).
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Empty => "empty",
            Rejection::Unparsable(_) => "unparsable",
            Rejection::UnsupportedScheme(_) => "unsupported-scheme",
            Rejection::NoHost => "no-host",
            Rejection::TooLong { .. } => "too-long",
            Rejection::Credentials => "credentials",
            Rejection::InvalidPort(_) => "invalid-port",
        }
    }
}

/// A URL in canonical form, with the offsets of its parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalUrl {
    url: String,
    /// Byte offset where the path starts (end of the origin).
    path_start: usize,
    host: String,
}

impl CanonicalUrl {
    /// The whole canonical URL.
    pub fn as_str(&self) -> &str {
        &self.url
    }
    /// `scheme://host[:port]`, default port folded: the robots.txt origin key.
    pub fn origin(&self) -> &str {
        &self.url[..self.path_start]
    }
    /// Path and query (always starts with `/`): what robots rules are matched against.
    pub fn path_and_query(&self) -> &str {
        &self.url[self.path_start..]
    }
    /// The host (punycode, lower case; IPv6 in brackets).
    pub fn host(&self) -> &str {
        &self.host
    }
    /// Consume into the string.
    pub fn into_string(self) -> String {
        self.url
    }
    /// Re-wrap a string that was produced by [`canonicalize`] (e.g. read back from the store).
    /// Returns `None` if it does not have the canonical shape.
    pub fn from_canonical(url: String) -> Option<CanonicalUrl> {
        let (path_start, host) = split_canonical(&url)?;
        let host = host.to_string();
        Some(CanonicalUrl {
            url,
            path_start,
            host,
        })
    }
}

impl fmt::Display for CanonicalUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// Split a canonical URL into (path start, host).
fn split_canonical(url: &str) -> Option<(usize, &str)> {
    let rest_at = url.find("://")? + 3;
    let rest = &url[rest_at..];
    let path_rel = rest.find('/')?;
    let authority = &rest[..path_rel];
    let host = if authority.starts_with('[') {
        &authority[..authority.find(']')? + 1]
    } else {
        authority.split(':').next()?
    };
    Some((rest_at + path_rel, host))
}

/// Origin (`scheme://host[:port]`) of a canonical URL string, if it has the canonical shape.
pub fn origin_of(canonical: &str) -> Option<&str> {
    split_canonical(canonical).map(|(p, _)| &canonical[..p])
}

/// Canonicalize `input`, refusing anything longer than `max_len` bytes.
pub fn canonicalize(input: &str, max_len: usize) -> Result<CanonicalUrl, Rejection> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(Rejection::Empty);
    }
    if trimmed.len() > max_len {
        return Err(Rejection::TooLong {
            len: trimmed.len(),
            limit: max_len,
        });
    }
    let mut url = Url::parse(trimmed).map_err(|e| Rejection::Unparsable(e.to_string()))?;
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(Rejection::UnsupportedScheme(other.to_string())),
    }
    let host = match url.host() {
        None => return Err(Rejection::NoHost),
        Some(Host::Domain("")) => return Err(Rejection::NoHost),
        Some(Host::Domain(d)) => d.to_string(),
        Some(Host::Ipv4(a)) => a.to_string(),
        Some(Host::Ipv6(a)) => format!("[{a}]"),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Rejection::Credentials);
    }
    if url.port() == Some(0) {
        return Err(Rejection::InvalidPort(0));
    }
    url.set_fragment(None);
    let path = normalize_percent(url.path());
    let query = url.query().map(normalize_percent);
    // Rebuild: scheme://host[:port] + path [+ ?query]. The url crate already lower-cased the
    // scheme and host, converted IDN to punycode and dropped the default port.
    let mut out = String::with_capacity(url.as_str().len());
    out.push_str(url.scheme());
    out.push_str("://");
    out.push_str(&host);
    if let Some(port) = url.port() {
        out.push(':');
        out.push_str(&port.to_string());
    }
    let path_start = out.len();
    if path.is_empty() {
        out.push('/');
    } else {
        out.push_str(&path);
    }
    if let Some(q) = query {
        out.push('?');
        out.push_str(&q);
    }
    if out.len() > max_len {
        return Err(Rejection::TooLong {
            len: out.len(),
            limit: max_len,
        });
    }
    Ok(CanonicalUrl {
        url: out,
        path_start,
        host,
    })
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_encoded(out: &mut String, b: u8) {
    out.push('%');
    out.push(HEX[(b >> 4) as usize] as char);
    out.push(HEX[(b & 15) as usize] as char);
}

/// Canonical percent-encoding of a path or query component: `%xx` of an unreserved character
/// is decoded, other `%xx` get upper-case hex, a `%` not followed by two hex digits becomes
/// `%25`, and any byte outside printable ASCII is encoded. Reserved characters are left as
/// they are (encoding or decoding them can change the meaning).
fn normalize_percent(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            if i + 2 < bytes.len() {
                if let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2])) {
                    let v = (h << 4) | l;
                    if is_unreserved(v) {
                        out.push(v as char);
                    } else {
                        push_encoded(&mut out, v);
                    }
                    i += 3;
                    continue;
                }
            }
            out.push_str("%25");
            i += 1;
        } else if b <= 0x20 || b >= 0x7f {
            push_encoded(&mut out, b);
            i += 1;
        } else {
            out.push(b as char);
            i += 1;
        }
    }
    out
}

/// How the politeness key is derived from a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolitenessKeyMode {
    /// One queue per host name (default).
    #[default]
    Host,
    /// One queue per registrable domain (public suffix list), for sites that spread one
    /// server over many subdomains. IP addresses and names without a registrable domain
    /// fall back to the host.
    Domain,
    /// One queue per origin (scheme, host, port): each origin paced on its own, for
    /// operators who know the origins of one host are served apart.
    Origin,
}

/// The politeness key of a canonical URL.
pub fn politeness_key_of(url: &CanonicalUrl, mode: PolitenessKeyMode) -> &str {
    match mode {
        PolitenessKeyMode::Origin => url.origin(),
        _ => politeness_key(url.host(), mode),
    }
}

/// The politeness key of a canonical URL's host (in [`PolitenessKeyMode::Origin`], which
/// needs the whole URL, the host: use [`politeness_key_of`]).
pub fn politeness_key(host: &str, mode: PolitenessKeyMode) -> &str {
    match mode {
        PolitenessKeyMode::Host | PolitenessKeyMode::Origin => host,
        PolitenessKeyMode::Domain => {
            if host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok() {
                return host;
            }
            psl::domain_str(host).unwrap_or(host)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> String {
        canonicalize(s, 8192).unwrap().into_string()
    }

    #[test]
    fn spellings_collapse() {
        assert_eq!(c("HTTP://Example.COM:80"), "http://example.com/");
        assert_eq!(c("https://example.com:443/a#frag"), "https://example.com/a");
        assert_eq!(c("http://example.com:8080/x"), "http://example.com:8080/x");
        assert_eq!(c("http://example.com/a/./b/../c"), "http://example.com/a/c");
        assert_eq!(
            c("http://example.com/%7euser/%61"),
            "http://example.com/~user/a"
        );
        assert_eq!(
            c("http://example.com/a%2fb%3a"),
            "http://example.com/a%2Fb%3A"
        );
        assert_eq!(
            c("http://example.com/?q=%7e%2a"),
            "http://example.com/?q=~%2A"
        );
        assert_eq!(c("http://example.com/100%"), "http://example.com/100%25");
        assert_eq!(c("http://example.com/%zz"), "http://example.com/%25zz");
        assert_eq!(c("  http://example.com/a b "), "http://example.com/a%20b");
    }

    #[test]
    fn idn_and_non_ascii() {
        assert_eq!(
            c("http://www.exämple.com/"),
            "http://www.xn--exmple-cua.com/"
        );
        assert_eq!(
            c("http://xn--exmple-cua.com/"),
            "http://xn--exmple-cua.com/"
        );
        assert_eq!(
            c("http://example.com/ü?ä=1"),
            "http://example.com/%C3%BC?%C3%A4=1"
        );
        assert_eq!(c("http://example.com/%c3%bc"), "http://example.com/%C3%BC");
    }

    #[test]
    fn parts() {
        let u = canonicalize("https://Example.com:8443/p?q#f", 8192).unwrap();
        assert_eq!(u.origin(), "https://example.com:8443");
        assert_eq!(u.path_and_query(), "/p?q");
        assert_eq!(u.host(), "example.com");
        let v = canonicalize("http://[::1]:81/x", 8192).unwrap();
        assert_eq!(v.host(), "[::1]");
        assert_eq!(v.origin(), "http://[::1]:81");
        let w = CanonicalUrl::from_canonical(v.as_str().to_string()).unwrap();
        assert_eq!(w, v);
        assert_eq!(origin_of("https://a.b/c"), Some("https://a.b"));
    }

    #[test]
    fn rejections() {
        let r = |s: &str| canonicalize(s, 64).unwrap_err().code();
        assert_eq!(r(""), "empty");
        assert_eq!(r("not a url"), "unparsable");
        assert_eq!(r("ftp://example.com/"), "unsupported-scheme");
        assert_eq!(r("mailto:a@b.c"), "unsupported-scheme");
        assert_eq!(r("http://user:pw@example.com/"), "credentials");
        assert_eq!(r("http://example.com:0/"), "invalid-port");
        assert_eq!(r("http://example.com:70000/"), "unparsable");
        assert_eq!(
            r(&format!("http://example.com/{}", "a".repeat(100))),
            "too-long"
        );
        // grows past the limit only once non-ASCII is encoded
        assert_eq!(r(&format!("http://e.com/{}", "é".repeat(20))), "too-long");
    }

    #[test]
    fn keys() {
        assert_eq!(
            politeness_key("a.b.example.co.uk", PolitenessKeyMode::Domain),
            "example.co.uk"
        );
        assert_eq!(
            politeness_key("a.b.example.co.uk", PolitenessKeyMode::Host),
            "a.b.example.co.uk"
        );
        assert_eq!(
            politeness_key("10.0.0.1", PolitenessKeyMode::Domain),
            "10.0.0.1"
        );
        assert_eq!(politeness_key("[::1]", PolitenessKeyMode::Domain), "[::1]");
    }
}
