//! The `urlfrontier.URLFrontier` service on a [`Frontier`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use frontier::canon::politeness_key_of;
use frontier::{CanonicalUrl, Frontier, FrontierError, Validators, Visit, VisitOutcome};
use prost::Message;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::pb;
use crate::pb::url_frontier_server::UrlFrontier;
use crate::transit::Transit;
use crate::{GrpcEvent, GrpcSettings, Hooks, LogLevel};

mod chunks;
mod get;
mod put;
mod queues;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// PutURLs items applied together (one flush), at most.
const PUT_CHUNK: usize = 4096;
/// PutURLs items read ahead of the acks, about (in vectors of up to [`PUT_CHUNK`]; then
/// the client is slowed by flow control).
const PUT_BUFFER: usize = 65_536;
/// Page and robots leases asked of the frontier per dispatch while serving GetURLs.
const LEASE_BATCH: usize = 256;

/// The frontier's clock (unix ms that do not step with the wall clock).
use frontierd_clock::now_ms;

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
            "leases not reported within delay_requestable taken back: behind their queues, or given up after max_attempts"
        );
        self.hooks.event(GrpcEvent::LeasesExpired {
            count: expired.len() as u64,
        });
        // a URL given up after its last expiry is a drop event: logged in the crawl log
        self.hooks.frontier_changed();
        Ok(())
    }

    fn fail(&self, rpc: &str, status: Status) -> Status {
        let code = format!("{:?}", status.code());
        tracing::warn!(rpc, code = %code, message = status.message(), "gRPC call refused");
        self.hooks.event(GrpcEvent::RpcFailed { rpc, code: &code });
        status
    }

    /// Run `f` on the blocking pool with a handle of the service; a refusal is logged and
    /// counted as `rpc`'s.
    async fn call<T: Send + 'static>(
        &self,
        rpc: &'static str,
        f: impl FnOnce(UrlFrontierService) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let svc = self.clone();
        blocking(move || f(svc))
            .await
            .map_err(|s| self.fail(rpc, s))
    }

    /// The answer of a deleting rpc: the URLs deleted, logged and counted.
    fn deleted(&self, rpc: &'static str, urls: u64) -> Response<pb::Long> {
        self.hooks.event(GrpcEvent::Deleted { rpc, urls });
        Response::new(pb::Long { value: urls })
    }

    fn key_of(&self, url: &CanonicalUrl) -> String {
        politeness_key_of(url, self.frontier.config().key_mode).to_string()
    }

    /// Queues (politeness keys) with their records, in key order.
    fn queues(&self) -> Result<Vec<(String, frontier::HostRecord)>, Status> {
        self.frontier.hosts(None, usize::MAX).map_err(internal)
    }
}

impl UrlFrontierService {
    /// `RESOURCE_EXHAUSTED` for a chunk with new URLs while the program refuses intake
    /// (nothing of the chunk is stored; the items acked before it stay acked).
    fn refused(&self, chunk: &[pb::UrlItem]) -> Option<Status> {
        let new_urls = chunk
            .iter()
            .any(|i| matches!(i.item, Some(pb::url_item::Item::Discovered(_))));
        if !new_urls {
            return None;
        }
        let reason = self.hooks.intake_refusal()?;
        Some(Status::resource_exhausted(format!(
            "{reason}: this chunk of PutURLs was not stored; send it again once space is freed"
        )))
    }
}

