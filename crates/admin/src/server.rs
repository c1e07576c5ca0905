//! The admin API's server (hyper 1, HTTP/1.1, the routes of `router.rs`): on a thread and
//! runtime of its own, with a cap on connections, a time limit on each request head and
//! on each request as a whole.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower_service::Service;

use crate::backend::{Backend, ServerEvent, Timeout};
use crate::router;

/// The server's limits and its token (`[admin]`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Time for a whole request head (also between requests on a kept-alive connection).
    pub header_read_timeout: Duration,
    /// Time for a whole request, body and answer.
    pub request_timeout: Duration,
    /// The bearer token every request but `/healthz` must carry, if any.
    pub token: Option<String>,
}

/// Refusals of connections over `admin.max_connections` are logged at most this often
/// (each one is counted).
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// The admin API on a thread and runtime of its own. On the daemon's runtime a request's
/// tasks waited in the run queue behind every ready fetch task, so submits and scrapes
/// slowed with the number of workers. Its own thread gets the kernel's share beside the
/// runtime's threads, however many fetches are ready (docs/benchmarks.md, issue 13
/// session 17).
pub struct AdminServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AdminServer {
    /// Serve `listener` (bound, any blocking mode) until [`AdminServer::stop`].
    pub fn start(
        listener: std::net::TcpListener,
        backend: Arc<dyn Backend>,
        limits: Limits,
    ) -> std::io::Result<AdminServer> {
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("frontierd-admin")
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (registered, outcome) = std::sync::mpsc::sync_channel::<std::io::Result<()>>(1);
        let thread = std::thread::Builder::new()
            .name("frontierd-admin".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = registered.send(Err(e));
                            return;
                        }
                    };
                    let _ = registered.send(Ok(()));
                    // dropping `serve` at the stop drops every connection with it
                    tokio::select! {
                        _ = serve(listener, backend, limits) => {}
                        _ = stopped => {}
                    }
                });
                // a submit's enqueue still on the blocking pool finishes (it is durable
                // when it returns); nothing waits longer than that
                runtime.shutdown_timeout(Duration::from_secs(5));
            })?;
        // the daemon does not start without its API: the listener's registration is
        // waited for (a moment, once)
        match outcome.recv() {
            Ok(Ok(())) => Ok(AdminServer {
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::other(
                "the admin API's thread ended before it listened",
            )),
        }
    }

    /// Close the listener and every connection, and wait for the thread.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for AdminServer {
    /// Left without [`AdminServer::stop`] (a start-up step after it failed): the thread is
    /// told to stop, not waited for.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serve the admin API. Every connection must send a whole request head within
/// `header_read_timeout` (also between requests on a kept-alive connection) and finish
/// each request, body and answer, within `request_timeout`; at most `max_connections` are
/// open at once, further ones get a 503 and are closed.
async fn serve(listener: TcpListener, backend: Arc<dyn Backend>, limits: Limits) {
    let app = router::routes(backend.clone(), limits.token.clone());
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut last_refusal_log: Option<Instant> = None;
    // aborting `serve` (at the stop) drops every connection with it
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                backend.event(ServerEvent::AcceptFailed { error: &e });
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            let log = last_refusal_log.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY);
            if log {
                last_refusal_log = Some(Instant::now());
            }
            backend.event(ServerEvent::Refused {
                peer,
                max_connections: limits.max_connections,
                log,
            });
            refuse_busy(stream);
            continue;
        };
        let connection = Connection {
            backend: backend.clone(),
            app: app.clone(),
            peer,
            header_read_timeout: limits.header_read_timeout,
            request_timeout: limits.request_timeout,
        };
        connections.spawn(async move {
            let _slot = slot;
            connection.serve(stream).await
        });
    }
}

/// One accepted connection.
struct Connection {
    backend: Arc<dyn Backend>,
    app: Router,
    peer: std::net::SocketAddr,
    header_read_timeout: Duration,
    request_timeout: Duration,
}

impl Connection {
    async fn serve(self, stream: TcpStream) {
        let Connection {
            backend,
            app,
            peer,
            header_read_timeout,
            request_timeout,
        } = self;
        backend.event(ServerEvent::Opened { peer });
        let served = Arc::new(AtomicU32::new(0));
        let svc = {
            let (backend, served) = (backend.clone(), served.clone());
            service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (backend, served, mut app) = (backend.clone(), served.clone(), app.clone());
                async move {
                    let method = req.method().clone();
                    let path = req.uri().path().to_string();
                    let answer = tokio::time::timeout(
                        request_timeout,
                        app.call(req.map(axum::body::Body::new)),
                    );
                    let response = match answer.await {
                        Ok(Ok(r)) => r,
                        Ok(Err(never)) => match never {},
                        Err(_) => {
                            backend.event(ServerEvent::TimedOut {
                                peer,
                                timeout: Timeout::Request { method },
                                path: &path,
                                limit: request_timeout,
                            });
                            request_timed_out(request_timeout)
                        }
                    };
                    served.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, Infallible>(response)
                }
            })
        };
        let ended = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .serve_connection(TokioIo::new(stream), svc)
            .await;
        match &ended {
            // a kept-alive connection that goes quiet after its requests is closed the same
            // way: only a connection that never completed a request head counts
            Err(e) if e.is_timeout() && served.load(Ordering::Relaxed) == 0 => {
                backend.event(ServerEvent::TimedOut {
                    peer,
                    timeout: Timeout::Header,
                    path: "",
                    limit: header_read_timeout,
                });
                backend.event(ServerEvent::Closed { peer, error: None });
            }
            Err(e) => backend.event(ServerEvent::Closed {
                peer,
                error: Some(e),
            }),
            Ok(()) => backend.event(ServerEvent::Closed { peer, error: None }),
        }
    }
}

/// The 408 of a request cut off by `admin.request_timeout`; the connection is closed.
fn request_timed_out(limit: Duration) -> hyper::Response<axum::body::Body> {
    let mut r = router::error(
        hyper::StatusCode::REQUEST_TIMEOUT,
        &format!(
            "request not complete within admin.request_timeout ({})",
            humantime::format_duration(limit)
        ),
    );
    r.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    r
}

/// A 503 for a connection over the cap, written without waiting (the socket's send buffer
/// is empty), then the connection is closed.
fn refuse_busy(stream: TcpStream) {
    let body = "{\"error\": \"too many admin connections (admin.max_connections); retry later\"}\n";
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}
