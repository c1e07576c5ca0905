//! Deleting consumed queue segments and folded intake-log records off the hot path.

use std::sync::Arc;

use crate::store::{Batch, Store};

/// Deletes queue segments that nothing points into any more, and intake-log records a
/// fold consumed, on its own thread: the deletes (~30 µs each on sled) stay off the
/// enqueue/dispatch path. Nothing waits for them to be durable: a segment whose delete is
/// lost in a crash is found dead again at open, and its key is never reused (sequences
/// only grow); an intake record is replayed into what segments already hold, and deleted
/// by the next fold.
pub(crate) struct Reclaimer {
    tx: Option<std::sync::mpsc::Sender<Vec<Vec<u8>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reclaimer {
    pub(crate) fn start(store: Arc<dyn Store>) -> Reclaimer {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Vec<u8>>>();
        let thread = std::thread::Builder::new()
            .name("frontier-reclaim".into())
            .spawn(move || {
                for keys in rx {
                    let mut batch = Batch::new();
                    for k in keys {
                        batch.del(k);
                        batch.cut();
                    }
                    if let Err(e) = store.apply(batch) {
                        // left for the next open, which finds them dead again
                        tracing::warn!(error = %e, "deleting consumed queue segments or intake records failed");
                    }
                }
            })
            .ok();
        Reclaimer {
            tx: Some(tx),
            thread,
        }
    }

    pub(crate) fn delete(&self, keys: Vec<Vec<u8>>) {
        if keys.is_empty() {
            return;
        }
        if let Some(tx) = &self.tx {
            // a send fails only if the thread is gone (it could not be spawned): the
            // segments are then reclaimed at the next open
            let _ = tx.send(keys);
        }
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
