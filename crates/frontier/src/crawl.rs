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

use crate::api::Frontier;
use crate::canon::{canonicalize, politeness_key_of, CanonicalUrl, Rejection};
use crate::error::Result;
use crate::store::{keys, Batch};

/// The default crawl (url-frontier's name; an empty crawlID means it too).
pub const DEFAULT_CRAWL: &str = "DEFAULT";

/// Start of a crawl tag; `#` never occurs in a canonical URL (fragments are dropped).
const TAG: &str = "#~crawl:";
/// Separates the generation from the crawl name in a tag.
const GEN: &str = "~gen:";
/// Set-aside name (in a host's parked URLs) of the URLs of a crawl whose limit is reached.
const LIMIT_PARK: &str = "~limit:";

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
fn encode_name(name: &str) -> Cow<'_, str> {
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

fn decode_name(name: &str) -> Cow<'_, str> {
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
fn pair(crawl: &str, key: &str) -> String {
    format!("{crawl}\0{key}")
}

/// Durable record keys (keyspace `c`, see [`keys::crawl`]).
const K_CRAWL_GEN: u8 = b'G';
const K_QUEUE_GEN: u8 = b'Q';
const K_LIMIT: u8 = b'L';
const K_COMPLETED: u8 = b'C';
const K_NAME: u8 = b'N';

/// Crawls, their deletions, limits and completions (loaded at open).
#[derive(Debug, Default)]
pub(crate) struct CrawlBook {
    /// Crawls other than the default that URLs were put in (and not deleted since).
    names: HashSet<Arc<str>>,
    /// Generation of a crawl (set by a deletion of the crawl).
    crawl_gen: HashMap<Arc<str>, u64>,
    /// Generation of a (crawl, key) (set by a deletion of the queue).
    queue_gen: HashMap<String, u64>,
    /// The next generation to hand out (above every one stored).
    next_gen: u64,
    /// Limits per (crawl, key): URLs completed after which the queue is not served.
    limits: HashMap<String, u32>,
    /// Completions per (crawl, key) reported by external fetchers.
    completed: HashMap<String, u64>,
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

