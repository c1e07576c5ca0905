//! Crawls (url-frontier's `crawlID`): namespaces of URLs inside the one frontier.
//!
//! A URL of a crawl other than the default is stored with a crawl tag appended to its
//! canonical form (`<canonical>#~crawl:<name>[~gen:<n>]`). A canonical URL never has a
//! fragment, so a tagged URL is a URL of its own in the seen-set, the queues and every
//! record keyed by URL, while its host, origin and politeness key are those of the URL:
//! politeness and robots.txt stay per host across crawls (one host queue holds the URLs
//! of every crawl, in arrival order). URLs without a tag (every URL of a data directory
//! written before crawls existed) are the default crawl's.
//!
//! Deleting a queue of a crawl or a whole crawl moves it to a new generation (durable, one
//! record): the URLs of older generations are dead, discarded without being served when
//! their host's queue reaches them, and no longer counted; a URL put again afterwards gets
//! the new generation's tag, so it is a new URL (url-frontier forgets deleted URLs).
//! Crawl limits (url-frontier's SetCrawlLimit) and the completions they count are kept
//! per (crawl, politeness key), durably.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::canon::{canonicalize, CanonicalUrl, Rejection};
use crate::error::Result;
use crate::store::keys;

/// The default crawl (url-frontier's name; an empty crawlID means it too).
pub const DEFAULT_CRAWL: &str = "DEFAULT";

/// Start of a crawl tag; `#` never occurs in a canonical URL (fragments are dropped).
pub(crate) const TAG: &str = "#~crawl:";
/// Separates the generation from the crawl name in a tag.
pub(crate) const GEN: &str = "~gen:";
/// Set-aside name (in a host's parked URLs) of the URLs of a crawl whose limit is reached.
pub(crate) const LIMIT_PARK: &str = "~limit:";

/// url-frontier's normalisation: the empty crawlID is the default crawl.
pub fn normalise_crawl(crawl: &str) -> &str {
    if crawl.is_empty() {
        DEFAULT_CRAWL
    } else {
        crawl
    }
}

/// A stored URL split into the URL, its crawl and the crawl generation it was put in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredUrl<'a> {
    /// The canonical URL, without tag.
    pub url: &'a str,
    /// Its crawl.
    pub crawl: Cow<'a, str>,
    /// The generation of its (crawl, queue) when it was put.
    pub generation: u64,
}

/// Split a stored URL (tagged or not).
pub fn split_stored(stored: &str) -> StoredUrl<'_> {
    let Some(at) = stored.find(TAG) else {
        return StoredUrl {
            url: stored,
            crawl: Cow::Borrowed(DEFAULT_CRAWL),
            generation: 0,
        };
    };
    let tag = &stored[at + TAG.len()..];
    let (name, generation) = match tag.rfind(GEN) {
        Some(g) => (&tag[..g], tag[g + GEN.len()..].parse().unwrap_or(0)),
        None => (tag, 0),
    };
    StoredUrl {
        url: &stored[..at],
        crawl: decode_name(name),
        generation,
    }
}

/// The stored form of canonical `url` in `crawl` at `generation` (the default crawl's
/// first generation is the URL itself, as before crawls existed).
pub fn tag_url(url: &str, crawl: &str, generation: u64) -> String {
    let crawl = normalise_crawl(crawl);
    if crawl == DEFAULT_CRAWL && generation == 0 {
        return url.to_string();
    }
    let mut s = format!("{url}{TAG}{}", encode_name(crawl));
    if generation > 0 {
        s.push_str(GEN);
        s.push_str(&generation.to_string());
    }
    s
}

/// Canonicalize input that may carry a crawl tag: the URL part is canonicalized, the tag
/// kept (re-encoded). Returns the canonical URL (untagged) and the stored form.
pub fn canonicalize_stored(
    input: &str,
    max_len: usize,
) -> Result<(CanonicalUrl, String), Rejection> {
    let parts = split_stored(input.trim());
    let canon = canonicalize(parts.url, max_len)?;
    let stored = tag_url(canon.as_str(), &parts.crawl, parts.generation);
    Ok((canon, stored))
}

