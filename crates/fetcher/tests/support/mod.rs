//! Local test servers on 127.0.0.1 (ephemeral ports).
//!
//! - [`HttpServer`]: hyper HTTP/1.1 with a per-test handler; bodies can finish, stall or
//!   fail mid-way ([`ScriptedBody`]).
//! - [`RawServer`]: plain TCP for what hyper will not send: malformed chunking, garbage
//!   heads, resets (RST) mid-body.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use fetcher::{FetcherConfig, ResolveTable};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a [`ScriptedBody`] ends after its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyEnd {
    Finish,
    /// Never yields again: the client waits until its timeout.
    Stall,
    /// Fails: hyper aborts the connection mid-body.
    Abort,
}

/// A response body sent in given chunks, then finished, stalled or aborted.
pub struct ScriptedBody {
    chunks: VecDeque<Bytes>,
    end: BodyEnd,
    /// Exact length when it finishes; None makes hyper use chunked encoding.
    exact_len: Option<u64>,
}

impl ScriptedBody {
    pub fn full(data: impl Into<Bytes>) -> Self {
        let data = data.into();
        ScriptedBody {
            exact_len: Some(data.len() as u64),
            chunks: VecDeque::from([data]),
            end: BodyEnd::Finish,
        }
    }

    pub fn empty() -> Self {
        Self::full(Bytes::new())
    }

    pub fn chunks(chunks: impl IntoIterator<Item = Bytes>, end: BodyEnd) -> Self {
        ScriptedBody {
            chunks: chunks.into_iter().collect(),
            end,
            exact_len: None,
        }
    }
}

impl Body for ScriptedBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(chunk) = self.chunks.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        match self.end {
            BodyEnd::Finish => Poll::Ready(None),
            // Never woken: the connection stays open and silent.
            BodyEnd::Stall => Poll::Pending,
            BodyEnd::Abort => Poll::Ready(Some(Err(io::Error::other("scripted abort")))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.end == BodyEnd::Finish
    }

    fn size_hint(&self) -> SizeHint {
        match self.exact_len {
            Some(n) if self.end == BodyEnd::Finish => SizeHint::with_exact(n),
            _ => SizeHint::default(),
        }
    }
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub path: String,
    pub headers: HeaderMap,
    pub peer: SocketAddr,
}

type Handler = Arc<
    dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = Response<ScriptedBody>> + Send>>
        + Send
        + Sync,
>;

/// hyper HTTP/1.1 server with a per-test handler. Stops when dropped (its task is
/// aborted).
pub struct HttpServer {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    pub async fn start<F, Fut>(handler: F) -> Self
    where
        F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response<ScriptedBody>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |req| Box::pin(handler(req)));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen_by_server = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let seen = seen_by_server.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        seen.lock().unwrap().push(SeenRequest {
                            path: req
                                .uri()
                                .path_and_query()
                                .map(|p| p.to_string())
                                .unwrap_or_default(),
                            headers: req.headers().clone(),
                            peer,
                        });
                        let fut = handler(req);
                        async move { Ok::<_, Infallible>(fut.await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        HttpServer { addr, seen, task }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:<port><path>`
    pub fn url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!("http://{}{}", self.addr, path)).expect("url")
    }

    pub fn seen(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// TLS server (self-signed certificate for `names`) offering h2 and http/1.1 by ALPN,
/// serving whichever the client picks. Stops when dropped.
pub struct TlsServer {
    pub addr: SocketAddr,
    /// The certificate, DER: trust it via `FetcherConfig::extra_root_certificates`.
    pub cert_der: Vec<u8>,
    /// HTTP version of each request served, in order.
    versions: Arc<Mutex<Vec<http::Version>>>,
    /// Whether each connection's handshake resumed a session, in order.
    resumed: Arc<Mutex<Vec<bool>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsServer {
    pub async fn start(names: &[&str], alpn: &[&[u8]], body: &'static str) -> Self {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let certified = rcgen::generate_simple_self_signed(names).expect("certificate");
        let cert_der = certified.cert.der().to_vec();
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone().into()], key)
        .expect("server config");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let versions = Arc::new(Mutex::new(Vec::new()));
        let seen_versions = versions.clone();
        let resumed = Arc::new(Mutex::new(Vec::new()));
        let seen_resumed = resumed.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let versions = seen_versions.clone();
                let resumed = seen_resumed.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return; // the client refused our certificate
                    };
                    resumed.lock().unwrap().push(
                        tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
                    );
                    let service = service_fn(move |req: Request<Incoming>| {
                        versions.lock().unwrap().push(req.version());
                        async move { Ok::<_, Infallible>(respond(200, &[], body)) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
                });
            }
        });
        TlsServer {
            addr,
            cert_der,
            versions,
            resumed,
            task,
        }
    }

    /// For each connection accepted so far, in order: whether it resumed a session.
    pub fn resumed(&self) -> Vec<bool> {
        self.resumed.lock().unwrap().clone()
    }

    pub fn versions(&self) -> Vec<http::Version> {
        self.versions.lock().unwrap().clone()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type RawHandler =
    Arc<dyn Fn(TcpStream, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Plain TCP server: reads the request head, then hands the socket to the handler.
pub struct RawServer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl RawServer {
    pub async fn start<F, Fut>(handler: F) -> Self
    where
        F: Fn(TcpStream, String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handler: RawHandler = Arc::new(move |s, head| Box::pin(handler(s, head)));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                tokio::spawn(async move {
                    let head = read_head(&mut stream).await;
                    handler(stream, head).await;
                });
            }
        });
        RawServer { addr, task }
    }

    pub fn url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!("http://{}{}", self.addr, path)).expect("url")
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Writes `bytes`, then closes with an RST (SO_LINGER 0) instead of a FIN.
pub async fn write_then_reset(mut stream: TcpStream, bytes: &[u8]) {
    let _ = stream.write_all(bytes).await;
    let _ = stream.flush().await;
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Writes `bytes` and keeps the connection open until the client goes away.
pub async fn write_then_hold(mut stream: TcpStream, bytes: &[u8]) {
    let _ = stream.write_all(bytes).await;
    let _ = stream.flush().await;
    let mut sink = [0u8; 1024];
    while let Ok(n) = stream.read(&mut sink).await {
        if n == 0 {
            break;
        }
    }
}

/// A response with a status, headers and a full body.
pub fn respond(
    status: u16,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Response<ScriptedBody> {
    let mut builder = Response::builder().status(StatusCode::from_u16(status).expect("status"));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(ScriptedBody::full(body)).expect("response")
}

/// A config with short timeouts for tests, allowed to reach the servers they start on
/// loopback (the default address policy refuses loopback).
pub fn test_config() -> FetcherConfig {
    FetcherConfig {
        connect_timeout: std::time::Duration::from_secs(2),
        total_timeout: std::time::Duration::from_secs(10),
        addresses: fetcher::AddressPolicy::allowing_loopback(),
        ..FetcherConfig::default()
    }
}

/// `names` (exact or `*.suffix`) all pinned to 127.0.0.1.
pub fn loopback_table(names: &[&str]) -> ResolveTable {
    let mut table = ResolveTable::new();
    for name in names {
        table
            .insert(name, [std::net::IpAddr::from([127, 0, 0, 1])])
            .expect("valid pattern");
    }
    table
}
