//! The outbox: links this node found whose shards other nodes own, kept in a sled database
//! of their own (`<data_dir>/cluster-outbox`) until the broker acknowledged them.
//!
//! Why an outbox and not "complete the page only once its links are published": the page's
//! completion would then wait on the broker, so a broker outage would hold every worker on
//! its last page and stop the local crawl, which must go on. With the outbox a link is
//! durable on this node before the page that found it is completed (a crash in between
//! fetches the page again and finds the link again), and it leaves the outbox only after the
//! broker's acknowledgement. A link published but not yet removed (crash, lost ack) is
//! published again: the owner's seen-set absorbs it.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use cluster::{parse_batch, UrlRecord};
use frontier::store::Batch;
use frontier::{SledConfig, SledStore, Store};

/// URLs per publish call.
pub(super) const PUBLISH_BATCH: usize = 4096;

/// Keys are 8-byte big-endian sequence numbers (so key order is the order links were
/// found); a value is one URL in the broker's line format.
pub struct Outbox {
    store: SledStore,
    next: AtomicU64,
    len: AtomicU64,
}

impl Outbox {
    pub fn open(path: &std::path::Path) -> Result<Outbox> {
        let store = SledStore::open(
            path,
            &SledConfig {
                cache_bytes: 8 << 20,
                ..SledConfig::default()
            },
        )
        .with_context(|| format!("opening the cluster outbox {}", path.display()))?;
        let mut len = 0u64;
        let mut last = None;
        store
            .visit_prefix(&[], &mut |k, _| {
                len += 1;
                last = Some(k.to_vec());
            })
            .with_context(|| format!("reading the cluster outbox {}", path.display()))?;
        let next = last
            .and_then(|k| <[u8; 8]>::try_from(k.as_slice()).ok())
            .map_or(0, |k| u64::from_be_bytes(k) + 1);
        Ok(Outbox {
            store,
            next: AtomicU64::new(next),
            len: AtomicU64::new(len),
        })
    }

    /// Links waiting.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// Add links, durably (flushed) on return.
    pub fn push(&self, records: &[UrlRecord]) -> Result<()> {
        let mut batch = Batch::new();
        for r in records {
            let key = self.next.fetch_add(1, Ordering::Relaxed).to_be_bytes();
            let mut line = Vec::new();
            cluster::encode_record(r, &mut line);
            batch.put(key.to_vec(), line);
        }
        self.store
            .apply(batch)
            .context("writing the cluster outbox")?;
        self.store.flush().context("flushing the cluster outbox")?;
        self.len.fetch_add(records.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The oldest links, at most `max`, with their keys.
    pub fn oldest(&self, max: usize) -> Result<Vec<(Vec<u8>, UrlRecord)>> {
        let mut out = Vec::new();
        for kv in self.store.scan_prefix(&[]) {
            let (k, v) = kv.context("reading the cluster outbox")?;
            // written by push: one valid line; anything else (a damaged value) is dropped
            // from the outbox with an error rather than blocking it forever
            match parse_batch(&v).records.pop() {
                Some(r) => out.push((k, r)),
                None => {
                    tracing::error!(key = ?k, "unreadable cluster outbox entry removed");
                    self.remove(&[k])?;
                }
            }
            if out.len() >= max {
                break;
            }
        }
        Ok(out)
    }

    /// Remove published links (not flushed: if they come back after a crash they are
    /// published again, and absorbed by the owner's seen-set).
    pub fn remove(&self, keys: &[Vec<u8>]) -> Result<()> {
        let mut batch = Batch::new();
        for k in keys {
            batch.del(k.clone());
        }
        self.store
            .apply(batch)
            .context("removing from the cluster outbox")?;
        self.len
            .fetch_sub((keys.len() as u64).min(self.len()), Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_survive_a_reopen_in_order_and_leave_once_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outbox");
        let records: Vec<UrlRecord> = (0..5)
            .map(|i| UrlRecord {
                url: format!("http://h{i}.test/"),
                depth: 1,
                via: Some("http://a.test/".into()),
                hops: "L".into(),
            })
            .collect();
        {
            let o = Outbox::open(&path).unwrap();
            o.push(&records[..3]).unwrap();
            o.push(&records[3..]).unwrap();
            assert_eq!(o.len(), 5);
        }
        let o = Outbox::open(&path).unwrap();
        assert_eq!(o.len(), 5);
        let got = o.oldest(3).unwrap();
        assert_eq!(
            got.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
            records[..3].to_vec()
        );
        let keys: Vec<Vec<u8>> = got.into_iter().map(|(k, _)| k).collect();
        o.remove(&keys).unwrap();
        assert_eq!(o.len(), 2);
        // a link pushed after a reopen goes after the ones kept
        o.push(&[UrlRecord::seed("http://last.test/")]).unwrap();
        let rest: Vec<String> = o
            .oldest(10)
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.url)
            .collect();
        assert_eq!(
            rest,
            ["http://h3.test/", "http://h4.test/", "http://last.test/"]
        );
    }
}
