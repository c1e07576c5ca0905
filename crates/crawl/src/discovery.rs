//! Where a URL came from, as Heritrix's crawl.log has it: the hop path ("discovery path")
//! from its seed, one code per hop: `L` a link, `R` a redirect, `M` a sitemap entry (a
//! sitemap named by robots.txt or an index, a URL listed by a sitemap: Heritrix's
//! "manifest" hop); empty for a seed.
//!
//! Paths are kept as Heritrix 3.1 and later write them: the last [`MAX_HOPS_KEPT`] codes,
//! preceded by `N+` when N earlier hops were cut off (`12+LLR…`). That bounds what a queued
//! URL stores, and still shows the end of the path, where the redirect chain is.

/// Hop codes kept in a path; earlier hops are only counted.
pub const MAX_HOPS_KEPT: usize = 50;

/// How a URL was reached from the page before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A link found on the page (`L`).
    Link,
    /// The page's redirect `Location` (`R`).
    Redirect,
    /// Listed by a sitemap, or a sitemap named by robots.txt (`M`, Heritrix's manifest hop).
    Sitemap,
}

impl Hop {
    fn code(self) -> char {
        match self {
            Hop::Link => 'L',
            Hop::Redirect => 'R',
            Hop::Sitemap => 'M',
        }
    }
}

/// (hops cut off, the codes kept) of a path.
fn split(path: &str) -> (u64, &str) {
    match path.split_once('+') {
        Some((n, kept)) => match n.parse() {
            Ok(n) => (n, kept),
            Err(_) => (0, path),
        },
        None => (0, path),
    }
}

/// The hop path of a URL reached by `hop` from a page whose path is `from`.
pub fn extend(from: &str, hop: Hop) -> String {
    let (mut cut, kept) = split(from);
    let mut kept = kept.to_string();
    kept.push(hop.code());
    let n = kept.chars().count();
    if n > MAX_HOPS_KEPT {
        let excess = n - MAX_HOPS_KEPT;
        let at = kept
            .char_indices()
            .nth(excess)
            .map_or(kept.len(), |(i, _)| i);
        kept.drain(..at);
        cut += excess as u64;
    }
    if cut > 0 {
        format!("{cut}+{kept}")
    } else {
        kept
    }
}

/// Redirects at the end of a path: how many redirects in a row led to this URL (0 if the
/// last hop was a link, or for a seed).
pub fn trailing_redirects(path: &str) -> u32 {
    let (_, kept) = split(path);
    kept.chars().rev().take_while(|&c| c == 'R').count() as u32
}

/// How the URL was discovered: `seed`, `link`, `redirect` or `sitemap` (its last hop). None for a URL
/// queued at depth > 0 by a version that did not keep hop paths.
pub fn kind(path: &str, depth: u32) -> Option<&'static str> {
    match split(path).1.chars().last() {
        Some('L') => Some("link"),
        Some('R') => Some("redirect"),
        Some('M') => Some("sitemap"),
        Some(_) => None,
        None if depth == 0 => Some("seed"),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_grow_by_one_code_per_hop() {
        let link = extend("", Hop::Link);
        assert_eq!(link, "L");
        let r = extend(&link, Hop::Redirect);
        assert_eq!(r, "LR");
        assert_eq!(extend(&r, Hop::Redirect), "LRR");
        assert_eq!(extend(&extend(&r, Hop::Redirect), Hop::Link), "LRRL");
        assert_eq!(extend("", Hop::Redirect), "R");
    }

    #[test]
    fn long_paths_keep_the_last_fifty_codes_and_count_the_rest() {
        let mut p = String::new();
        for _ in 0..50 {
            p = extend(&p, Hop::Link);
        }
        assert_eq!(p, "L".repeat(50));
        p = extend(&p, Hop::Redirect);
        assert_eq!(p, format!("1+{}R", "L".repeat(49)));
        for _ in 0..11 {
            p = extend(&p, Hop::Link);
        }
        assert_eq!(p, format!("12+{}R{}", "L".repeat(38), "L".repeat(11)));
        assert_eq!(p.len(), 3 + MAX_HOPS_KEPT);
    }

    #[test]
    fn trailing_redirects_count_the_chain_that_led_here() {
        assert_eq!(trailing_redirects(""), 0);
        assert_eq!(trailing_redirects("L"), 0);
        assert_eq!(trailing_redirects("R"), 1);
        assert_eq!(trailing_redirects("LRRR"), 3);
        assert_eq!(trailing_redirects("RRLR"), 1);
        assert_eq!(trailing_redirects("RRL"), 0);
        // a chain longer than the kept codes counts up to what is kept
        let mut p = "L".to_string();
        for _ in 0..60 {
            p = extend(&p, Hop::Redirect);
        }
        assert!(p.starts_with("11+"), "{p}");
        assert_eq!(trailing_redirects(&p), MAX_HOPS_KEPT as u32);
    }

    #[test]
    fn kind_is_the_last_hop() {
        assert_eq!(kind("", 0), Some("seed"));
        assert_eq!(kind("LL", 2), Some("link"));
        assert_eq!(kind("LR", 1), Some("redirect"));
        assert_eq!(kind("3+RRL", 9), Some("link"));
        assert_eq!(kind(&extend("", Hop::Sitemap), 0), Some("sitemap"));
        assert_eq!(kind("MM", 0), Some("sitemap"));
        assert_eq!(kind("MML", 1), Some("link"));
        assert_eq!(trailing_redirects("MR"), 1);
        // queued at depth 2 before hop paths were kept: unknown, not a seed
        assert_eq!(kind("", 2), None);
        // whatever a damaged store holds: no panic
        assert_eq!(kind("x+é", 1), None);
        assert_eq!(extend("é", Hop::Link), "éL");
        assert_eq!(trailing_redirects("+R"), 1);
    }
}
