//! A sitemap's `lastmod` for URLs already known: a URL waiting in the due index whose
//! `lastmod` is later than its last fetch is moved to "due now", in one flush (the reasons
//! are in `docs/sitemaps.md`). A new URL never comes here: it is queued as usual.
//!
//! The URL's place in the due index is found through its locator (`Y` + hash, written
//! with each reschedule when `RecrawlConfig::locate_for_lastmod` is on): the due key is
//! read, the URL's entry taken out of it (the key rewritten or deleted), and the entry
//! written again due now, with a new locator, all in one atomic group.

use std::collections::HashMap;

use crate::api::Frontier;
use crate::canon::canonicalize;
use crate::error::Result;
use crate::recrawl::DueWrite;
use crate::store::codec::QueueEntry;
use crate::store::keys;
use crate::store::revisit;
use crate::store::Batch;
use crate::work::url_hash;

/// What a `lastmod` did to a known URL's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LastmodResult {
    /// Later than the last fetch: the URL is due now (it goes at the next dispatch).
    Due,
    /// Not later than the last fetch: the schedule is left alone.
    NotNewer,
    /// The URL is not waiting in the due index (not fetched yet, queued, in flight, not
    /// scheduled, or locators are off): nothing to move; a queued URL is fetched anyway.
    NotScheduled,
    /// A `lastmod` after `now`: a site's clock or a lie, not a change that happened;
    /// ignored (else every re-read of the sitemap would refetch the URL).
    InFuture,
    /// The URL does not canonicalize.
    Rejected,
}

impl LastmodResult {
    /// Stable name (metrics, logs).
    pub fn as_str(self) -> &'static str {
        match self {
            LastmodResult::Due => "due",
            LastmodResult::NotNewer => "not-newer",
            LastmodResult::NotScheduled => "not-scheduled",
            LastmodResult::InFuture => "in-future",
            LastmodResult::Rejected => "rejected",
        }
    }
}

impl Frontier {
    /// For each (URL, `lastmod` in unix ms) of a sitemap: make the URL due now if it waits
    /// in the due index and `lastmod` is later than its last fetch (and not after
    /// `now_ms`). Results in input order; returns once the moves are durable (one flush).
    pub fn apply_lastmod(
        &self,
        items: &[(String, u64)],
        now_ms: u64,
    ) -> Result<Vec<LastmodResult>> {
        let mut results = Vec::with_capacity(items.len());
        let ticket;
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            // due keys read and edited in this call: (key -> its entries left)
            let mut edited: HashMap<Vec<u8>, Vec<(u64, Vec<u8>)>> = HashMap::new();
            let mut moved = Vec::new();
            for (url, lastmod_ms) in items {
                let Ok(canon) = canonicalize(url, self.cfg.max_url_len) else {
                    results.push(LastmodResult::Rejected);
                    continue;
                };
                if *lastmod_ms > now_ms {
                    results.push(LastmodResult::InFuture);
                    continue;
                }
                let hash = url_hash(canon.as_str());
                let Some(v) = self.store.get(&keys::locator(hash))? else {
                    results.push(LastmodResult::NotScheduled);
                    continue;
                };
                let loc = match revisit::decode_locator(&v) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(url = %canon.as_str(), error = %e, "locator not decodable; ignored");
                        results.push(LastmodResult::NotScheduled);
                        continue;
                    }
                };
                if *lastmod_ms <= loc.fetched_ms {
                    results.push(LastmodResult::NotNewer);
                    continue;
                }
                let due_key = keys::due(loc.slot_ms, loc.id);
                if !edited.contains_key(&due_key) {
                    let Some(v) = self.store.get(&due_key)? else {
                        // moved to its queue since: it goes anyway
                        results.push(LastmodResult::NotScheduled);
                        continue;
                    };
                    let entries = revisit::decode_due(&v)?
                        .into_iter()
                        .map(|(d, e)| (d, e.to_vec()))
                        .collect();
                    edited.insert(due_key.clone(), entries);
                }
                let Some(entries) = edited.get_mut(&due_key) else {
                    results.push(LastmodResult::NotScheduled);
                    continue;
                };
                let found = entries.iter().position(|(_, e)| {
                    QueueEntry::decode(e).is_ok_and(|q| q.url == canon.as_str())
                });
                let Some(i) = found else {
                    results.push(LastmodResult::NotScheduled);
                    continue;
                };
                let (_, bytes) = entries.swap_remove(i);
                let mut entry = QueueEntry::decode(&bytes)?;
                if let Some(rec) = entry.recrawl.as_mut() {
                    rec.due_ms = now_ms;
                }
                tracing::debug!(url = %entry.url, lastmod_ms, fetched_ms = loc.fetched_ms, "sitemap lastmod after the last fetch: due now");
                moved.push(DueWrite {
                    due_ms: now_ms,
                    entry: entry.encode(),
                    locate: Some((hash, loc.fetched_ms)),
                });
                results.push(LastmodResult::Due);
            }
            if moved.is_empty() {
                return Ok(results);
            }
            // one atomic group: the old keys without the moved entries, the new ones
            let mut batch = Batch::new();
            for (k, rest) in edited {
                if rest.is_empty() {
                    batch.del(k);
                } else {
                    batch.put(k, revisit::encode_due(&rest));
                }
            }
            inner.stats.lastmod_moves += moved.len() as u64;
            Self::write_due(inner, &mut batch, moved);
            self.store.apply(batch)?;
            ticket = self.commit.written();
        }
        self.commit.sync(self.store.as_ref(), ticket)?;
        Ok(results)
    }
}
