//! Queues and crawls: what is in them (ListQueues, GetStats, CountURLs, ListURLs,
//! GetURLStatus, ListCrawls) and what removes or limits them (DeleteQueue, DeleteCrawl,
//! PurgeURLs, SetCrawlLimit). A queue is a (crawlID, politeness key) pair; every call
//! here is blocking (frontier calls).

use std::collections::{BTreeSet, HashMap};

use frontier::crawl::{normalise_crawl, split_stored};
use frontier::{CrawlQueue, DEFAULT_CRAWL};
use tonic::Status;

use super::{decode_metadata, internal, now_ms, transit_key, UrlFrontierService};
use crate::pb;

/// A case-sensitive or not substring filter on URLs (ListURLs, CountURLs).
struct UrlFilter {
    text: Option<String>,
    ignore_case: bool,
}

impl UrlFilter {
    fn new(filter: Option<&str>, ignore_case: Option<bool>) -> UrlFilter {
        let ignore_case = ignore_case.unwrap_or(false);
        let text = filter.filter(|f| !f.is_empty()).map(|f| {
            if ignore_case {
                f.to_lowercase()
            } else {
                f.to_string()
            }
        });
        UrlFilter { text, ignore_case }
    }

    fn matches(&self, url: &str) -> bool {
        match &self.text {
            None => true,
            Some(f) if self.ignore_case => url.to_lowercase().contains(f.as_str()),
            Some(f) => url.contains(f.as_str()),
        }
    }
}

impl UrlFrontierService {
    /// The queues of `crawl` (one key if `key` is not empty). When the frontier holds only
    /// default-crawl URLs, live and unlimited, the host records' counts are the answer;
    /// otherwise each host's URLs are read.
    pub(super) fn crawl_queues(&self, crawl: &str, key: &str) -> Result<Vec<CrawlQueue>, Status> {
        let crawl = normalise_crawl(crawl);
        let key = (!key.is_empty()).then_some(key);
        if !self.frontier.crawls_are_plain() {
            return self
                .frontier
                .crawl_queues(Some(crawl), key)
                .map_err(internal);
        }
        if crawl != DEFAULT_CRAWL {
            return Ok(Vec::new());
        }
        Ok(self
            .queues()?
            .into_iter()
            .filter(|(k, _)| key.is_none_or(|w| w == k))
            .map(|(k, rec)| CrawlQueue {
                crawl: DEFAULT_CRAWL.to_string(),
                key: k,
                queued: rec.counters.queued,
                in_flight: rec.in_flight.into(),
                completed: rec.counters.completed.into(),
                limit: 0,
            })
            .collect())
    }

    /// Whether a queue would serve: it has URLs, is not blocked, its limit not reached.
    fn is_active(&self, q: &CrawlQueue, now: u64) -> bool {
        let blocked = self.frontier.queue_control(&q.key).blocked_until_ms > now;
        (q.queued > 0 || q.in_flight > 0)
            && !blocked
            && !(q.limit > 0 && self.frontier.crawl_limit_reached(&q.crawl, &q.key))
    }

    pub(super) fn list_queues_now(&self, p: &pb::Pagination) -> Result<pb::QueueList, Status> {
        let now = now_ms();
        let size = if p.size == 0 { 100 } else { p.size as usize };
        let matching: Vec<String> = self
            .crawl_queues(&p.crawl_id, "")?
            .into_iter()
            .filter(|q| p.include_inactive || self.is_active(q, now))
            .map(|q| q.key)
            .collect();
        let total = matching.len() as u64;
        let values: Vec<String> = matching
            .into_iter()
            .skip(p.start as usize)
            .take(size)
            .collect();
        Ok(pb::QueueList {
            size: values.len() as u32,
            values,
            total,
            start: p.start,
            crawl_id: normalise_crawl(&p.crawl_id).to_string(),
        })
    }

    pub(super) fn stats_now(&self, p: &pb::QueueWithinCrawlParams) -> Result<pb::Stats, Status> {
        let now = now_ms();
        let mut stats = pb::Stats {
            crawl_id: normalise_crawl(&p.crawl_id).to_string(),
            ..Default::default()
        };
        let (mut completed, mut active) = (0u64, 0u64);
        for q in self.crawl_queues(&p.crawl_id, &p.key)? {
            stats.number_of_queues += 1;
            stats.size += q.queued;
            stats.in_process += q.in_flight as u32;
            completed += q.completed;
            if self.is_active(&q, now) {
                active += 1;
            }
        }
        stats.counts.insert("completed".into(), completed);
        stats.counts.insert("active_queues".into(), active);
        stats
            .counts
            .insert("in_transit".into(), self.transit().len() as u64);
        Ok(stats)
    }

    /// CountURLs: the URLs queued or in flight of a crawl (one queue if `key` is set),
    /// those containing `filter` only when it is set.
    pub(super) fn count_now(&self, p: &pb::CountUrlParams) -> Result<u64, Status> {
        let queues = self.crawl_queues(&p.crawl_id, &p.key)?;
        let filter = UrlFilter::new(p.filter.as_deref(), p.ignore_case);
        if filter.text.is_none() {
            return Ok(queues.iter().map(|q| q.queued + q.in_flight).sum());
        }
        let crawl = normalise_crawl(&p.crawl_id);
        let mut n = 0;
        for key in queues
            .iter()
            .map(|q| q.key.as_str())
            .collect::<BTreeSet<_>>()
        {
            let (queued, leased) = self.frontier.host_stored_urls(key).map_err(internal)?;
            n += queued
                .iter()
                .chain(&leased)
                .filter(|s| {
                    self.in_crawl(s, crawl, key)
                        .is_some_and(|u| filter.matches(u))
                })
                .count() as u64;
        }
        Ok(n)
    }