/// The key of a URL (canonical, untagged) of `crawl` in transit: the hash of its form
/// tagged with the crawl (the URL itself in the default crawl, hashed without a copy).
pub(super) fn transit_key(url: &str, crawl: &str) -> u128 {
    let crawl = frontier::crawl::normalise_crawl(crawl);
    if crawl == frontier::crawl::DEFAULT_CRAWL {
        return frontier::url_hash(url);
    }
    frontier::url_hash(&frontier::crawl::tag_url(url, crawl, 0))
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
            values: self.crawls_now(),
        }))
    }

    async fn delete_crawl(
        &self,
        request: Request<pb::DeleteCrawlMessage>,
    ) -> Result<Response<pb::Long>, Status> {
        let crawl = request.into_inner().value;
        let urls = self
            .call("DeleteCrawl", move |svc| {
                svc.frontier.delete_crawl(&crawl).map_err(internal)
            })
            .await?;
        Ok(self.deleted("DeleteCrawl", urls))
    }

    async fn list_queues(
        &self,
        request: Request<pb::Pagination>,
    ) -> Result<Response<pb::QueueList>, Status> {
        let p = request.into_inner();
        self.call("ListQueues", move |svc| svc.list_queues_now(&p))
            .await
            .map(Response::new)
    }

    type GetURLsStream = BoxStream<pb::UrlInfo>;

    async fn get_ur_ls(
        &self,
        request: Request<pb::GetParams>,
    ) -> Result<Response<Self::GetURLsStream>, Status> {
        let p = request.into_inner();
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
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<pb::AckMessage>, Status>>(4);
        // The reader drains the request stream while chunks are applied: h2 allows only so
        // many small DATA frames to sit unread (ENHANCE_YOUR_CALM, "too_many_data_frames"),
        // and a client may send thousands before its first ack. It hands on what has
        // arrived in vectors of up to PUT_CHUNK items.
        let (items_tx, mut items_rx) =
            tokio::sync::mpsc::channel::<Vec<pb::UrlItem>>(PUT_BUFFER / 1024);
        let reader = tokio::spawn(async move {
            loop {
                let first = match input.message().await {
                    Ok(Some(item)) => item,
                    Ok(None) => return,
                    Err(s) => {
                        tracing::info!(error = %s, "PutURLs stream broken by the client");
                        return;
                    }
                };
                let mut items = vec![first];
                let mut ended = false;
                while items.len() < PUT_CHUNK {
                    match chunks::ready_message(&mut input) {
                        Some(Ok(Some(item))) => items.push(item),
                        Some(Ok(None)) => {
                            ended = true;
                            break;
                        }
                        Some(Err(s)) => {
                            tracing::info!(error = %s, "PutURLs stream broken by the client");
                            ended = true;
                            break;
                        }
                        None => break,
                    }
                }
                if items_tx.send(items).await.is_err() || ended {
                    return;
                }
            }
        });
        let svc = self.clone();
        tokio::spawn(async move {
            while let Some(mut chunk) = items_rx.recv().await {
                while chunk.len() < PUT_CHUNK {
                    match items_rx.try_recv() {
                        Ok(more) => chunk.extend(more),
                        Err(_) => break,
                    }
                }
                if let Some(status) = svc.refused(&chunk) {
                    let _ = tx.send(Err(status)).await;
                    reader.abort();
                    return;
                }
                let s2 = svc.clone();
                let acks = blocking(move || s2.put_chunk(chunk)).await;
                svc.hooks.frontier_changed();
                match acks {
                    Ok(acks) => {
                        if tx.send(Ok(acks)).await.is_err() {
                            reader.abort();
                            return;
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
        Ok(Response::new(Box::pin(chunks::FlatAcks::new(rx))))
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
                if let Some(status) = svc.refused(&items) {
                    let _ = tx.send(Err(status)).await;
                    return;
                }
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
        self.call("GetStats", move |svc| svc.stats_now(&p))
            .await
            .map(Response::new)
    }

    async fn delete_queue(
        &self,
        request: Request<pb::QueueWithinCrawlParams>,
    ) -> Result<Response<pb::Long>, Status> {
        let p = request.into_inner();
        if p.key.is_empty() {
            return Err(self.fail(
                "DeleteQueue",
                Status::invalid_argument("DeleteQueue: key is empty (name a queue)"),
            ));
        }
        let urls = self
            .call("DeleteQueue", move |svc| {
                svc.frontier
                    .delete_crawl_queue(&p.crawl_id, &p.key)
                    .map_err(internal)
            })
            .await?;
        Ok(self.deleted("DeleteQueue", urls))
    }

    async fn block_queue_until(
        &self,
        request: Request<pb::BlockQueueParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        let p = request.into_inner();
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
        request: Request<pb::LogLevelParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        let p = request.into_inner();
        let level = match pb::log_level_params::Level::try_from(p.level) {
            Ok(l) => l,
            Err(_) => {
                return Err(self.fail(
                    "SetLogLevel",
                    Status::invalid_argument(format!(
                        "SetLogLevel: level {} is not one of TRACE..ERROR",
                        p.level
                    )),
                ))
            }
        };
        let level = match level {
            pb::log_level_params::Level::Trace => LogLevel::Trace,
            pb::log_level_params::Level::Debug => LogLevel::Debug,
            pb::log_level_params::Level::Info => LogLevel::Info,
            pb::log_level_params::Level::Warn => LogLevel::Warn,
            pb::log_level_params::Level::Error => LogLevel::Error,
        };
        match self.hooks.set_log_level(&p.package, level) {
            Ok(filter) => {
                tracing::info!(target = %p.package, ?level, %filter, "log level set by a client");
                self.hooks.event(GrpcEvent::LogLevelSet);
                Ok(Response::new(pb::Empty {}))
            }
            Err(why) => Err(self.fail(
                "SetLogLevel",
                Status::invalid_argument(format!("SetLogLevel {:?}: {why}", p.package)),
            )),
        }
    }

    async fn set_crawl_limit(
        &self,
        request: Request<pb::CrawlLimitParams>,
    ) -> Result<Response<pb::Empty>, Status> {
        let p = request.into_inner();
        self.call("SetCrawlLimit", move |svc| svc.set_limit_now(&p))
            .await
            .map(|()| Response::new(pb::Empty {}))
    }

    async fn get_url_status(
        &self,
        request: Request<pb::UrlStatusRequest>,
    ) -> Result<Response<pb::UrlItem>, Status> {
        let p = request.into_inner();
        self.call("GetURLStatus", move |svc| svc.url_status_now(&p))
            .await
            .map(Response::new)
    }

    type ListURLsStream = BoxStream<pb::UrlItem>;

    async fn list_ur_ls(
        &self,
        request: Request<pb::ListUrlParams>,
    ) -> Result<Response<Self::ListURLsStream>, Status> {
        let p = request.into_inner();
        let items = self
            .call("ListURLs", move |svc| svc.list_urls_now(&p))
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
        self.call("CountURLs", move |svc| svc.count_now(&p))
            .await
            .map(|value| Response::new(pb::Long { value }))
    }

    async fn purge_ur_ls(
        &self,
        request: Request<pb::PurgeUrlParams>,
    ) -> Result<Response<pb::Long>, Status> {
        let p = request.into_inner();
        let urls = self.call("PurgeURLs", move |svc| svc.purge_now(&p)).await?;
        Ok(self.deleted("PurgeURLs", urls))
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
