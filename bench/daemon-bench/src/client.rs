//! The reference: a bare hyper-util client (keep-alive pool, N requests at once) fetching
//! the same URL list from the same server, every name resolved to 127.0.0.1 like the
//! daemon's `[resolve] "*.test"`. No robots.txt, no politeness, no WARC: what the machine
//! can fetch. With a WARC directory (`--warc-anchor`), the same client also archives each
//! answer with the `warc` crate as the daemon does (request and response records, both
//! digests, deflated at the daemon's default level, encoded outside the writer's lock and
//! appended under it): what fetching and archiving cost, without the frontier.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Every name is 127.0.0.1 (the port comes from the URL).
#[derive(Clone)]
struct Loopback;

impl tower_service::Service<Name> for Loopback {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Name) -> Self::Future {
        Box::pin(async { Ok(vec![SocketAddr::from(([127, 0, 0, 1], 0))].into_iter()) })
    }
}

pub struct ClientRun {
    pub pages: u64,
    pub errors: u64,
    pub bytes: u64,
    pub secs: f64,
    /// user + system CPU of this process during the run
    pub cpu_secs: f64,
}

impl ClientRun {
    pub fn rate(&self) -> f64 {
        self.pages as f64 / self.secs.max(1e-9)
    }

    /// CPU seconds of the client's process a page.
    pub fn cpu_per_page(&self) -> f64 {
        self.cpu_secs / self.pages.max(1) as f64
    }
}

/// The request head the daemon sends for `uri` (its headers, its order), as archived.
fn request_head(uri: &hyper::Uri) -> Vec<u8> {
    format!(
        "GET {} HTTP/1.1\r\nhost: {}\r\nuser-agent: frontierd-bench/0.1 (+https://daemon-bench.test/contact)\r\naccept: */*\r\naccept-encoding: gzip, deflate, br\r\n\r\n",
        uri.path_and_query().map_or("/", |p| p.as_str()),
        uri.authority().map_or("", |a| a.as_str()),
    )
    .into_bytes()
}

/// The response head as received, for the archive.
fn response_head(parts: &http::response::Parts) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {}\r\n", parts.status).into_bytes();
    for (name, value) in &parts.headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Archive one answer as the daemon does: encoded on the caller's thread, appended under
/// the writer's lock.
fn archive(
    writer: &Mutex<warc::WarcWriter>,
    url: &str,
    uri: &hyper::Uri,
    parts: &http::response::Parts,
    body: &[u8],
) -> Result<()> {
    let (request_head, response_head) = (request_head(uri), response_head(parts));
    let exchange = warc::Exchange {
        target_uri: url,
        ip: Some([127, 0, 0, 1].into()),
        date: std::time::SystemTime::now(),
        request_head: &request_head,
        response_head: &response_head,
        response_body: body,
        truncated: None,
        payload_digest: None,
    };
    let encoded = warc::WarcWriter::encode_exchange(&exchange, warc::Deflate::default())?;
    writer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .append_exchange(encoded)?;
    Ok(())
}

/// Fetch every URL once, `concurrency` at a time, on a runtime of `threads` threads; with
/// `warc_dir`, archive every answer there too. With `pace` (pages a second), URL i is not
/// asked for before i / pace seconds from the start: the client held to another side's
/// rate, so that both are measured at the same pages/s. With `accept_gzip` each request
/// says `Accept-Encoding: gzip` (as frontierd's do), and the body is taken as received.
pub fn run(
    urls: Arc<Vec<String>>,
    concurrency: usize,
    threads: usize,
    warc_dir: Option<&Path>,
    pace: Option<f64>,
    accept_gzip: bool,
) -> Result<ClientRun> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    let writer = match warc_dir {
        Some(dir) => Some(Arc::new(Mutex::new(warc::WarcWriter::new(
            warc::WarcConfig::new(dir),
        )?))),
        None => None,
    };
    let cpu0 = crate::procfs::self_cpu_secs();
    let run = rt.block_on(async move {
        let mut http = HttpConnector::new_with_resolver(Loopback);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(http);
        let next = Arc::new(AtomicUsize::new(0));
        let pages = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(concurrency);
        for _ in 0..concurrency.max(1) {
            let (client, urls, next) = (client.clone(), urls.clone(), next.clone());
            let (pages, errors, bytes) = (pages.clone(), errors.clone(), bytes.clone());
            let writer = writer.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(url) = urls.get(i) else { break };
                    if let Some(rate) = pace {
                        let due = started + Duration::from_secs_f64(i as f64 / rate);
                        tokio::time::sleep_until(due.into()).await;
                    }
                    let Ok(uri) = url.parse::<hyper::Uri>() else {
                        errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let mut req = http::Request::new(Empty::<Bytes>::new());
                    *req.uri_mut() = uri.clone();
                    if accept_gzip {
                        req.headers_mut().insert(
                            http::header::ACCEPT_ENCODING,
                            http::HeaderValue::from_static("gzip"),
                        );
                    }
                    match client.request(req).await {
                        Ok(resp) if resp.status().is_success() => {
                            let (parts, body) = resp.into_parts();
                            match body.collect().await {
                                Ok(b) => {
                                    let body = b.to_bytes();
                                    let archived = writer
                                        .as_ref()
                                        .map_or(Ok(()), |w| archive(w, url, &uri, &parts, &body));
                                    if archived.is_err() {
                                        errors.fetch_add(1, Ordering::Relaxed);
                                        continue;
                                    }
                                    bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                                    pages.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(_) => {
                                    errors.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        for t in tasks {
            t.await.context("client task")?;
        }
        let secs = started.elapsed().as_secs_f64();
        Ok::<_, anyhow::Error>(ClientRun {
            pages: pages.load(Ordering::Relaxed),
            errors: errors.load(Ordering::Relaxed),
            bytes: bytes.load(Ordering::Relaxed),
            secs,
            cpu_secs: 0.0,
        })
    })?;
    let cpu_secs = crate::procfs::self_cpu_secs() - cpu0;
    // the pool's sockets close with the runtime
    drop(rt);
    Ok(ClientRun { cpu_secs, ..run })
}
