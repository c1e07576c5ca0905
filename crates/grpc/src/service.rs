//! The `urlfrontier.URLFrontier` service on a [`Frontier`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use frontier::canon::politeness_key_of;
use frontier::{
    canonicalize, CanonicalUrl, EnqueueItem, EnqueueResult, Frontier, FrontierError, LeaseId,
    PageOutcome, Validators, Visit, VisitOutcome, WorkItem,
};
use prost::Message;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::pb;
use crate::pb::ack_message::Status as AckStatus;
use crate::pb::url_frontier_server::UrlFrontier;
use crate::transit::Transit;
use crate::{GrpcEvent, GrpcSettings, Hooks, DEFAULT_CRAWL, DEFAULT_LEASE_SECS};

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// PutURLs items applied together (one flush), at most.
const PUT_CHUNK: usize = 512;
/// PutURLs items read ahead of the acks, at most (then the client is slowed by flow
/// control).
const PUT_BUFFER: usize = 65_536;
/// Page and robots leases asked of the frontier per dispatch while serving GetURLs.
const LEASE_BATCH: usize = 256;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The service; cheap to clone (shared state).
#[derive(Clone)]
pub struct UrlFrontierService {
    frontier: Arc<Frontier>,
    hooks: Arc<dyn Hooks>,
    settings: Arc<GrpcSettings>,
    active: Arc<AtomicBool>,
    transit: Arc<Mutex<Transit>>,
}

impl UrlFrontierService {
    /// A service on `frontier`, active.
    pub fn new(frontier: Arc<Frontier>, hooks: Arc<dyn Hooks>, settings: GrpcSettings) -> Self {
        UrlFrontierService {
            frontier,
            hooks,
            settings: Arc::new(settings),
            active: Arc::new(AtomicBool::new(true)),
            transit: Arc::new(Mutex::new(Transit::default())),
        }
    }

