//! The one way into the frontier, whatever the door (`POST /v1/urls`, `--seeds`, the
//! spool, a cluster shard, a page's links, a sitemap): URLs offered with where they came
//! from, enqueued durably, and every rejection, refused as a line or by the frontier,
//! counted and logged once, here, in line order.

use std::sync::Arc;

use anyhow::{Context, Result};
use crawl::Outcome;
use frontier::{EnqueueItem, EnqueueResult};

use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::intake::{UrlRejected, UrlsEnqueued};
use crate::internal_events::InternalEvent;
use crate::url_list::{echo, Rejection};

/// URLs offered through one door.
pub struct Offer {
    /// What goes to the frontier.
    pub items: Vec<EnqueueItem>,
    /// Each item's line (or element) number in its list; empty: item i is line i + 1.
    pub lines: Vec<usize>,
    /// Lines refused before the frontier saw them (not a URL, too long, ...).
    pub refused: Vec<Rejection>,
    /// Whether rejections get crawl-log lines: URLs someone submitted do (their lines say
    /// seed); a page's links and a sitemap's entries are counted only.
    pub log_rejects: bool,
}

impl Offer {
    /// URLs someone submitted (a list, a shard's messages): rejections are logged.
    pub fn submitted(items: Vec<EnqueueItem>) -> Offer {
        Offer {
            items,
            lines: Vec::new(),
            refused: Vec::new(),
            log_rejects: true,
        }
    }

    /// URLs the crawl found (links, redirect targets, sitemap entries): rejections are
    /// counted only.
    pub fn found(items: Vec<EnqueueItem>) -> Offer {
        Offer {
            log_rejects: false,
            ..Offer::submitted(items)
        }
    }
}

/// What became of an offer.
#[derive(Debug, Clone, Default)]
pub struct Offered {
    pub accepted: u64,
    pub duplicate: u64,
    /// Every rejection, refused lines and the frontier's, in line order.
    pub rejected: Vec<Rejection>,
    /// Indices in `items` of the URLs already known.
    pub duplicate_at: Vec<usize>,
}

impl Shared {
    /// Offer URLs to the frontier (durable on return), then count and log every rejection
    /// once.
    pub async fn offer(self: &Arc<Self>, offer: Offer) -> Result<Offered> {
        let Offer {
            mut items,
            lines,
            refused,
            log_rejects,
        } = offer;
        // a sitemap is refetched on its own interval, so its lastmod changes are seen
        let refetch = self.settings.sitemaps.refetch_interval_ms;
        for item in &mut items {
            if matches!(item.kind, frontier::EntryKind::Sitemap(_))
                && item.revisit_interval_ms.is_none()
            {
                item.revisit_interval_ms = refetch;
            }
        }
        let sh = self.clone();
        let (items, results) = tokio::task::spawn_blocking(move || {
            let results = sh.frontier.enqueue_items(&items, now_ms());
            (items, results)
        })
        .await
        .context("enqueue task")?;
        let results = results.context("enqueue")?;
        let mut offered = Offered {
            rejected: refused,
            ..Offered::default()
        };
        for (i, (item, r)) in items.iter().zip(results).enumerate() {
            match r {
                EnqueueResult::Queued => offered.accepted += 1,
                EnqueueResult::Duplicate => {
                    offered.duplicate += 1;
                    offered.duplicate_at.push(i);
                }
                EnqueueResult::Rejected(rej) => offered.rejected.push(Rejection {
                    line: lines.get(i).copied().unwrap_or(i + 1),
                    code: rej.code(),
                    reason: rej.code().to_string(),
                    // the URL may be a 1 MB line: echoed cut, with its length
                    input: echo(&item.url),
                }),
            }
        }
        offered.rejected.sort_by_key(|r| r.line);
        for r in &offered.rejected {
            UrlRejected {
                input: &r.input,
                code: r.code,
            }
            .emit(&self.metrics);
            if log_rejects {
                self.log_outcome(&r.input, Outcome::Rejected, None, 0, 0, &r.reason);
            }
        }
        UrlsEnqueued {
            accepted: offered.accepted,
            duplicate: offered.duplicate,
        }
        .emit(&self.metrics);
        if offered.accepted > 0 {
            self.pipeline.kick();
        }
        Ok(offered)
    }
}