    fn bump(&mut self) -> u64 {
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

fn key_of(kind: u8, rest: &str) -> Vec<u8> {
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

impl Frontier {
    /// The stored form of `url` (any spelling) put in `crawl` now ("" = the default):
    /// its canonical form (for its key and origin) and the tagged string the frontier
    /// keeps (the seen-set, queues, metadata and statuses are keyed by it).
    pub fn url_in_crawl(
        &self,
        url: &str,
        crawl: &str,
    ) -> std::result::Result<(CanonicalUrl, String), Rejection> {
        let canon = canonicalize(url, self.cfg.max_url_len)?;
        let key = politeness_key_of(&canon, self.cfg.key_mode);
        let generation = self
            .inner
            .lock()
            .crawls
            .generation(normalise_crawl(crawl), key);
        let stored = tag_url(canon.as_str(), crawl, generation);
        Ok((canon, stored))
    }

    /// The stored form in `crawl` of a URL to be enqueued, without canonicalizing it (the
    /// enqueue does, once): possible while no queue of any crawl was deleted (each queue's
    /// generation is then its crawl's) and the URL carries nothing that reads as a crawl
    /// tag. `None`: use [`Frontier::url_in_crawl`].
    pub fn intake_form_in_crawl(&self, url: &str, crawl: &str) -> Option<String> {
        if url.contains(TAG) {
            return None;
        }
        let crawl = normalise_crawl(crawl);
        let inner = self.inner.lock();
        if !inner.crawls.queue_gen.is_empty() {
            return None;
        }
        let generation = inner.crawls.crawl_gen.get(crawl).copied().unwrap_or(0);
        Some(tag_url(url.trim(), crawl, generation))
    }

    /// Record that URLs were put in these crawls (ListCrawls names them). Durable with
    /// the next flush.
    pub fn note_crawls(&self, crawls: &[&str]) -> Result<()> {
        let mut batch = Batch::new();
        {
            let mut inner = self.inner.lock();
            for c in crawls {
                let c = normalise_crawl(c);
                if c != DEFAULT_CRAWL && !inner.crawls.names.contains(c) {
                    inner.crawls.names.insert(Arc::from(c));
                    batch.put(key_of(K_NAME, c), Vec::new());
                }
            }
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
        }
        Ok(())
    }

    /// Crawls URLs were put in, besides the default (sorted).
    pub fn crawl_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .inner
            .lock()
            .crawls
            .names
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.sort();
        v
    }

    /// Whether every URL is of the default crawl, live and unlimited: the counts of the
    /// host records are then the default crawl's.
    pub fn crawls_are_plain(&self) -> bool {
        let inner = self.inner.lock();
        inner.crawls.names.is_empty() && inner.crawls.is_plain()
    }

    /// Delete the queue `key` of `crawl`: its live URLs (queued and leased) are dead from
    /// now on (durable on return), discarded unserved when the host's queue reaches them
    /// (a lease of one still in flight may be reported, and is then done; if it expires it
    /// is discarded). Its limit and completion count go. Returns how many URLs were
    /// queued in it (leased ones not counted, as url-frontier).
    pub fn delete_crawl_queue(&self, crawl: &str, key: &str) -> Result<u64> {
        let crawl = normalise_crawl(crawl);
        let before = self.crawl_queues(Some(crawl), Some(key))?;
        let removed = before.iter().map(|q| q.queued).sum();
        let mut batch = Batch::new();
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let g = inner.crawls.bump();
            let p = pair(crawl, key);
            inner.crawls.queue_gen.insert(p.clone(), g);
            batch.put(key_of(K_QUEUE_GEN, &p), g.to_le_bytes().to_vec());
            inner.crawls.limits.remove(&p);
            inner.crawls.completed.remove(&p);
            batch.del(key_of(K_LIMIT, &p));
            batch.del(key_of(K_COMPLETED, &p));
            self.store.apply(batch)?;
            self.store.flush()?;
            if let Some(&id) = inner.by_key.get(key) {
                Self::wake_limit_parked(inner, id, crawl);
                self.schedule(inner, id);
            }
        }
        tracing::info!(crawl, key, urls = removed, "crawl queue deleted");
        Ok(removed)
    }

    /// Delete every URL of `crawl` (as [`Frontier::delete_crawl_queue`] for each of its
    /// queues). Returns how many URLs were queued in it.
    pub fn delete_crawl(&self, crawl: &str) -> Result<u64> {
        let crawl = normalise_crawl(crawl);
        let removed = self
            .crawl_queues(Some(crawl), None)?
            .iter()
            .map(|q| q.queued)
            .sum();
        let mut batch = Batch::new();
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let g = inner.crawls.bump();
            inner.crawls.crawl_gen.insert(Arc::from(crawl), g);
            batch.put(key_of(K_CRAWL_GEN, crawl), g.to_le_bytes().to_vec());
            if inner.crawls.names.remove(crawl) {
                batch.del(key_of(K_NAME, crawl));
            }
            let prefix = pair(crawl, "");
            let book = &mut inner.crawls;
            for map in [&mut book.queue_gen, &mut book.completed] {
                map.retain(|p, _| !p.starts_with(&prefix));
            }
            book.limits.retain(|p, _| !p.starts_with(&prefix));
            for kind in [K_QUEUE_GEN, K_LIMIT, K_COMPLETED] {
                for kv in self.store.scan_prefix(&key_of(kind, &prefix)) {
                    batch.del(kv?.0);
                }
            }
            self.store.apply(batch)?;
            self.store.flush()?;
            let ids: Vec<u64> = inner.hosts.keys().copied().collect();
            for id in ids {
                Self::wake_limit_parked(inner, id, crawl);
                self.schedule(inner, id);
            }
        }
        tracing::info!(crawl, urls = removed, "crawl deleted");
        Ok(removed)
    }

    /// url-frontier's SetCrawlLimit: the queue `key` of `crawl` is not served once
    /// `limit` of its URLs were reported completed (0 lifts the limit). Durable on return.
    pub fn set_crawl_limit(&self, crawl: &str, key: &str, limit: u32) -> Result<()> {
        let crawl = normalise_crawl(crawl);
        let p = pair(crawl, key);
        let mut batch = Batch::new();
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if limit == 0 {
            inner.crawls.limits.remove(&p);
            batch.del(key_of(K_LIMIT, &p));
        } else {
            inner.crawls.limits.insert(p.clone(), limit);
            batch.put(key_of(K_LIMIT, &p), u64::from(limit).to_le_bytes().to_vec());
        }
        self.store.apply(batch)?;
        self.store.flush()?;
        if let Some(&id) = inner.by_key.get(key) {
            Self::wake_limit_parked(inner, id, crawl);
            self.schedule(inner, id);
        }
        Ok(())
    }