    /// The URL of a stored URL if it is a live URL of `crawl` at `key`.
    fn in_crawl<'a>(&self, stored: &'a str, crawl: &str, key: &str) -> Option<&'a str> {
        let s = split_stored(stored);
        (s.crawl == crawl && self.frontier.is_live(stored, key)).then_some(s.url)
    }

    pub(super) fn list_urls_now(&self, p: &pb::ListUrlParams) -> Result<Vec<pb::UrlItem>, Status> {
        let crawl = normalise_crawl(&p.crawl_id);
        let keys: BTreeSet<String> = self
            .crawl_queues(crawl, &p.key)?
            .into_iter()
            .map(|q| q.key)
            .collect();
        let size = if p.size == 0 { 100 } else { p.size as usize };
        let filter = UrlFilter::new(p.filter.as_deref(), p.ignore_case);
        let mut out = Vec::new();
        let mut skipped = 0usize;
        'keys: for key in keys {
            for stored in self.frontier.queued_urls(&key).map_err(internal)? {
                let Some(url) = self.in_crawl(&stored, crawl, &key) else {
                    continue;
                };
                if !filter.matches(url) {
                    continue;
                }
                if skipped < p.start as usize {
                    skipped += 1;
                    continue;
                }
                out.push(pb::UrlItem {
                    id: url.to_string(),
                    item: Some(pb::url_item::Item::Discovered(pb::DiscoveredUrlItem {
                        info: Some(pb::UrlInfo {
                            url: url.to_string(),
                            key: key.clone(),
                            metadata: HashMap::new(),
                            crawl_id: crawl.to_string(),
                        }),
                    })),
                    creation_date: 0,
                });
                if out.len() >= size {
                    break 'keys;
                }
            }
        }
        Ok(out)
    }

    pub(super) fn url_status_now(&self, p: &pb::UrlStatusRequest) -> Result<pb::UrlItem, Status> {
        let crawl = normalise_crawl(&p.crawl_id);
        let (canon, stored) = self
            .frontier
            .url_in_crawl(&p.url, crawl)
            .map_err(|why| Status::invalid_argument(format!("url {:?}: {}", p.url, why.code())))?;
        let key = self.key_of(&canon);
        let url = canon.into_string();
        if !self.frontier.is_seen(&stored).map_err(internal)? {
            return Err(Status::not_found(format!(
                "url {url:?} is not in crawl {crawl:?}"
            )));
        }
        let metadata = self
            .frontier
            .metadata(&stored)
            .map_err(internal)?
            .map(|b| decode_metadata(&b))
            .unwrap_or_default();
        let info = Some(pb::UrlInfo {
            url: url.clone(),
            key: key.clone(),
            metadata,
            crawl_id: crawl.to_string(),
        });
        let lease = self.transit().lease_of(transit_key(&url, crawl));
        let item = if let Some(lease) = lease {
            // out: refetchable when its lease ends
            let at = self.frontier.lease_deadline(lease).unwrap_or(0) / 1000;
            pb::url_item::Item::Known(pb::KnownUrlItem {
                info,
                refetchable_from_date: at,
            })
        } else if self
            .frontier
            .queued_urls(&key)
            .map_err(internal)?
            .contains(&stored)
        {
            pb::url_item::Item::Discovered(pb::DiscoveredUrlItem { info })
        } else {
            // fetched (or dropped): done, never again
            pb::url_item::Item::Known(pb::KnownUrlItem {
                info,
                refetchable_from_date: 0,
            })
        };
        Ok(pb::UrlItem {
            item: Some(item),
            id: url,
            creation_date: 0,
        })
    }

    /// ListCrawls: the default crawl (always there in frontierd) and every crawl URLs
    /// were put in and that was not deleted since.
    pub(super) fn crawls_now(&self) -> Vec<String> {
        let mut crawls: BTreeSet<String> = self.frontier.crawl_names().into_iter().collect();
        crawls.insert(DEFAULT_CRAWL.to_string());
        crawls.into_iter().collect()
    }

    /// SetCrawlLimit: as url-frontier, the queue must exist.
    pub(super) fn set_limit_now(&self, p: &pb::CrawlLimitParams) -> Result<(), Status> {
        let crawl = normalise_crawl(&p.crawl_id);
        if p.key.is_empty() {
            return Err(Status::invalid_argument(
                "SetCrawlLimit: key is empty (name a queue)",
            ));
        }
        if self.crawl_queues(crawl, &p.key)?.is_empty() {
            return Err(Status::not_found(format!(
                "SetCrawlLimit: no queue {:?} in crawl {crawl:?}",
                p.key
            )));
        }
        self.frontier
            .set_crawl_limit(crawl, &p.key, p.limit)
            .map_err(internal)?;
        tracing::info!(crawl, key = %p.key, limit = p.limit, "crawl limit set by a client");
        Ok(())
    }

    /// PurgeURLs: url-frontier removes the URLs of a crawl (one queue if `key` is set)
    /// stored more than `days` days ago. frontierd keeps no creation date per URL, so it
    /// can honour only days = 0 (every URL stored before now: the whole queue or crawl).
    pub(super) fn purge_now(&self, p: &pb::PurgeUrlParams) -> Result<u64, Status> {
        if p.days > 0 {
            return Err(Status::unimplemented(format!(
                "PurgeURLs: days = {} needs each URL's creation date, which frontierd does not keep; days = 0 (all of the queue or crawl) and DeleteQueue / DeleteCrawl work",
                p.days
            )));
        }
        let crawl = normalise_crawl(&p.crawl_id);
        let n = if p.key.is_empty() {
            self.frontier.delete_crawl(crawl)
        } else {
            self.frontier.delete_crawl_queue(crawl, &p.key)
        };
        n.map_err(internal)
    }
}
