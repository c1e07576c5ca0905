//! PutURLs / PutDiscovered: one chunk of items applied together.

use frontier::crawl::normalise_crawl;
use frontier::{CanonicalUrl, EnqueueItem, EnqueueResult, LeaseId, PageOutcome};
use tonic::Status;

use super::{encode_metadata, external_visit, internal, now_ms, transit_key, UrlFrontierService};
use crate::pb;
use crate::pb::ack_message::Status as AckStatus;
use crate::GrpcEvent;

/// A reported lease: the item, its lease, the client's next-visit time in unix ms if any,
/// and its (crawl, key) for the crawl's completion count.
struct Done {
    item: usize,
    lease: LeaseId,
    refetch_at_ms: Option<u64>,
    crawl: String,
    key: String,
}

impl UrlFrontierService {
    /// Apply one chunk of PutURLs items (blocking: frontier calls); acks in order.
    pub(super) fn put_chunk(&self, items: Vec<pb::UrlItem>) -> Result<Vec<pb::AckMessage>, Status> {
        let now = now_ms();
        let mut acks: Vec<Option<AckStatus>> = vec![None; items.len()];
        let mut discovered: Vec<(usize, String)> = Vec::new();
        let mut metadata: Vec<(String, Vec<u8>)> = Vec::new();
        let mut done: Vec<Done> = Vec::new();
        // (item, stored URL, not before unix ms): Known items queued again / anew
        let mut again: Vec<(usize, String, u64)> = Vec::new();
        let mut fresh: Vec<(usize, String, u64)> = Vec::new();
        let mut crawls: Vec<&str> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let (info, known) = match &item.item {
                Some(pb::url_item::Item::Discovered(d)) => (d.info.as_ref(), None),
                Some(pb::url_item::Item::Known(k)) => {
                    (k.info.as_ref(), Some(k.refetchable_from_date))
                }
                None => (None, None),
            };
            let Some(info) = info else {
                tracing::warn!(id = %item.id, "PutURLs item without a URL skipped");
                acks[i] = Some(AckStatus::Skipped);
                continue;
            };
            let crawl = normalise_crawl(&info.crawl_id);
            // The usual report: a URL handed out, spelled as GetURLs gave it (canonical), no
            // metadata. Found in transit as it is, it needs no canonicalization.
            let handed_out = match known {
                Some(refetch) => self
                    .transit()
                    .take(transit_key(&info.url, crawl))
                    .map(|lease| (lease, refetch)),
                None => None,
            };
            if let Some((lease, refetch)) = handed_out.filter(|_| info.metadata.is_empty()) {
                if let Some(canon) = CanonicalUrl::from_canonical(info.url.clone()) {
                    if !crawls.contains(&crawl) {
                        crawls.push(crawl);
                    }
                    done.push(Done {
                        item: i,
                        lease,
                        refetch_at_ms: (refetch > 0).then(|| refetch.saturating_mul(1000)),
                        crawl: crawl.to_string(),
                        key: self.key_of(&canon),
                    });
                    continue;
                }
            }
            // a discovered URL without metadata: canonicalized once, by the enqueue
            if known.is_none() && info.metadata.is_empty() {
                if let Some(stored) = self.frontier.intake_form_in_crawl(&info.url, crawl) {
                    if !crawls.contains(&crawl) {
                        crawls.push(crawl);
                    }
                    discovered.push((i, stored));
                    continue;
                }
            }
            // the URL as the frontier keeps it in this crawl (see frontier::crawl)
            let (canon, stored) = match self.frontier.url_in_crawl(&info.url, crawl) {
                Ok(c) => c,
                Err(why) => {
                    tracing::info!(url = %info.url, reason = why.code(), "PutURLs URL refused");
                    acks[i] = Some(AckStatus::Skipped);
                    continue;
                }
            };
            if !crawls.contains(&crawl) {
                crawls.push(crawl);
            }
            match known {
                None => {
                    if !info.metadata.is_empty()
                        && !self.frontier.is_seen(&stored).map_err(internal)?
                    {
                        metadata.push((stored.clone(), encode_metadata(&info.metadata)));
                    }
                    discovered.push((i, stored));
                }
                Some(refetch) => {
                    if !info.metadata.is_empty() {
                        metadata.push((stored.clone(), encode_metadata(&info.metadata)));
                    }
                    let lease = match handed_out {
                        Some((lease, _)) => Some(lease),
                        None => self.transit().take(transit_key(canon.as_str(), crawl)),
                    };
                    match lease {
                        Some(lease) => {
                            // refetchable_from_date is in seconds; 0: never again. Later
                            // than 0 the URL goes to the recrawl due index and is served
                            // again from then on (durable with the completion)
                            let at = (refetch > 0).then(|| refetch.saturating_mul(1000));
                            done.push(Done {
                                item: i,
                                lease,
                                refetch_at_ms: at,
                                crawl: crawl.to_string(),
                                key: self.key_of(&canon),
                            });
                        }
                        // done for good earlier, now with a next date (StormCrawler's
                        // recrawl): queued again, due at that date
                        None if refetch > 0
                            && self.frontier.fetcher_done(&stored).map_err(internal)? =>
                        {
                            again.push((i, stored, refetch.saturating_mul(1000)));
                        }
                        None if self.frontier.is_seen(&stored).map_err(internal)? => {
                            // not out and not done for good (queued, scheduled, given up):
                            // known, nothing to update but its metadata
                            acks[i] = Some(AckStatus::Ok);
                        }
                        // new, with a date: queued, not served before it (url-frontier)
                        None if refetch > 0 => {
                            fresh.push((i, stored, refetch.saturating_mul(1000)));
                        }
                        None => {
                            tracing::info!(url = %info.url, crawl, "KnownURLItem with date 0 for a URL frontierd never had: skipped");
                            acks[i] = Some(AckStatus::Skipped);
                        }
                    }
                }
            }
        }
        self.frontier.note_crawls(&crawls).map_err(internal)?;
        let meta_refs: Vec<(&str, &[u8])> = metadata
            .iter()
            .map(|(u, m)| (u.as_str(), m.as_slice()))
            .collect();
        // flushed by the enqueue or the completions below when there are any
        let flush_here =
            discovered.is_empty() && done.is_empty() && again.is_empty() && fresh.is_empty();
        self.frontier
            .put_metadata(&meta_refs, flush_here)
            .map_err(internal)?;
        if !discovered.is_empty() {
            let enqueue: Vec<EnqueueItem> = discovered
                .iter()
                .map(|(_, u)| EnqueueItem::seed(u.clone()))
                .collect();
            let results = self
                .frontier
                .enqueue_items(&enqueue, now)
                .map_err(internal)?;
            for ((i, url), r) in discovered.iter().zip(results) {
                acks[*i] = Some(match r {
                    EnqueueResult::Queued | EnqueueResult::Duplicate => AckStatus::Ok,
                    EnqueueResult::Rejected(why) => {
                        tracing::info!(%url, reason = why.code(), "PutURLs URL refused");
                        AckStatus::Skipped
                    }
                });
            }
        }
        for (known, is_again) in [(&again, true), (&fresh, false)] {
            if known.is_empty() {
                continue;
            }
            let items: Vec<EnqueueItem> = known
                .iter()
                .map(|(_, u, at)| EnqueueItem {
                    refetch_at_ms: Some(*at),
                    ..EnqueueItem::seed(u.clone())
                })
                .collect();
            let results = match is_again {
                true => self.frontier.enqueue_again(&items, now),
                false => self.frontier.enqueue_items(&items, now),
            }
            .map_err(internal)?;
            for ((i, _, _), r) in known.iter().zip(results) {
                acks[*i] = Some(match r {
                    EnqueueResult::Queued | EnqueueResult::Duplicate => AckStatus::Ok,
                    EnqueueResult::Rejected(_) => AckStatus::Skipped,
                });
            }
        }
        if !done.is_empty() {
            self.complete(&done, now)?;
            for d in &done {
                acks[d.item].get_or_insert(AckStatus::Ok);
            }
        }
        let mut counts = [0u64; 3];
        let answers = items
            .iter()
            .zip(acks)
            .map(|(item, status)| {
                let status = status.unwrap_or(AckStatus::Fail);
                counts[match status {
                    AckStatus::Ok => 0,
                    AckStatus::Skipped => 1,
                    AckStatus::Fail => 2,
                }] += 1;
                pb::AckMessage {
                    id: ack_id(item),
                    status: status as i32,
                }
            })
            .collect();
        for (status, count) in [AckStatus::Ok, AckStatus::Skipped, AckStatus::Fail]
            .into_iter()
            .zip(counts)
        {
            if count > 0 {
                self.hooks.event(GrpcEvent::Acked {
                    status: status.as_str_name(),
                    count,
                });
            }
        }
        Ok(answers)
    }

    /// Complete reported leases, counting them for their crawl's limits (written before
    /// the completion's flush, so durable with it).
    fn complete(&self, done: &[Done], now: u64) -> Result<(), Status> {
        let counted: Vec<(&str, &str)> = done
            .iter()
            .map(|d| (d.crawl.as_str(), d.key.as_str()))
            .collect();
        self.frontier
            .note_crawl_completions(&counted)
            .map_err(internal)?;
        let batch: Vec<(LeaseId, PageOutcome)> = done
            .iter()
            .map(|d| (d.lease, PageOutcome::Done { response_ms: 0 }))
            .collect();
        let visits: Vec<_> = done
            .iter()
            .map(|d| d.refetch_at_ms.map(|at| external_visit(at, now)))
            .collect();
        if self.frontier.complete_visits(&batch, &visits, now).is_err() {
            // one lease no longer known (returned meanwhile): apply them one by one
            for (one, visit) in batch.into_iter().zip(visits) {
                if let Err(e) = self.frontier.complete_visits(&[one], &[visit], now) {
                    tracing::info!(error = %e, "completion of a lease no longer out skipped");
                }
            }
        }
        Ok(())
    }
}

/// The id an ack echoes: the client's, else the URL.
fn ack_id(item: &pb::UrlItem) -> String {
    if !item.id.is_empty() {
        return item.id.clone();
    }
    let info = match &item.item {
        Some(pb::url_item::Item::Discovered(d)) => d.info.as_ref(),
        Some(pb::url_item::Item::Known(k)) => k.info.as_ref(),
        None => None,
    };
    info.map(|i| i.url.clone()).unwrap_or_default()
}
