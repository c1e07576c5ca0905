//! Which discovered links the crawl follows: `[scope]` of the configuration (mode, include,
//! exclude). Redirect targets are queued without this check (docs/crawl-log.md,
//! "Redirects").

use frontier::canon::politeness_key;
use frontier::PolitenessKeyMode;
use regex::Regex;
use url::Url;

/// How far from the page a link may lead (`scope.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeMode {
    /// Only links to the page's own host.
    SameHost,
    /// Links within the page's registrable domain (`a.example.org` -> `b.example.org`).
    SameDomain,
    /// Every http(s) link.
    Any,
}

/// The checked `[scope]` rules for links.
#[derive(Debug, Clone)]
pub struct Scope {
    pub mode: ScopeMode,
    /// When not empty, a link must match one of these.
    pub include: Vec<Regex>,
    /// A link matching one of these is never followed.
    pub exclude: Vec<Regex>,
}

impl Scope {
    /// Whether a link found on `page` is followed.
    pub fn admits(&self, page: &Url, link: &Url) -> bool {
        if !matches!(link.scheme(), "http" | "https") {
            return false;
        }
        let (Some(ph), Some(lh)) = (page.host_str(), link.host_str()) else {
            return false;
        };
        let ok = match self.mode {
            ScopeMode::Any => true,
            ScopeMode::SameHost => ph.eq_ignore_ascii_case(lh),
            ScopeMode::SameDomain => {
                let pl = ph.to_ascii_lowercase();
                let ll = lh.to_ascii_lowercase();
                politeness_key(&pl, PolitenessKeyMode::Domain)
                    == politeness_key(&ll, PolitenessKeyMode::Domain)
            }
        };
        if !ok {
            return false;
        }
        let s = link.as_str();
        if !self.include.is_empty() && !self.include.iter().any(|r| r.is_match(s)) {
            return false;
        }
        !self.exclude.iter().any(|r| r.is_match(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(mode: ScopeMode, include: &[&str], exclude: &[&str]) -> Scope {
        let re = |v: &[&str]| v.iter().map(|r| Regex::new(r).unwrap()).collect();
        Scope {
            mode,
            include: re(include),
            exclude: re(exclude),
        }
    }

    fn admits(s: &Scope, page: &str, link: &str) -> bool {
        s.admits(&Url::parse(page).unwrap(), &Url::parse(link).unwrap())
    }

    #[test]
    fn modes() {
        let page = "https://www.example.org/a";
        let host = scope(ScopeMode::SameHost, &[], &[]);
        assert!(admits(&host, page, "http://WWW.example.org/b"));
        assert!(!admits(&host, page, "https://cdn.example.org/b"));
        let domain = scope(ScopeMode::SameDomain, &[], &[]);
        assert!(admits(&domain, page, "https://cdn.example.org/b"));
        assert!(admits(&domain, page, "https://EXAMPLE.org/"));
        assert!(!admits(&domain, page, "https://example.net/"));
        let any = scope(ScopeMode::Any, &[], &[]);
        assert!(admits(&any, page, "https://example.net/"));
        assert!(!admits(&any, page, "ftp://example.net/"));
        assert!(!admits(&any, page, "mailto:a@example.net"));
    }

    #[test]
    fn include_then_exclude() {
        let s = scope(ScopeMode::Any, &["/docs/", "/blog/"], &["\\.pdf$"]);
        let page = "https://example.org/";
        assert!(admits(&s, page, "https://example.org/docs/x"));
        assert!(admits(&s, page, "https://example.org/blog/y"));
        assert!(!admits(&s, page, "https://example.org/shop/"));
        assert!(!admits(&s, page, "https://example.org/docs/x.pdf"));
        let no_include = scope(ScopeMode::Any, &[], &["private"]);
        assert!(admits(&no_include, page, "https://example.org/shop/"));
        assert!(!admits(&no_include, page, "https://example.org/private/"));
    }
}
