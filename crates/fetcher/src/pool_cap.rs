//! A cap on the connections the pool keeps: crawling 100k hosts must not leave 100k idle
//! keep-alive sockets open until their idle timeout.
//!
//! hyper-util's pool limits idle connections per host and by time, not in total. This
//! connector wrapper counts every open connection, and the fetcher counts the fetches in
//! flight. A connection opened while `max` or more of the open ones are idle (open minus
//! those serving another fetch) is marked single-use (hyper-util's "poisoned": not returned
//! to the pool), so it closes after its request. Busy connections do not count against the
//! cap: with 1 000 fetches in flight and a cap of 1 024, up to 1 024 more stay kept for the
//! hosts' next fetches (counting every open socket left room for 24). Idle sockets stay
//! about `max`; after a burst they can reach `max` plus the fetches that were in flight,
//! until `pool_idle_timeout` closes them.
//!
//! A connection of a gated connector also asks the send gate (`gate.rs`) for its origin
//! before it is opened and before each write.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tower_service::Service;

use crate::gate::{Gated, SharedGate};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Open-connection count shared by a connector and every connection it made.
#[derive(Debug, Clone)]
pub(crate) struct PoolCap {
    open: Arc<AtomicUsize>,
    busy: Arc<AtomicUsize>,
    max: usize,
}

impl PoolCap {
    pub(crate) fn new(max: usize) -> Self {
        PoolCap {
            open: Arc::new(AtomicUsize::new(0)),
            busy: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Connections open now (pooled, in use, or closing).
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Count a fetch in flight until the guard drops.
    pub(crate) fn fetch_started(&self) -> FetchInFlight {
        self.busy.fetch_add(1, Ordering::Relaxed);
        FetchInFlight {
            busy: self.busy.clone(),
        }
    }

    /// Whether a connection opened when `open_before` others were open is kept for reuse:
    /// fewer than `max` of those others are idle. The fetch this connection is for is one
    /// of the `busy` ones; the others may hold a connection each (or still be connecting,
    /// which only errs toward keeping).
    fn keeps(&self, open_before: usize) -> bool {
        let busy_others = self.busy.load(Ordering::Relaxed).saturating_sub(1);
        open_before.saturating_sub(busy_others) < self.max
    }
}

/// A fetch in flight, counted in its [`PoolCap`] until dropped.
#[derive(Debug)]
pub(crate) struct FetchInFlight {
    busy: Arc<AtomicUsize>,
}

impl Drop for FetchInFlight {
    fn drop(&mut self) {
        self.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Wraps a connector; see the module docs.
#[derive(Clone)]
pub(crate) struct CappedConnector<C> {
    inner: C,
    cap: PoolCap,
    /// Set: each connection asks this gate for its origin.
    gate: Option<SharedGate>,
}

impl<C> CappedConnector<C> {
    pub(crate) fn new(inner: C, cap: PoolCap, gate: Option<SharedGate>) -> Self {
        CappedConnector { inner, cap, gate }
    }
}

impl<C> Service<Uri> for CappedConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = Counted<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        // a fetcher whose gate was never set (one not in a cluster) keeps no origin a
        // connection: nothing to ask
        let gated = self
            .gate
            .as_ref()
            .filter(|g| g.get().is_some())
            .map(|g| Gated::new(g.clone(), &uri));
        if let Some(Err(withheld)) = gated.as_ref().map(Gated::check) {
            return Box::pin(std::future::ready(Err(Box::new(withheld) as BoxError)));
        }
        let connecting = self.inner.call(uri);
        let cap = self.cap.clone();
        Box::pin(async move {
            let io = connecting.await.map_err(Into::into)?;
            let before = cap.open.fetch_add(1, Ordering::Relaxed);
            Ok(Counted {
                io,
                single_use: !cap.keeps(before),
                cap,
                gated,
            })
        })
    }
}

/// A connection counted in its [`PoolCap`] until dropped.
#[derive(Debug)]
pub(crate) struct Counted<T> {
    io: T,
    cap: PoolCap,
    /// Opened over the cap: not kept for reuse.
    single_use: bool,
    /// Asked before each write.
    gated: Option<Gated>,
}

impl<T> Counted<T> {
    fn may_write(&self) -> io::Result<()> {
        self.gated.as_ref().map_or(Ok(()), Gated::check_io)
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.cap.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: Connection> Connection for Counted<T> {
    fn connected(&self) -> Connected {
        let connected = self.io.connected();
        if self.single_use {
            connected.poison();
        }
        connected
    }
}

impl<T: Read + Unpin> Read for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.may_write()?;
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.may_write()?;
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}
