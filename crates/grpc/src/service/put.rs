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

/// A chunk's items sorted by what is to be done with them (item index first in each).
#[derive(Default)]
struct Sorted<'a> {
    acks: Vec<Option<AckStatus>>,
    /// New URLs, in their stored form.
    discovered: Vec<(usize, String)>,
    /// (stored URL, encoded metadata) to keep.
    metadata: Vec<(String, Vec<u8>)>,
    /// Reported leases.
    done: Vec<Done>,
    /// (item, stored URL, not before unix ms): Known items queued again / anew.
    again: Vec<(usize, String, u64)>,
    fresh: Vec<(usize, String, u64)>,
    /// The crawls the chunk names.
    crawls: Vec<&'a str>,
}

impl UrlFrontierService {
    /// Apply one chunk of PutURLs items (blocking: frontier calls); acks in order.
    pub(super) fn put_chunk(&self, items: Vec<pb::UrlItem>) -> Result<Vec<pb::AckMessage>, Status> {
        let now = now_ms();
        let mut sorted = self.sort_items(&items)?;
        self.apply_sorted(&mut sorted, now)?;
        let acks = std::mem::take(&mut sorted.acks);
        drop(sorted);
        Ok(self.answer(&items, acks))
    }

    /// Sort a chunk's items into what is to be done with them (and the acks already
    /// decided: items without a URL, URLs refused, known URLs with nothing to do).
    fn sort_items<'a>(&self, items: &'a [pb::UrlItem]) -> Result<Sorted<'a>, Status> {
        let mut o = Sorted {
            acks: vec![None; items.len()],
            ..Sorted::default()
        };
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
                o.acks[i] = Some(AckStatus::Skipped);
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
                    if !o.crawls.contains(&crawl) {
                        o.crawls.push(crawl);
                    }
                    o.done.push(Done {
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
                    if !o.crawls.contains(&crawl) {
                        o.crawls.push(crawl);
                    }
                    o.discovered.push((i, stored));
                    continue;
                }
            }
            // the URL as the frontier keeps it in this crawl (see frontier::crawl)
            let (canon, stored) = match self.frontier.url_in_crawl(&info.url, crawl) {
                Ok(c) => c,
                Err(why) => {
                    tracing::info!(url = %info.url, reason = why.code(), "PutURLs URL refused");
                    o.acks[i] = Some(AckStatus::Skipped);
                    continue;
                }
            };
            if !o.crawls.contains(&crawl) {
                o.crawls.push(crawl);
            }
            match known {
                None => {
                    if !info.metadata.is_empty()
                        && !self.frontier.is_seen(&stored).map_err(internal)?
                    {
                        o.metadata
                            .push((stored.clone(), encode_metadata(&info.metadata)));
                    }
                    o.discovered.push((i, stored));
                }
                Some(refetch) => {
                    if !info.metadata.is_empty() {
                        o.metadata
                            .push((stored.clone(), encode_metadata(&info.metadata)));
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
                            o.done.push(Done {
                                item: i,
                                lease,
                                refetch_at_ms: at,
                                crawl: crawl.to_string(),
                                key: self.key_of(&canon),
                            });
                        }
                        None => self.sort_not_out(&mut o, i, stored, refetch, &info.url)?,
                    }
                }
            }
        }
        Ok(o)
    }

    /// A KnownURLItem for a URL not out under a lease: done for good earlier and now given
    /// a date (StormCrawler's recrawl: queued again, due then), known otherwise (nothing to
    /// do but its metadata), new with a date (queued, not served before it), or new with
    /// date 0 (skipped: nothing to remember).
    fn sort_not_out(
        &self,
        o: &mut Sorted<'_>,
        i: usize,
        stored: String,
        refetch: u64,
        url: &str,
    ) -> Result<(), Status> {
        let at = refetch.saturating_mul(1000);
        if refetch > 0 && self.frontier.fetcher_done(&stored).map_err(internal)? {
            o.again.push((i, stored, at));
        } else if self.frontier.is_seen(&stored).map_err(internal)? {
            o.acks[i] = Some(AckStatus::Ok);
        } else if refetch > 0 {
            o.fresh.push((i, stored, at));
        } else {
            tracing::info!(%url, "KnownURLItem with date 0 for a URL frontierd never had: skipped");
            o.acks[i] = Some(AckStatus::Skipped);
        }
        Ok(())
    }

    /// Apply what a chunk's items sorted into: crawl names, metadata, enqueues, completions
    /// (one flush for them all), filling in their acks.
    fn apply_sorted(&self, o: &mut Sorted<'_>, now: u64) -> Result<(), Status> {
        self.frontier.note_crawls(&o.crawls).map_err(internal)?;
        let meta_refs: Vec<(&str, &[u8])> = o
            .metadata
            .iter()
            .map(|(u, m)| (u.as_str(), m.as_slice()))
            .collect();
        // flushed by the enqueue or the completions below when there are any
        let flush_here = o.discovered.is_empty()
            && o.done.is_empty()
            && o.again.is_empty()
            && o.fresh.is_empty();
        self.frontier
            .put_metadata(&meta_refs, flush_here)
            .map_err(internal)?;
        if !o.discovered.is_empty() {
            let enqueue: Vec<EnqueueItem> = o
                .discovered
                .iter()
                .map(|(_, u)| EnqueueItem::seed(u.clone()))
                .collect();
            let results = self
                .frontier
                .enqueue_items(&enqueue, now)
                .map_err(internal)?;
            for ((i, url), r) in o.discovered.iter().zip(results) {
                o.acks[*i] = Some(match r {
                    EnqueueResult::Queued | EnqueueResult::Duplicate => AckStatus::Ok,
                    EnqueueResult::Rejected(why) => {
                        tracing::info!(%url, reason = why.code(), "PutURLs URL refused");
                        AckStatus::Skipped
                    }
                });
            }
        }
        for (known, is_again) in [(&o.again, true), (&o.fresh, false)] {
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
                o.acks[*i] = Some(match r {
                    EnqueueResult::Queued | EnqueueResult::Duplicate => AckStatus::Ok,
                    EnqueueResult::Rejected(_) => AckStatus::Skipped,
                });
            }
        }
        if !o.done.is_empty() {
            self.complete(&o.done, now)?;
            for d in &o.done {
                o.acks[d.item].get_or_insert(AckStatus::Ok);
            }
        }
        Ok(())
    }

    /// The acks in item order (an item with no decision is a failure), counted.
    fn answer(&self, items: &[pb::UrlItem], acks: Vec<Option<AckStatus>>) -> Vec<pb::AckMessage> {
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
        answers
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
