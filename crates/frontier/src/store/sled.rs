//! The on-disk engine: sled.

use std::path::Path;

use super::{Batch, Kv, Op, Store, StoreError};

/// sled engine settings.
#[derive(Debug, Clone)]
pub struct SledConfig {
    /// sled page cache in bytes (set explicitly: sled's default is 1 GiB).
    pub cache_bytes: u64,
    /// sled's own background flush interval; `None` disables it (the frontier flushes
    /// explicitly wherever it promises durability).
    pub flush_every_ms: Option<u64>,
}

impl Default for SledConfig {
    fn default() -> Self {
        SledConfig {
            cache_bytes: 32 * 1024 * 1024,
            // every durable promise flushes explicitly; sled's background flusher would
            // only add write amplification, a thread, and a database handle that outlives
            // `drop` (so a quick reopen could fail on the file lock)
            flush_every_ms: None,
        }
    }
}

/// The sled engine.
pub struct SledStore {
    db: sled::Db,
    /// The first failed write or flush (see [`Store::write_failure`]).
    failed: std::sync::Mutex<Option<String>>,
}

impl SledStore {
    /// `r`, its error kept as the store's first write failure.
    fn noted<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &r {
            let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
            failed.get_or_insert_with(|| e.to_string());
        }
        r
    }

    /// Open (or create) a store at `path`.
    ///
    /// sled's I/O threads can hold the database's file lock for a moment after the last
    /// handle is dropped, so a reopen in the same process retries a held lock for up to
    /// two seconds before failing.
    pub fn open(path: &Path, cfg: &SledConfig) -> Result<SledStore, StoreError> {
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(cfg.cache_bytes)
            .flush_every_ms(cfg.flush_every_ms)
            .mode(sled::Mode::HighThroughput)
            .use_compression(false);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            match config.open() {
                Ok(db) => {
                    return Ok(SledStore {
                        db,
                        failed: Default::default(),
                    })
                }
                Err(e)
                    if e.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(StoreError::sled("open", e)),
            }
        }
    }

    /// The underlying database (benchmarks use it for the raw reference numbers).
    pub fn db(&self) -> &sled::Db {
        &self.db
    }
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.db
            .get(key)
            .map(|o| o.map(|v| v.to_vec()))
            .map_err(|e| StoreError::sled("get", e))
    }

    fn read_with(&self, key: &[u8], f: &mut dyn FnMut(Option<&[u8]>)) -> Result<(), StoreError> {
        let v = self.db.get(key).map_err(|e| StoreError::sled("get", e))?;
        f(v.as_deref());
        Ok(())
    }

    fn contains(&self, key: &[u8]) -> Result<bool, StoreError> {
        self.db
            .contains_key(key)
            .map_err(|e| StoreError::sled("contains", e))
    }

    fn first_in_range(&self, from: &[u8], to: &[u8]) -> Result<Option<Kv>, StoreError> {
        match self.db.range(from..to).next() {
            None => Ok(None),
            Some(Ok((k, v))) => Ok(Some((k.to_vec(), v.to_vec()))),
            Some(Err(e)) => Err(StoreError::sled("range", e)),
        }
    }

    fn last_in_range(&self, from: &[u8], to: &[u8]) -> Result<Option<Kv>, StoreError> {
        match self.db.range(from..to).next_back() {
            None => Ok(None),
            Some(Ok((k, v))) => Ok(Some((k.to_vec(), v.to_vec()))),
            Some(Err(e)) => Err(StoreError::sled("range", e)),
        }
    }

    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Kv, StoreError>> + 'a> {
        Box::new(self.db.scan_prefix(prefix).map(|r| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(|e| StoreError::sled("scan", e))
        }))
    }

    fn scan_prefix_from<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Kv, StoreError>> + 'a> {
        let prefix = prefix.to_vec();
        Box::new(
            self.db
                .range(from.to_vec()..)
                .take_while(move |r| r.as_ref().map_or(true, |(k, _)| k.starts_with(&prefix)))
                .map(|r| {
                    r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                        .map_err(|e| StoreError::sled("scan", e))
                }),
        )
    }

    fn visit_prefix(
        &self,
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), StoreError> {
        for kv in self.db.scan_prefix(prefix) {
            let (k, v) = kv.map_err(|e| StoreError::sled("scan", e))?;
            f(&k, &v);
        }
        Ok(())
    }

    fn apply(&self, batch: Batch) -> Result<(), StoreError> {
        // sled keeps every node it replaces during one `apply_batch` alive until the call
        // returns (one epoch guard), so a 30 000-op batch holds tens of thousands of node
        // copies at once: split at the writer's cut points into calls of about CHUNK ops.
        const CHUNK: usize = 1024;
        let (ops, cuts) = batch.into_parts();
        let mut cuts = cuts.into_iter().peekable();
        let mut b = sled::Batch::default();
        let mut in_chunk = 0usize;
        for (i, op) in ops.into_iter().enumerate() {
            while cuts.peek().is_some_and(|&c| c <= i) {
                cuts.next();
                if in_chunk >= CHUNK {
                    self.noted(
                        self.db
                            .apply_batch(std::mem::take(&mut b))
                            .map_err(|e| StoreError::sled("apply batch", e)),
                    )?;
                    in_chunk = 0;
                }
            }
            match op {
                Op::Put(k, v) => b.insert(k, v),
                Op::Del(k) => b.remove(k),
            }
            in_chunk += 1;
        }
        if in_chunk > 0 {
            self.noted(
                self.db
                    .apply_batch(b)
                    .map_err(|e| StoreError::sled("apply batch", e)),
            )?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.noted(
            self.db
                .flush()
                .map(|_| ())
                .map_err(|e| StoreError::sled("flush", e)),
        )
    }

    fn write_failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db
            .size_on_disk()
            .map_err(|e| StoreError::sled("size_on_disk", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sled_roundtrip_and_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), &SledConfig::default()).unwrap();
        let mut b = Batch::new();
        b.put(b"a1".to_vec(), b"x".to_vec());
        b.put(b"a2".to_vec(), b"y".to_vec());
        b.put(b"b1".to_vec(), b"z".to_vec());
        s.apply(b).unwrap();
        s.flush().unwrap();
        assert_eq!(s.get(b"a2").unwrap(), Some(b"y".to_vec()));
        let mut seen = Vec::new();
        s.read_with(b"a2", &mut |v| seen.push(v.map(|v| v.to_vec())))
            .unwrap();
        s.read_with(b"zz", &mut |v| seen.push(v.map(|v| v.to_vec())))
            .unwrap();
        assert_eq!(seen, vec![Some(b"y".to_vec()), None]);
        assert!(s.contains(b"b1").unwrap());
        assert_eq!(
            s.first_in_range(b"a", b"b").unwrap().unwrap().0,
            b"a1".to_vec()
        );
        assert_eq!(
            s.last_in_range(b"a", b"b").unwrap().unwrap().0,
            b"a2".to_vec()
        );
        assert_eq!(s.scan_prefix(b"a").count(), 2);
        let mut visited = Vec::new();
        s.visit_prefix(b"a", &mut |k, v| visited.push((k.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(
            visited,
            vec![
                (b"a1".to_vec(), b"x".to_vec()),
                (b"a2".to_vec(), b"y".to_vec())
            ]
        );
        let mut b = Batch::new();
        b.del(b"a1".to_vec());
        s.apply(b).unwrap();
        assert_eq!(s.get(b"a1").unwrap(), None);
    }
}
