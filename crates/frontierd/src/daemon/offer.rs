//! The one way into the frontier, whatever the door (`POST /v1/urls`, `--seeds`, the
//! spool, a cluster shard, a page's links, a sitemap): URLs offered with where they came
//! from, enqueued durably, and every rejection, refused as a line or by the frontier,
//! counted and logged once, here, in line order.

use std::sync::Arc;

use anyhow::{Context, Result};
use crawl::Outcome;
use frontier::EnqueueItem;
pub use frontierd_admin::url_list::Offered;

use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::intake::{UrlRejected, UrlsEnqueued};
use crate::internal_events::InternalEvent;
use crate::url_list::{tally_offer, Rejection};

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
    /// Queued even if seen: URLs another node handed off with their shard (this node may
    /// have held the shard before; they were not fetched since).
    pub again: bool,
}

impl Offer {
    /// URLs someone submitted (a list, a shard's messages): rejections are logged.
    pub fn submitted(items: Vec<EnqueueItem>) -> Offer {
        Offer {
            items,
            lines: Vec::new(),
            refused: Vec::new(),
            log_rejects: true,
            again: false,
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

impl Shared {
    /// Offer URLs to the frontier (durable on return), then count and log every rejection
    /// once.
    pub async fn offer(self: &Arc<Self>, offer: Offer) -> Result<Offered> {
        let Offer {
            mut items,
            lines,
            refused,
            log_rejects,
            again,
        } = offer;
        // a sitemap is refetched on its own interval, so its lastmod changes are seen
        crawl::sitemap::apply_refetch_interval(
            &mut items,
            self.settings.sitemaps.refetch_interval_ms,
        );
        let sh = self.clone();
        let (items, results) = tokio::task::spawn_blocking(move || {
            let results = match again {
                true => sh.frontier.enqueue_again(&items, now_ms()),
                false => sh.frontier.enqueue_items(&items, now_ms()),
            };
            (items, results)
        })
        .await
        .context("enqueue task")?;
        let results = results.context("enqueue")?;
        // every rejection, refused lines and the frontier's, in line order
        let offered = tally_offer(&items, &lines, results, refused);
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
        if let Some(journal) = self.cluster.as_ref().and_then(|n| n.journal.as_ref()) {
            // what was queued goes to its shard's log too (shard_log.rs), so the shard's
            // next holder has it whatever becomes of this node
            let mut items = items;
            let queued = offered
                .queued_at
                .iter()
                .filter_map(|&i| items.get_mut(i).map(std::mem::take))
                .map(cluster::UrlRecord::from);
            journal.queued(queued);
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
