//! The frontier as a service for external fetchers (url-frontier's API): leases with a
//! deadline, clients' per-queue delays and blocks (durable), and clients' metadata per URL.

use crate::api::Frontier;
use crate::crawl::canonicalize_stored;
use crate::error::Result;
use crate::store::control::QueueControl;
use crate::store::keys;
use crate::store::Batch;
use crate::work::{url_hash, LeaseId, WorkItem};

/// What an external fetcher asks of one dispatch (see [`Frontier::lease_for`]).
pub(crate) struct LeaseTerms<'a> {
    /// Whether the host with this politeness key may be visited.
    pub(crate) accept: &'a mut dyn FnMut(&str) -> bool,
    /// How long each page lease lasts before it returns to its queue.
    pub(crate) lease_ms: u64,
    /// Only URLs of this crawl (normalised), if given.
    pub(crate) crawl: Option<&'a str>,
}

impl Frontier {
    /// Up to `max` units of work for an external fetcher: only hosts whose politeness key
    /// `accept` takes are visited (it is asked once per host visit, so it can count), and
    /// every page lease returns to its queue `lease_ms` after now unless it is completed
    /// before (see [`Frontier::expire_leases`]). Robots leases are the caller's to fetch
    /// (or to complete as failed) as with [`Frontier::next_batch`].
    pub fn lease_for(
        &self,
        now_ms: u64,
        max: usize,
        lease_ms: u64,
        accept: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Vec<WorkItem>> {
        self.lease_in_crawl(now_ms, max, lease_ms, None, accept)
    }

    /// [`Frontier::lease_for`] with only URLs of `crawl` (url-frontier's crawlID; "" is
    /// the default crawl) when given. A host whose next URL is another crawl's is passed
    /// over (it keeps its turn): a host's queue holds every crawl's URLs in arrival order.
    pub fn lease_in_crawl(
        &self,
        now_ms: u64,
        max: usize,
        lease_ms: u64,
        crawl: Option<&str>,
        accept: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Vec<WorkItem>> {
        let crawl = crawl.map(crate::crawl::normalise_crawl);
        self.next_batch_with(
            now_ms,
            max,
            Some(LeaseTerms {
                accept,
                lease_ms,
                crawl,
            }),
        )
    }

    /// Take back every page lease whose deadline passed by `now_ms`. An expiry counts as an
    /// attempt of its URL (a fetcher that keeps losing it must not hold it forever): the
    /// URL goes behind the host's other queued URLs (not to the front, where it would be
    /// served again before them), and after `max_attempts` it is given up (a
    /// [`FrontierEvent::Dropped`](crate::FrontierEvent) with reason `gave-up`). The host's
    /// slot and its address's slot are freed; the host keeps its gap. Not flushed: after a
    /// crash the lease returns at open anyway. Returns the leases taken back.
    pub fn expire_leases(&self, now_ms: u64) -> Result<Vec<LeaseId>> {
        let mut batch = Batch::new();
        let mut dead = Vec::new();
        let mut returned = Vec::new();
        {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let expired = inner.sched.poll_expired_leases(now_ms);
            if expired.is_empty() {
                return Ok(returned);
            }
            let mut dirty = Vec::new();
            let mut revisits = Vec::new();
            for lease in expired {
                if self.expire_one(inner, &mut batch, lease, now_ms, &mut revisits)? {
                    dirty.push(lease.host_id);
                    returned.push(lease);
                }
            }
            self.reschedule_all(inner, &mut batch, revisits, now_ms);
            batch.cut();
            for &id in &dirty {
                inner.sched.schedule(id);
            }
            inner.settling().settle_hosts(dirty, &mut batch, &mut dead);
            if !batch.is_empty() {
                self.store.apply(batch)?;
                self.commit.written();
            }
        }
        self.reclaimer.delete(dead);
        Ok(returned)
    }

    /// When `lease` returns to its queue unless completed (None: no deadline, or not in
    /// flight).
    pub fn lease_deadline(&self, lease: LeaseId) -> Option<u64> {
        self.inner.lock().sched.lease_deadline(lease)
    }

    /// A client's settings for `key` ("" = the defaults of every queue).
    pub fn queue_control(&self, key: &str) -> QueueControl {
        self.inner.lock().sched.control(key).unwrap_or_default()
    }

    /// The client's delay in force for `key` in ms: its own, else the default.
    pub fn client_delay(&self, key: &str) -> u64 {
        self.inner.lock().sched.client_delay_ms(key)
    }

    /// A client's gap between two serves of `key` ("" = every queue without its own), in
    /// ms; 0 removes it. It only lengthens the host's own gap. Durable on return.
    pub fn set_queue_delay(&self, key: &str, delay_ms: u64) -> Result<()> {
        self.update_control(key, |c| c.delay_ms = delay_ms)
    }

    /// Serve nothing of `key` before `until_ms` (unix ms; 0 lifts the block). Durable on
    /// return.
    pub fn block_queue_until(&self, key: &str, until_ms: u64) -> Result<()> {
        self.update_control(key, |c| c.blocked_until_ms = until_ms)
    }

    fn update_control(&self, key: &str, change: impl FnOnce(&mut QueueControl)) -> Result<()> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let mut control = inner.sched.control(key).unwrap_or_default();
        change(&mut control);
        let mut batch = Batch::new();
        if control.is_empty() {
            batch.del(keys::queue_control(key));
        } else {
            batch.put(keys::queue_control(key), control.encode());
        }
        self.store.apply(batch)?;
        self.store.flush()?;
        inner.sched.set_control(key, control);
        Ok(())
    }

    /// Keep a client's metadata with URLs (any spelling; canonicalized as on enqueue;
    /// URLs that do not canonicalize are skipped). With `durable`, flushed before it
    /// returns; without, it is durable with the next flush (an enqueue's or a
    /// completion's), which saves one flush when one follows anyway.
    pub fn put_metadata(&self, items: &[(&str, &[u8])], durable: bool) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        for (url, meta) in items {
            let Ok((_, c)) = canonicalize_stored(url, self.cfg.max_url_len) else {
                continue;
            };
            let key = keys::metadata(url_hash(&c));
            if meta.is_empty() {
                batch.del(key);
            } else {
                batch.put(key, meta.to_vec());
            }
        }
        // before the write: a reader that sees the metadata must look for it
        self.metadata_in_use
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.store.apply(batch)?;
        if durable {
            self.store.flush()?;
        }
        Ok(())
    }

    /// The metadata kept with a URL (any spelling), if any.
    pub fn metadata(&self, url: &str) -> Result<Option<Vec<u8>>> {
        if !self
            .metadata_in_use
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(None);
        }
        let Ok((_, c)) = canonicalize_stored(url, self.cfg.max_url_len) else {
            return Ok(None);
        };
        Ok(self.store.get(&keys::metadata(url_hash(&c)))?)
    }
}