/// Crawl names are kept printable and unambiguous: `%`, `~`, `#`, spaces, controls and
/// non-ASCII are percent-encoded.
pub(crate) fn encode_name(name: &str) -> Cow<'_, str> {
    let plain = |b: u8| b.is_ascii_graphic() && !matches!(b, b'%' | b'~' | b'#');
    if name.bytes().all(plain) {
        return Cow::Borrowed(name);
    }
    let mut s = String::with_capacity(name.len() + 8);
    for b in name.bytes() {
        if plain(b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    Cow::Owned(s)
}

pub(crate) fn decode_name(name: &str) -> Cow<'_, str> {
    if !name.contains('%') {
        return Cow::Borrowed(name);
    }
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// `crawl \0 key`: the map key of a (crawl, politeness key) pair.
pub(crate) fn pair(crawl: &str, key: &str) -> String {
    format!("{crawl}\0{key}")
}

/// Durable record keys (keyspace `c`, see [`keys::crawl`]).
pub(crate) const K_CRAWL_GEN: u8 = b'G';
pub(crate) const K_QUEUE_GEN: u8 = b'Q';
pub(crate) const K_LIMIT: u8 = b'L';
pub(crate) const K_COMPLETED: u8 = b'C';
pub(crate) const K_NAME: u8 = b'N';

/// Crawls, their deletions, limits and completions (loaded at open).
#[derive(Debug, Default)]
pub(crate) struct CrawlBook {
    /// Crawls other than the default that URLs were put in (and not deleted since).
    pub(crate) names: HashSet<Arc<str>>,
    /// Generation of a crawl (set by a deletion of the crawl).
    pub(crate) crawl_gen: HashMap<Arc<str>, u64>,
    /// Generation of a (crawl, key) (set by a deletion of the queue).
    pub(crate) queue_gen: HashMap<String, u64>,
    /// The next generation to hand out (above every one stored).
    pub(crate) next_gen: u64,
    /// Limits per (crawl, key): URLs completed after which the queue is not served.
    pub(crate) limits: HashMap<String, u32>,
    /// Completions per (crawl, key) reported by external fetchers.
    pub(crate) completed: HashMap<String, u64>,
}

impl CrawlBook {
    /// Whether every URL is live, of the default crawl and unlimited (the dispatcher then
    /// skips the crawl checks).
    pub(crate) fn is_plain(&self) -> bool {
        self.crawl_gen.is_empty() && self.queue_gen.is_empty() && self.limits.is_empty()
    }

    /// The generation URLs of `crawl` at `key` are put in now.
    pub(crate) fn generation(&self, crawl: &str, key: &str) -> u64 {
        let c = self.crawl_gen.get(crawl).copied().unwrap_or(0);
        if self.queue_gen.is_empty() {
            return c;
        }
        c.max(self.queue_gen.get(&pair(crawl, key)).copied().unwrap_or(0))
    }

    /// Whether a stored URL queued at `key` belongs to a deleted generation.
    pub(crate) fn is_dead(&self, stored: &StoredUrl<'_>, key: &str) -> bool {
        stored.generation < self.generation(&stored.crawl, key)
    }

    /// Whether the queue of `crawl` at `key` reached its limit.
    pub(crate) fn limit_reached(&self, crawl: &str, key: &str) -> bool {
        if self.limits.is_empty() {
            return false;
        }
        let p = pair(crawl, key);
        match self.limits.get(&p) {
            Some(&limit) => self.completed.get(&p).copied().unwrap_or(0) >= u64::from(limit),
            None => false,
        }
    }

    pub(crate) fn bump(&mut self) -> u64 {
        self.next_gen = self.next_gen.max(1);
        let g = self.next_gen;
        self.next_gen += 1;
        g
    }

    /// Load one `c` record.
    pub(crate) fn load(&mut self, k: &[u8], v: &[u8]) {
        let Some((&kind, rest)) = k.get(1..).and_then(|r| r.split_first()) else {
            return;
        };
        let Ok(rest) = std::str::from_utf8(rest) else {
            return;
        };
        let n = |v: &[u8]| match v.try_into() {
            Ok(b) => u64::from_le_bytes(b),
            Err(_) => 0,
        };
        match kind {
            K_NAME => {
                self.names.insert(Arc::from(rest));
            }
            K_CRAWL_GEN => {
                let g = n(v);
                self.next_gen = self.next_gen.max(g + 1);
                self.crawl_gen.insert(Arc::from(rest), g);
            }
            K_QUEUE_GEN => {
                let g = n(v);
                self.next_gen = self.next_gen.max(g + 1);
                self.queue_gen.insert(rest.to_string(), g);
            }
            K_LIMIT => {
                self.limits.insert(rest.to_string(), n(v) as u32);
            }
            K_COMPLETED => {
                self.completed.insert(rest.to_string(), n(v));
            }
            _ => {}
        }
    }
}

pub(crate) fn key_of(kind: u8, rest: &str) -> Vec<u8> {
    keys::crawl(kind, rest.as_bytes())
}

/// A (crawl, queue) and its live URLs, as [`Frontier::crawl_queues`] counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrawlQueue {
    /// The crawl.
    pub crawl: String,
    /// The politeness key.
    pub key: String,
    /// Live URLs waiting (queued, waiting out a retry, set aside).
    pub queued: u64,
    /// Live URLs leased.
    pub in_flight: u64,
    /// URLs reported completed by external fetchers since the queue was last deleted.
    pub completed: u64,
    /// Its crawl limit (0: none).
    pub limit: u32,
}

