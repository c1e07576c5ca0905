//! PutURLs streams in chunks: items read as they arrive but handed on in vectors, acks
//! sent in vectors and flattened into the response stream. One channel message per item
//! each way (a send, often a wake-up) cost more than the frontier's own work on an item.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Status, Streaming};

/// The next message of `input` if it can be had without waiting (already received), else
/// `None`. Polled once with a waker that does nothing: the next real `.await` registers
/// its own.
pub(super) fn ready_message<T>(input: &mut Streaming<T>) -> Option<Result<Option<T>, Status>> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(input.message()).poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

/// A response stream of acks sent in vectors.
pub(super) struct FlatAcks<T> {
    rx: mpsc::Receiver<Result<Vec<T>, Status>>,
    ready: std::vec::IntoIter<T>,
}

impl<T> FlatAcks<T> {
    pub(super) fn new(rx: mpsc::Receiver<Result<Vec<T>, Status>>) -> Self {
        FlatAcks {
            rx,
            ready: Vec::new().into_iter(),
        }
    }
}

impl<T: Unpin> Stream for FlatAcks<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(a) = self.ready.next() {
                return Poll::Ready(Some(Ok(a)));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Ok(v))) => self.ready = v.into_iter(),
                Poll::Ready(Some(Err(s))) => return Poll::Ready(Some(Err(s))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