    /// Count completions reported by external fetchers, one per (crawl, key) given.
    /// Written without a flush: durable with the completion's flush that follows.
    pub fn note_crawl_completions(&self, done: &[(&str, &str)]) -> Result<()> {
        if done.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        {
            let mut inner = self.inner.lock();
            let mut changed = HashSet::new();
            for (crawl, key) in done {
                let p = pair(normalise_crawl(crawl), key);
                *inner.crawls.completed.entry(p.clone()).or_insert(0) += 1;
                changed.insert(p);
            }
            for p in changed {
                let n = inner.crawls.completed.get(&p).copied().unwrap_or(0);
                batch.put(key_of(K_COMPLETED, &p), n.to_le_bytes().to_vec());
            }
        }
        self.store.apply(batch)?;
        Ok(())
    }

    /// The (crawl, queue) pairs with live URLs, or with a limit or completions, filtered
    /// by crawl and key when given, sorted. Reads every queued URL of the hosts looked at
    /// (O(queued URLs)).
    pub fn crawl_queues(&self, crawl: Option<&str>, key: Option<&str>) -> Result<Vec<CrawlQueue>> {
        let crawl = crawl.map(normalise_crawl);
        let keys: Vec<Arc<str>> = {
            let inner = self.inner.lock();
            match key {
                Some(k) => vec![Arc::from(k)],
                None => inner.hosts.values().map(|h| h.key.clone()).collect(),
            }
        };
        let mut out: std::collections::BTreeMap<(String, String), CrawlQueue> = Default::default();
        let wanted = |c: &str| crawl.is_none_or(|w| w == c);
        for key in keys {
            let (queued, leased) = self.host_stored_urls(&key)?;
            let inner = self.inner.lock();
            for (urls, is_leased) in [(queued, false), (leased, true)] {
                for stored in &urls {
                    let s = split_stored(stored);
                    if !wanted(&s.crawl) || inner.crawls.is_dead(&s, &key) {
                        continue;
                    }
                    let q = out
                        .entry((s.crawl.to_string(), key.to_string()))
                        .or_insert_with(|| CrawlQueue {
                            crawl: s.crawl.to_string(),
                            key: key.to_string(),
                            ..Default::default()
                        });
                    match is_leased {
                        true => q.in_flight += 1,
                        false => q.queued += 1,
                    }
                }
            }
        }
        let inner = self.inner.lock();
        let book = &inner.crawls;
        let pairs = book.completed.keys().chain(book.limits.keys());
        for p in pairs {
            let Some((c, k)) = p.split_once('\0') else {
                continue;
            };
            if !wanted(c) || key.is_some_and(|w| w != k) {
                continue;
            }
            out.entry((c.to_string(), k.to_string()))
                .or_insert_with(|| CrawlQueue {
                    crawl: c.to_string(),
                    key: k.to_string(),
                    ..Default::default()
                });
        }
        for q in out.values_mut() {
            let p = pair(&q.crawl, &q.key);
            q.completed = book.completed.get(&p).copied().unwrap_or(0);
            q.limit = book.limits.get(&p).copied().unwrap_or(0);
        }
        Ok(out.into_values().collect())
    }

    /// The stored URLs of host `key` (every crawl's, dead ones too: see
    /// [`Frontier::is_live`]): queued (as [`Frontier::queued_urls`]) and leased.
    pub fn host_stored_urls(&self, key: &str) -> Result<(Vec<String>, Vec<String>)> {
        let queued = self.queued_urls(key)?;
        let inner = self.inner.lock();
        let Some(h) = inner.by_key.get(key).and_then(|id| inner.hosts.get(id)) else {
            return Ok((queued, Vec::new()));
        };
        let mut leased = Vec::with_capacity(h.leased.len());
        for &seq in &h.leased {
            if let Some(b) = self.entry_bytes(h.rec.id, h, seq)? {
                leased.push(crate::store::codec::QueueEntry::decode(&b)?.url);
            }
        }
        Ok((queued, leased))
    }

    /// Whether the queue `key` of `crawl` reached its crawl limit.
    pub fn crawl_limit_reached(&self, crawl: &str, key: &str) -> bool {
        self.inner
            .lock()
            .crawls
            .limit_reached(normalise_crawl(crawl), key)
    }

    /// Whether a stored URL is of a live generation at `key`.
    pub fn is_live(&self, stored: &str, key: &str) -> bool {
        !self.inner.lock().crawls.is_dead(&split_stored(stored), key)
    }

    /// URLs of a crawl set aside at host `id` because its limit was reached get another
    /// look now.
    fn wake_limit_parked(inner: &mut crate::api::Inner, id: u64, crawl: &str) {
        if let Some(h) = inner.hosts.get_mut(&id) {
            let name = format!("{LIMIT_PARK}{crawl}");
            if let Some(p) = h.parked.get_mut(name.as_str()) {
                p.until_ms = 0;
                h.hold_until_ms = 0;
            }
        }
    }
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
