//! The admin address while the store cannot be opened (a full or read-only disk at start):
//! every request, `/healthz` included, is answered 503 with the reason, so an operator and
//! a health check see why the daemon is not serving yet, instead of a refused connection.
//! Ended once the store opens; the real admin API then takes the same listener.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;

/// The stand-in server; dropping it ends it.
pub struct Waiting {
    task: tokio::task::JoinHandle<()>,
    reason: Arc<Mutex<String>>,
}

impl Waiting {
    /// Answer on a clone of `listener` (the caller keeps it for the real API).
    pub fn start(listener: &std::net::TcpListener, reason: String) -> std::io::Result<Waiting> {
        let clone = listener.try_clone()?;
        clone.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(clone)?;
        let reason = Arc::new(Mutex::new(reason));
        let shown = reason.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let shown = shown.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| {
                        let text = shown.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        let mut r = Response::new(Full::new(Bytes::from(format!(
                            "starting: {text}; the admin API answers once the store is open\n"
                        ))));
                        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                        async move { Ok::<_, Infallible>(r) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Ok(Waiting { task, reason })
    }

    /// What every answer says from now on.
    pub fn set_reason(&self, reason: String) {
        *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.task.abort();
    }
}
