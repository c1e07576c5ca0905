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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::{encode_record, parse_batch, UrlRecord};

/// URLs per publish call.
pub const PUBLISH_BATCH: usize = 4096;

/// A failed outbox read or write, naming the outbox.
#[derive(Debug, thiserror::Error)]
#[error("{what} the cluster outbox {}: {source}", path.display())]
pub struct OutboxError {
    what: &'static str,
    path: PathBuf,
    #[source]
    source: sled::Error,
}

/// What [`Outbox::oldest`] took.
#[derive(Debug, Default)]
pub struct Oldest {
    /// The oldest links, with their keys (for [`Outbox::remove`]).
    pub links: Vec<(Vec<u8>, UrlRecord)>,
    /// Keys of entries that could not be read: removed, for the caller to report.
    pub damaged: Vec<Vec<u8>>,
}

/// Keys are 8-byte big-endian sequence numbers (so key order is the order links were
/// found); a value is one URL in the broker's line format.
pub struct Outbox {
    db: sled::Db,
    path: PathBuf,
    next: AtomicU64,
    len: AtomicU64,
}

impl Outbox {
    /// Open (or create) the outbox at `path`. sled's threads can hold the file lock for a
    /// moment after a handle is dropped, so a reopen retries a held lock for two seconds.
    pub fn open(path: &Path) -> Result<Outbox, OutboxError> {
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(8 << 20)
            .mode(sled::Mode::HighThroughput)
            .use_compression(false);
        let deadline = Instant::now() + Duration::from_secs(2);
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                // sled reports the held lock as an `Other` I/O error naming it
                Err(e)
                    if e.to_string().contains("could not acquire lock")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(error("opening", path, e)),
            }
        };
        let len = db.len() as u64;
        let next = db
            .last()
            .map_err(|e| error("reading", path, e))?
            .and_then(|(k, _)| <[u8; 8]>::try_from(k.as_ref()).ok())
            .map_or(0, |k| u64::from_be_bytes(k) + 1);
        Ok(Outbox {
            db,
            path: path.to_path_buf(),
            next: AtomicU64::new(next),
            len: AtomicU64::new(len),
        })
    }

    /// The sequence number the next link pushed gets: every link pushed so far is below.
    pub fn next_sequence(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// The sequence number of the oldest link still waiting ([`Outbox::next_sequence`] when
    /// none is): every link below it was published.
    pub fn first_waiting(&self) -> Result<u64, OutboxError> {
        let first = self
            .db
            .first()
            .map_err(|e| error("reading", &self.path, e))?;
        Ok(first
            .and_then(|(k, _)| <[u8; 8]>::try_from(k.as_ref()).ok())
            .map_or_else(|| self.next_sequence(), u64::from_be_bytes))
    }

    /// Links waiting.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether no link is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add links, durably (flushed) on return.
    pub fn push(&self, records: &[UrlRecord]) -> Result<(), OutboxError> {
        let mut batch = sled::Batch::default();
        for r in records {
            let key = self.next.fetch_add(1, Ordering::Relaxed).to_be_bytes();
            let mut line = Vec::new();
            encode_record(r, &mut line);
            batch.insert(&key[..], line);
        }
        self.db
            .apply_batch(batch)
            .map_err(|e| error("writing", &self.path, e))?;
        self.db
            .flush()
            .map_err(|e| error("flushing", &self.path, e))?;
        self.len.fetch_add(records.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The oldest links, at most `max`. An entry that cannot be read (a damaged value) is
    /// removed and named in [`Oldest::damaged`] rather than blocking the outbox forever.
    pub fn oldest(&self, max: usize) -> Result<Oldest, OutboxError> {
        let mut out = Oldest::default();
        for kv in self.db.iter() {
            let (k, v) = kv.map_err(|e| error("reading", &self.path, e))?;
            match parse_batch(&v).records.pop() {
                Some(r) => out.links.push((k.to_vec(), r)),
                None => out.damaged.push(k.to_vec()),
            }
            if out.links.len() >= max {
                break;
            }
        }
        if !out.damaged.is_empty() {
            self.remove(&out.damaged)?;
        }
        Ok(out)
    }

    /// Remove published links (not flushed: if they come back after a crash they are
    /// published again, and absorbed by the owner's seen-set).
    pub fn remove(&self, keys: &[Vec<u8>]) -> Result<(), OutboxError> {
        let mut batch = sled::Batch::default();
        for k in keys {
            batch.remove(k.as_slice());
        }
        self.db
            .apply_batch(batch)
            .map_err(|e| error("removing from", &self.path, e))?;
        self.len
            .fetch_sub((keys.len() as u64).min(self.len()), Ordering::Relaxed);
        Ok(())
    }
}

fn error(what: &'static str, path: &Path, source: sled::Error) -> OutboxError {
    OutboxError {
        what,
        path: path.to_path_buf(),
        source,
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
                handoff: false,
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
        let got = o.oldest(3).unwrap().links;
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
            .links
            .into_iter()
            .map(|(_, r)| r.url)
            .collect();
        assert_eq!(
            rest,
            ["http://h3.test/", "http://h4.test/", "http://last.test/"]
        );
    }

    #[test]
    fn a_damaged_entry_is_removed_and_named_not_left_to_block_the_outbox() {
        let dir = tempfile::tempdir().unwrap();
        let o = Outbox::open(&dir.path().join("outbox")).unwrap();
        o.push(&[UrlRecord::seed("http://a.test/")]).unwrap();
        o.db.insert(u64::MAX.to_be_bytes(), &b"\n"[..]).unwrap();
        let taken = o.oldest(10).unwrap();
        assert_eq!(taken.links.len(), 1);
        assert_eq!(taken.damaged, vec![u64::MAX.to_be_bytes().to_vec()]);
        assert!(o.oldest(10).unwrap().damaged.is_empty());
    }
}
