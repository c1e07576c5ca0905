//! The frontier's operations on crawls (url-frontier's crawlID, see `crawl.rs` for what a
//! crawl is): the stored form of a URL in a crawl, crawl names, deletions of a crawl or of
//! one of its queues, limits and the completions they count, and the per-queue listing.
//! Durable records in keyspace `c`; the book they update lives in the scheduler's state.

use std::collections::HashSet;
use std::sync::Arc;

use crate::api::Frontier;
use crate::canon::{canonicalize, politeness_key_of, CanonicalUrl, Rejection};
use crate::crawl::*;
use crate::error::Result;
use crate::store::Batch;

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
        // with no queue deleted, every key of the crawl has the crawl's generation
        if !inner.crawls.queue_gen.is_empty() {
            return None;
        }
        let generation = inner.crawls.generation(crawl, "");
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
            if let Some(id) = inner.sched.id_of(key) {
                Self::wake_limit_parked(inner, id, crawl);
                inner.sched.schedule(id);
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
            let ids: Vec<u64> = inner.sched.host_ids();
            for id in ids {
                Self::wake_limit_parked(inner, id, crawl);
                inner.sched.schedule(id);
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
        if let Some(id) = inner.sched.id_of(key) {
            Self::wake_limit_parked(inner, id, crawl);
            inner.sched.schedule(id);
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
                None => inner
                    .sched
                    .hosts()
                    .map(|(_, h)| h)
                    .map(|h| h.key.clone())
                    .collect(),
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
        let Some(h) = inner.sched.host_of_key(key) else {
            return Ok((queued, Vec::new()));
        };
        let mut leased = Vec::with_capacity(h.leased().len());
        for &seq in h.leased() {
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
        if let Some(h) = inner.sched.host_mut(id) {
            let name = format!("{LIMIT_PARK}{crawl}");
            let parked = h.aside.as_deref_mut().map(|a| &mut a.parked);
            if let Some(p) = parked.and_then(|p| p.get_mut(name.as_str())) {
                p.until_ms = 0;
                h.set_hold_until(0);
            }
        }
    }
}