/// What the dispatcher does with an entry in view of its crawl.
pub(crate) enum CrawlGate {
    /// Serve it (as far as crawls go).
    Go,
    /// Its generation was deleted: discard it unserved.
    Dead,
    /// Its crawl's limit at this queue is reached: set it aside under this name.
    Limited(String),
}

/// The dispatcher's question for an entry queued at `key`.
pub(crate) fn gate(book: &CrawlBook, stored: &str, key: &str) -> CrawlGate {
    if book.is_plain() {
        return CrawlGate::Go;
    }
    let s = split_stored(stored);
    if book.is_dead(&s, key) {
        return CrawlGate::Dead;
    }
    if book.limit_reached(&s.crawl, key) {
        return CrawlGate::Limited(format!("{LIMIT_PARK}{}", s.crawl));
    }
    CrawlGate::Go
}

/// For a parked name: None if it is not a crawl-limit one; else whether the limit still
/// holds its URLs.
pub(crate) fn limit_park_holds(book: &CrawlBook, name: &str, key: &str) -> Option<bool> {
    let crawl = name.strip_prefix(LIMIT_PARK)?;
    Some(book.limit_reached(crawl, key))
}

/// Whether a parked name is a crawl limit's, not an origin's.
pub(crate) fn is_limit_park(name: &str) -> bool {
    name.starts_with(LIMIT_PARK)
}

/// The robots-relevant path of a stored URL after its origin (without the crawl tag).
pub(crate) fn untagged(stored: &str) -> &str {
    match stored.find(TAG) {
        Some(at) => &stored[..at],
        None => stored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_the_default_first_generation_is_untagged() {
        assert_eq!(tag_url("http://a.test/x", "", 0), "http://a.test/x");
        assert_eq!(tag_url("http://a.test/x", "DEFAULT", 0), "http://a.test/x");
        let t = tag_url("http://a.test/x", "crawl #1~", 3);
        assert_eq!(t, "http://a.test/x#~crawl:crawl%20%231%7E~gen:3");
        let s = split_stored(&t);
        assert_eq!(s.url, "http://a.test/x");
        assert_eq!(s.crawl, "crawl #1~");
        assert_eq!(s.generation, 3);
        let d = split_stored("http://a.test/x");
        assert_eq!((d.crawl.as_ref(), d.generation), ("DEFAULT", 0));
        assert_eq!(untagged(&t), "http://a.test/x");
    }

    #[test]
    fn input_with_a_tag_is_canonicalized_before_it() {
        let (c, s) = canonicalize_stored("HTTP://A.test:80/x#~crawl:b", 8192).unwrap();
        assert_eq!(c.as_str(), "http://a.test/x");
        assert_eq!(s, "http://a.test/x#~crawl:b");
    }
}
