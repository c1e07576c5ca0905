//! GetURLs: leases with a deadline, within the caller's limits and crawl.

use std::collections::HashMap;

use frontier::crawl::{normalise_crawl, split_stored};
use frontier::{CanonicalUrl, FrontierError, WorkItem};

use super::{decode_metadata, now_ms, transit_key, UrlFrontierService, LEASE_BATCH};
use crate::{pb, DEFAULT_LEASE_SECS};

/// The crawl a GetURLs asks for: None for any crawl (url-frontier's `anyCrawlID`, or
/// neither set); a crawlID, the empty one being the default crawl.
pub(super) fn wanted_crawl(p: &pb::GetParams) -> Option<&str> {
    match &p.item {
        Some(pb::get_params::Item::CrawlId(c)) => Some(normalise_crawl(c)),
        Some(pb::get_params::Item::AnyCrawlId(_)) | None => None,
    }
}

impl UrlFrontierService {
    /// Lease what GetURLs asks for (blocking: frontier calls).
    pub(super) fn lease_urls(&self, p: &pb::GetParams) -> Result<Vec<pb::UrlInfo>, FrontierError> {
        let now = now_ms();
        self.expire(now)?;
        let secs = match p.delay_requestable {
            0 => DEFAULT_LEASE_SECS,
            s => s,
        };
        let lease_ms = u64::from(secs) * 1000;
        let crawl = wanted_crawl(p);
        let per_queue = p.max_urls_per_queue;
        let max_queues = p.max_queues as usize;
        let mut served: HashMap<String, u32> = HashMap::new();
        let mut out = Vec::new();
        let cap = self.settings.max_urls_per_call;
        loop {
            let mut accept = |k: &str| {
                if !p.key.is_empty() && k != p.key {
                    return false;
                }
                match served.get_mut(k) {
                    Some(n) => {
                        if per_queue > 0 && *n >= per_queue {
                            return false;
                        }
                        *n += 1;
                        true
                    }
                    None => {
                        if max_queues > 0 && served.len() >= max_queues {
                            return false;
                        }
                        served.insert(k.to_string(), 1);
                        true
                    }
                }
            };
            let want = LEASE_BATCH.min(cap.saturating_sub(out.len()));
            if want == 0 {
                break;
            }
            let items = self
                .frontier
                .lease_in_crawl(now, want, lease_ms, crawl, &mut accept)?;
            if items.is_empty() {
                break;
            }
            for item in items {
                match item {
                    WorkItem::Robots(r) => self.hooks.fetch_robots(r),
                    WorkItem::Page(page) => {
                        let stored = split_stored(&page.url);
                        let Some(canon) = CanonicalUrl::from_canonical(stored.url.to_string())
                        else {
                            continue;
                        };
                        let metadata = match self.frontier.metadata(&page.url)? {
                            Some(b) => decode_metadata(&b),
                            None => HashMap::new(),
                        };
                        let crawl_id = stored.crawl.to_string();
                        self.transit()
                            .insert(transit_key(canon.as_str(), &crawl_id), page.id);
                        out.push(pb::UrlInfo {
                            key: self.key_of(&canon),
                            url: canon.into_string(),
                            metadata,
                            crawl_id,
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}
