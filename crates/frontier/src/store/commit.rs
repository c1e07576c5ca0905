//! Group commit: many callers, one flush.
//!
//! A caller applies its batch, notes the write with [`GroupCommit::written`], then calls
//! [`GroupCommit::sync`]. If no flush is running, the caller runs one that covers every write
//! noted so far; otherwise it waits, and the next flush covers it together with everyone
//! else who arrived meanwhile.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::{Store, StoreError};

#[derive(Default)]
struct State {
    durable: u64,
    flushing: bool,
    failed: Option<String>,
}

/// Group-commit coordinator.
#[derive(Default)]
pub struct GroupCommit {
    written: AtomicU64,
    state: Mutex<State>,
    cv: Condvar,
    flushes: AtomicU64,
}

impl GroupCommit {
    /// Note that a write was applied; returns its ticket.
    pub fn written(&self) -> u64 {
        self.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Number of flushes performed (for tests and stats).
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// Return once the write with `ticket` is durable.
    pub fn sync(&self, store: &dyn Store, ticket: u64) -> Result<(), StoreError> {
        let mut st = self.state.lock();
        loop {
            if st.durable >= ticket {
                return Ok(());
            }
            if let Some(msg) = &st.failed {
                return Err(StoreError {
                    op: "group flush",
                    source: msg.clone().into(),
                });
            }
            if !st.flushing {
                st.flushing = true;
                let upto = self.written.load(Ordering::SeqCst);
                drop(st);
                let res = store.flush();
                self.flushes.fetch_add(1, Ordering::Relaxed);
                st = self.state.lock();
                st.flushing = false;
                match res {
                    Ok(()) => st.durable = st.durable.max(upto),
                    Err(e) => {
                        tracing::error!(error = %e, "flush failed; the store is no longer durable");
                        st.failed = Some(e.to_string());
                    }
                }
                self.cv.notify_all();
            } else {
                self.cv.wait(&mut st);
            }
        }
    }
}