    fn transit(&self) -> MutexGuard<'_, Transit> {
        self.transit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Return expired leases to their queues every `tick`, forever.
    pub async fn expiry_loop(self, tick: Duration) {
        let mut interval = tokio::time::interval(tick);
        loop {
            interval.tick().await;
            let svc = self.clone();
            let r = tokio::task::spawn_blocking(move || svc.expire(now_ms())).await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "returning expired leases failed"),
                Err(e) => tracing::error!(error = %e, "lease expiry task failed"),
            }
        }
    }

    /// Return the leases expired at `now`: their URLs are no longer in transit.
    fn expire(&self, now: u64) -> Result<(), FrontierError> {
        let expired = self.frontier.expire_leases(now)?;
        if expired.is_empty() {
            return Ok(());
        }
        {
            let mut t = self.transit();
            for lease in &expired {
                t.forget_lease(*lease);
            }
        }
        tracing::info!(
            count = expired.len(),
            "leases not reported within delay_requestable returned to their queues"
        );
        self.hooks.event(GrpcEvent::LeasesExpired {
            count: expired.len() as u64,
        });
        Ok(())
    }

    fn fail(&self, rpc: &str, status: Status) -> Status {
        let code = format!("{:?}", status.code());
        tracing::warn!(rpc, code = %code, message = status.message(), "gRPC call refused");
        self.hooks.event(GrpcEvent::RpcFailed { rpc, code: &code });
        status
    }

    fn key_of(&self, url: &CanonicalUrl) -> String {
        politeness_key_of(url, self.frontier.config().key_mode).to_string()
    }

    /// Lease what GetURLs asks for (blocking: frontier calls).
    fn lease_urls(&self, p: &pb::GetParams) -> Result<Vec<pb::UrlInfo>, FrontierError> {
        let now = now_ms();
        self.expire(now)?;
        let secs = match p.delay_requestable {
            0 => DEFAULT_LEASE_SECS,
            s => s,
        };
        let lease_ms = u64::from(secs) * 1000;
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
            let items = self.frontier.lease_for(now, want, lease_ms, &mut accept)?;
            if items.is_empty() {
                break;
            }
            for item in items {
                match item {
                    WorkItem::Robots(r) => self.hooks.fetch_robots(r),
                    WorkItem::Page(page) => {
                        let Some(canon) = CanonicalUrl::from_canonical(page.url.clone()) else {
                            continue;
                        };
                        let metadata = match self.frontier.metadata(&page.url)? {
                            Some(b) => decode_metadata(&b),
                            None => HashMap::new(),
                        };
                        out.push(pb::UrlInfo {
                            key: self.key_of(&canon),
                            url: page.url.clone(),
                            metadata,
                            crawl_id: DEFAULT_CRAWL.to_string(),
                        });
                        self.transit().insert(page.url, page.id);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Apply one chunk of PutURLs items (blocking: frontier calls); acks in order.
    fn put_chunk(&self, items: Vec<pb::UrlItem>) -> Result<Vec<pb::AckMessage>, Status> {
        let now = now_ms();
        let mut acks: Vec<Option<AckStatus>> = vec![None; items.len()];
        let mut discovered: Vec<(usize, String)> = Vec::new();
        let mut metadata: Vec<(String, Vec<u8>)> = Vec::new();
        // (item, lease, the client's next-visit time in unix ms if any)
        let mut done: Vec<(usize, LeaseId, Option<u64>)> = Vec::new();
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
            check_crawl(&info.crawl_id)?;
            let canon = match canonicalize(&info.url, self.frontier.config().max_url_len) {
                Ok(c) => c,
                Err(why) => {
                    tracing::info!(url = %info.url, reason = why.code(), "PutURLs URL refused");
                    acks[i] = Some(AckStatus::Skipped);
                    continue;
                }
            };
            let url = canon.into_string();
            match known {
                None => {
                    if !info.metadata.is_empty()
                        && !self.frontier.is_seen(&url).map_err(internal)?
                    {
                        metadata.push((url.clone(), encode_metadata(&info.metadata)));
                    }
                    discovered.push((i, url));
                }
                Some(refetch) => {
                    if !info.metadata.is_empty() {
                        metadata.push((url.clone(), encode_metadata(&info.metadata)));
                    }
                    let lease = self.transit().take(&url);
                    match lease {
                        Some(lease) => {
                            // refetchable_from_date is in seconds; 0: never again. Later
                            // than 0 the URL goes to the recrawl due index and is served
                            // again from then on (durable with the completion)
                            let at = (refetch > 0).then(|| refetch.saturating_mul(1000));
                            done.push((i, lease, at));
                        }
                        None if self.frontier.is_seen(&url).map_err(internal)? => {
                            // not out (its lease expired, or it was reported already):
                            // known, nothing to update but its metadata
                            acks[i] = Some(AckStatus::Ok);
                        }
                        None => {
                            tracing::info!(%url, "KnownURLItem for a URL frontierd never had: skipped");
                            acks[i] = Some(AckStatus::Skipped);
                        }
                    }
                }
            }
        }
        let meta_refs: Vec<(&str, &[u8])> = metadata
            .iter()
            .map(|(u, m)| (u.as_str(), m.as_slice()))
            .collect();
        // flushed by the enqueue or the completions below when there are any
        let flush_here = discovered.is_empty() && done.is_empty();
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
        if !done.is_empty() {
            let batch: Vec<(LeaseId, PageOutcome)> = done
                .iter()
                .map(|(_, l, _)| (*l, PageOutcome::Done { response_ms: 0 }))
                .collect();
            let visits: Vec<Option<Visit>> = done
                .iter()
                .map(|(_, _, at)| at.map(|at| external_visit(at, now)))
                .collect();
            if self.frontier.complete_visits(&batch, &visits, now).is_err() {
                // one lease no longer known (returned meanwhile): apply them one by one
                for (one, visit) in batch.into_iter().zip(visits) {
                    if let Err(e) = self.frontier.complete_visits(&[one], &[visit], now) {
                        tracing::info!(error = %e, "completion of a lease no longer out skipped");
                    }
                }
            }
            for (i, _, _) in &done {
                acks[*i].get_or_insert(AckStatus::Ok);
            }
        }
        Ok(items
            .iter()
            .zip(acks)
            .map(|(item, status)| {
                let status = status.unwrap_or(AckStatus::Fail);
                self.hooks.event(GrpcEvent::Acked {
                    status: status.as_str_name(),
                });
                pb::AckMessage {
                    id: ack_id(item),
                    status: status as i32,
                }
            })
            .collect())
    }

    /// Queues (politeness keys) with their records, in key order.
    fn queues(&self) -> Result<Vec<(String, frontier::HostRecord)>, Status> {
        self.frontier.hosts(None, usize::MAX).map_err(internal)
    }

    fn is_active_queue(&self, rec: &frontier::HostRecord, key: &str, now: u64) -> bool {
        let blocked = self.frontier.queue_control(key).blocked_until_ms > now;
        (rec.counters.queued > 0 || rec.in_flight > 0) && !blocked
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

/// frontierd serves one crawl: the default ("" or DEFAULT).
fn check_crawl(crawl: &str) -> Result<(), Status> {
    if crawl.is_empty() || crawl == DEFAULT_CRAWL {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "crawlID {crawl:?}: frontierd serves one crawl, {DEFAULT_CRAWL} (empty crawlID); run one frontierd per crawl"
        )))
    }
}

fn internal(e: FrontierError) -> Status {
    Status::internal(format!("frontier: {e}"))
}

/// Metadata is kept as an encoded URLInfo holding only the map.
fn encode_metadata(m: &HashMap<String, pb::StringList>) -> Vec<u8> {
    pb::UrlInfo {
        metadata: m.clone(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn decode_metadata(b: &[u8]) -> HashMap<String, pb::StringList> {
    match pb::UrlInfo::decode(b) {
        Ok(i) => i.metadata,
        Err(e) => {
            tracing::warn!(error = %e, "stored metadata not decodable; served without");
            HashMap::new()
        }
    }
}

fn unimplemented(rpc: &str, why: &str) -> Status {
    Status::unimplemented(format!("{rpc}: {why}"))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("task failed: {e}")))?
}

#[tonic::async_trait]
impl UrlFrontier for UrlFrontierService {
    async fn list_nodes(&self, _: Request<pb::Empty>) -> Result<Response<pb::StringList>, Status> {
        Ok(Response::new(pb::StringList {
            values: vec![self.settings.node_address.clone()],
        }))
    }

    async fn list_crawls(&self, _: Request<pb::Local>) -> Result<Response<pb::StringList>, Status> {
        Ok(Response::new(pb::StringList {
            values: vec![DEFAULT_CRAWL.to_string()],
        }))
    }

    async fn delete_crawl(
        &self,
        _: Request<pb::DeleteCrawlMessage>,
    ) -> Result<Response<pb::Long>, Status> {
        Err(self.fail(
            "DeleteCrawl",
            unimplemented(
                "DeleteCrawl",
                "frontierd keeps one crawl and its seen-set forever (the 30-day rule needs it); remove the data directory to start over",
            ),
        ))
    }

    async fn list_queues(
        &self,
        request: Request<pb::Pagination>,
    ) -> Result<Response<pb::QueueList>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("ListQueues", s))?;
        let svc = self.clone();
        blocking(move || {
            let now = now_ms();
            let size = if p.size == 0 { 100 } else { p.size as usize };
            let matching: Vec<String> = svc
                .queues()?
                .into_iter()
                .filter(|(k, rec)| p.include_inactive || svc.is_active_queue(rec, k, now))
                .map(|(k, _)| k)
                .collect();
            let total = matching.len() as u64;
            let values: Vec<String> = matching
                .into_iter()
                .skip(p.start as usize)
                .take(size)
                .collect();
            Ok(Response::new(pb::QueueList {
                size: values.len() as u32,
                values,
                total,
                start: p.start,
                crawl_id: DEFAULT_CRAWL.to_string(),
            }))
        })
        .await
    }

    type GetURLsStream = BoxStream<pb::UrlInfo>;

    async fn get_ur_ls(
        &self,
        request: Request<pb::GetParams>,
    ) -> Result<Response<Self::GetURLsStream>, Status> {
        let p = request.into_inner();
        if let Some(pb::get_params::Item::CrawlId(c)) = &p.item {
            check_crawl(c).map_err(|s| self.fail("GetURLs", s))?;
        }
        if !self.active.load(Ordering::Relaxed) {
            return Ok(Response::new(Box::pin(tokio_stream::empty())));
        }
        let svc = self.clone();
        let urls = blocking(move || svc.lease_urls(&p).map_err(internal)).await?;
        self.hooks.frontier_changed();
        let queues = urls
            .iter()
            .map(|u| u.key.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len() as u64;
        self.hooks.event(GrpcEvent::Served {
            urls: urls.len() as u64,
            queues,
        });
        Ok(Response::new(Box::pin(tokio_stream::iter(
            urls.into_iter().map(Ok),
        ))))
    }

    type PutURLsStream = BoxStream<pb::AckMessage>;

    async fn put_ur_ls(
        &self,
        request: Request<Streaming<pb::UrlItem>>,
    ) -> Result<Response<Self::PutURLsStream>, Status> {
        let mut input = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::AckMessage, Status>>(PUT_CHUNK * 2);
        // The reader drains the request stream while chunks are applied: h2 allows only so
        // many small DATA frames to sit unread (ENHANCE_YOUR_CALM, "too_many_data_frames"),
        // and a client may send thousands before its first ack.
        let (items_tx, mut items_rx) = tokio::sync::mpsc::channel::<pb::UrlItem>(PUT_BUFFER);
        let reader = tokio::spawn(async move {
            loop {
                match input.message().await {
                    Ok(Some(item)) => {
                        if items_tx.send(item).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(s) => {
                        tracing::info!(error = %s, "PutURLs stream broken by the client");
                        return;
                    }
                }
            }
        });
        let svc = self.clone();
        tokio::spawn(async move {
            let mut items = Vec::with_capacity(PUT_CHUNK);
            while items_rx.recv_many(&mut items, PUT_CHUNK).await > 0 {
                let chunk = std::mem::take(&mut items);
                let s2 = svc.clone();
                let acks = blocking(move || s2.put_chunk(chunk)).await;
                svc.hooks.frontier_changed();
                match acks {
                    Ok(acks) => {
                        for a in acks {
                            if tx.send(Ok(a)).await.is_err() {
                                reader.abort();
                                return;
                            }
                        }
                    }
                    Err(status) => {
                        let _ = tx.send(Err(svc.fail("PutURLs", status))).await;
                        reader.abort();
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    type PutDiscoveredStream = BoxStream<pb::BatchAck>;

    async fn put_discovered(
        &self,
        request: Request<Streaming<pb::DiscoveredBatch>>,
    ) -> Result<Response<Self::PutDiscoveredStream>, Status> {
        let mut input = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::BatchAck, Status>>(64);
        let svc = self.clone();
        tokio::spawn(async move {
            while let Some(Ok(batch)) = input.next().await {
                let items: Vec<pb::UrlItem> = batch
                    .items
                    .into_iter()
                    .map(|info| pb::UrlItem {
                        item: Some(pb::url_item::Item::Discovered(pb::DiscoveredUrlItem {
                            info: Some(info),
                        })),
                        id: String::new(),
                        creation_date: 0,
                    })
                    .collect();
                let s2 = svc.clone();
                match blocking(move || s2.put_chunk(items)).await {
                    Ok(acks) => {
                        let ack = pb::BatchAck {
                            id: batch.id,
                            statuses: acks.into_iter().map(|a| a.status).collect(),
                        };
                        if tx.send(Ok(ack)).await.is_err() {
                            return;
                        }
                    }
                    Err(status) => {
                        let _ = tx.send(Err(svc.fail("PutDiscovered", status))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_stats(
        &self,
        request: Request<pb::QueueWithinCrawlParams>,
    ) -> Result<Response<pb::Stats>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("GetStats", s))?;
        let svc = self.clone();
        blocking(move || {
            let now = now_ms();
            let queues = svc.queues()?;
            let mut stats = pb::Stats {
                crawl_id: DEFAULT_CRAWL.to_string(),
                ..Default::default()
            };
            let (mut completed, mut active) = (0u64, 0u64);
            for (k, rec) in &queues {
                if !p.key.is_empty() && *k != p.key {
                    continue;
                }
                stats.number_of_queues += 1;
                stats.size += rec.counters.queued;
                stats.in_process += rec.in_flight as u32;
                completed += rec.counters.completed;
                if svc.is_active_queue(rec, k, now) {
                    active += 1;
                }
            }
            stats.counts.insert("completed".into(), completed);
            stats.counts.insert("active_queues".into(), active);
            stats
                .counts
                .insert("in_transit".into(), svc.transit().len() as u64);
            Ok(Response::new(stats))
        })
        .await
    }

    async fn delete_queue(
        &self,
        _: Request<pb::QueueWithinCrawlParams>,
    ) -> Result<Response<pb::Long>, Status> {
        Err(self.fail(
            "DeleteQueue",
            unimplemented(
                "DeleteQueue",
                "frontierd does not remove queued URLs; BlockQueueUntil a far time stops a queue durably",
            ),
        ))
    }

    async fn block_queue_until(
        &self,
        request: Request<pb::BlockQueueParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("BlockQueueUntil", s))?;
        if p.key.is_empty() {
            return Err(self.fail(
                "BlockQueueUntil",
                Status::invalid_argument("BlockQueueUntil: key is empty (name a queue)"),
            ));
        }
        let svc = self.clone();
        blocking(move || {
            let until_ms = p.time.saturating_mul(1000);
            svc.frontier
                .block_queue_until(&p.key, until_ms)
                .map_err(internal)?;
            tracing::info!(key = %p.key, until_ms, "queue blocked by a client");
            Ok(Response::new(pb::Empty {}))
        })
        .await
    }

    async fn set_active(
        &self,
        request: Request<pb::Active>,
    ) -> Result<Response<pb::Empty>, Status> {
        let state = request.into_inner().state;
        self.active.store(state, Ordering::Relaxed);
        tracing::info!(active = state, "GetURLs serving turned by a client");
        Ok(Response::new(pb::Empty {}))
    }

    async fn get_active(&self, _: Request<pb::Local>) -> Result<Response<pb::Boolean>, Status> {
        Ok(Response::new(pb::Boolean {
            state: self.active.load(Ordering::Relaxed),
        }))
    }

    async fn set_delay(
        &self,
        request: Request<pb::QueueDelayParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("SetDelay", s))?;
        let svc = self.clone();
        blocking(move || {
            let delay_ms = u64::from(p.delay_requestable) * 1000;
            svc.frontier
                .set_queue_delay(&p.key, delay_ms)
                .map_err(internal)?;
            tracing::info!(key = %p.key, delay_ms, "queue delay set by a client");
            Ok(Response::new(pb::Empty {}))
        })
        .await
    }

    async fn set_log_level(
        &self,
        _: Request<pb::LogLevelParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        Err(self.fail(
            "SetLogLevel",
            unimplemented(
                "SetLogLevel",
                "frontierd's log filter is set at start (RUST_LOG / [log]); Java package names do not apply",
            ),
        ))
    }

    async fn set_crawl_limit(
        &self,
        _: Request<pb::CrawlLimitParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        Err(self.fail(
            "SetCrawlLimit",
            unimplemented(
                "SetCrawlLimit",
                "per-queue crawl limits are not implemented in frontierd yet",
            ),
        ))
    }

    async fn get_url_status(
        &self,
        request: Request<pb::UrlStatusRequest>,
    ) -> Result<Response<pb::UrlItem>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("GetURLStatus", s))?;
        let svc = self.clone();
        let r = blocking(move || {
            let canon = canonicalize(&p.url, svc.frontier.config().max_url_len).map_err(|why| {
                Status::invalid_argument(format!("url {:?}: {}", p.url, why.code()))
            })?;
            let key = svc.key_of(&canon);
            let url = canon.into_string();
            if !svc.frontier.is_seen(&url).map_err(internal)? {
                return Err(Status::not_found(format!(
                    "url {url:?} is not in the frontier"
                )));
            }
            let metadata = svc
                .frontier
                .metadata(&url)
                .map_err(internal)?
                .map(|b| decode_metadata(&b))
                .unwrap_or_default();
            let info = Some(pb::UrlInfo {
                url: url.clone(),
                key: key.clone(),
                metadata,
                crawl_id: DEFAULT_CRAWL.to_string(),
            });
            let lease = svc.transit().lease_of(&url);
            let item = if let Some(lease) = lease {
                // out: refetchable when its lease ends
                let at = svc.frontier.lease_deadline(lease).unwrap_or(0) / 1000;
                pb::url_item::Item::Known(pb::KnownUrlItem {
                    info,
                    refetchable_from_date: at,
                })
            } else if svc
                .frontier
                .queued_urls(&key)
                .map_err(internal)?
                .contains(&url)
            {
                pb::url_item::Item::Discovered(pb::DiscoveredUrlItem { info })
            } else {
                // fetched (or dropped): done, never again
                pb::url_item::Item::Known(pb::KnownUrlItem {
                    info,
                    refetchable_from_date: 0,
                })
            };
            Ok(Response::new(pb::UrlItem {
                item: Some(item),
                id: url,
                creation_date: 0,
            }))
        })
        .await;
        r.map_err(|s| self.fail("GetURLStatus", s))
    }

    type ListURLsStream = BoxStream<pb::UrlItem>;

    async fn list_ur_ls(
        &self,
        request: Request<pb::ListUrlParams>,
    ) -> Result<Response<Self::ListURLsStream>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("ListURLs", s))?;
        let svc = self.clone();
        let items = blocking(move || {
            let keys: Vec<String> = if p.key.is_empty() {
                svc.queues()?.into_iter().map(|(k, _)| k).collect()
            } else {
                vec![p.key.clone()]
            };
            let size = if p.size == 0 { 100 } else { p.size as usize };
            let filter = p.filter.clone().filter(|f| !f.is_empty());
            let ignore_case = p.ignore_case.unwrap_or(false);
            let matches = |u: &str| match &filter {
                None => true,
                Some(f) if ignore_case => u.to_lowercase().contains(&f.to_lowercase()),
                Some(f) => u.contains(f.as_str()),
            };
            let mut out = Vec::new();
            let mut skipped = 0usize;
            'keys: for key in keys {
                for url in svc.frontier.queued_urls(&key).map_err(internal)? {
                    if !matches(&url) {
                        continue;
                    }
                    if skipped < p.start as usize {
                        skipped += 1;
                        continue;
                    }
                    out.push(pb::UrlItem {
                        id: url.clone(),
                        item: Some(pb::url_item::Item::Discovered(pb::DiscoveredUrlItem {
                            info: Some(pb::UrlInfo {
                                url,
                                key: key.clone(),
                                metadata: HashMap::new(),
                                crawl_id: DEFAULT_CRAWL.to_string(),
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
        })
        .await?;
        Ok(Response::new(Box::pin(tokio_stream::iter(
            items.into_iter().map(Ok),
        ))))
    }

    async fn count_ur_ls(
        &self,
        request: Request<pb::CountUrlParams>,
    ) -> Result<Response<pb::Long>, Status> {
        let p = request.into_inner();
        check_crawl(&p.crawl_id).map_err(|s| self.fail("CountURLs", s))?;
        if p.filter.as_deref().is_some_and(|f| !f.is_empty()) {
            return Err(self.fail(
                "CountURLs",
                unimplemented("CountURLs", "a filter is not supported; ListURLs takes one"),
            ));
        }
        let svc = self.clone();
        blocking(move || {
            let value = svc
                .queues()?
                .iter()
                .filter(|(k, _)| p.key.is_empty() || *k == p.key)
                .map(|(_, rec)| rec.counters.queued + rec.in_flight)
                .sum();
            Ok(Response::new(pb::Long { value }))
        })
        .await
    }

    async fn purge_ur_ls(
        &self,
        _: Request<pb::PurgeUrlParams>,
    ) -> Result<Response<pb::Long>, Status> {
        Err(self.fail(
            "PurgeURLs",
            unimplemented(
                "PurgeURLs",
                "frontierd keeps no creation date per URL and never forgets a seen URL",
            ),
        ))
    }
}

/// What an external fetcher's report says about a visit: only that it happened and when
/// the client wants the URL again (status and validators are the fetcher's business).
fn external_visit(refetch_at_ms: u64, now_ms: u64) -> Visit {
    Visit {
        status: 200,
        outcome: VisitOutcome::First,
        validators: Validators::default(),
        fetched_at_ms: now_ms,
        refetch_at_ms: Some(refetch_at_ms),
    }
}
