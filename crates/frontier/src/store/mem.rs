//! An in-memory engine: an ordered map behind a lock. Nothing survives the process, so
//! it serves tests of scheduling (which need no durability) without a directory on disk.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::RwLock;

use super::{Batch, Kv, Op, Store, StoreError};

/// A [`Store`] in memory. `flush` is a no-op: applied writes are all there is.
#[derive(Default)]
pub struct MemStore {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }
}

/// The keys starting with `prefix`, as a range bound pair.
fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    // the smallest key above every key with this prefix: the prefix with its last byte
    // below 0xff raised by one (trailing 0xff bytes dropped); none if it is all 0xff
    let mut end = prefix.to_vec();
    while let Some(&last) = end.last() {
        if last == u8::MAX {
            end.pop();
        } else {
            if let Some(l) = end.last_mut() {
                *l = last + 1;
            }
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

impl Store for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.map.read().get(key).cloned())
    }

    fn read_with(&self, key: &[u8], f: &mut dyn FnMut(Option<&[u8]>)) -> Result<(), StoreError> {
        f(self.map.read().get(key).map(Vec::as_slice));
        Ok(())
    }

    fn contains(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.map.read().contains_key(key))
    }

    fn first_in_range(&self, from: &[u8], to: &[u8]) -> Result<Option<Kv>, StoreError> {
        let map = self.map.read();
        let mut r = map.range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)));
        Ok(r.next().map(|(k, v)| (k.clone(), v.clone())))
    }

    fn last_in_range(&self, from: &[u8], to: &[u8]) -> Result<Option<Kv>, StoreError> {
        let map = self.map.read();
        let mut r = map.range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)));
        Ok(r.next_back().map(|(k, v)| (k.clone(), v.clone())))
    }

    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Kv, StoreError>> + 'a> {
        self.scan_prefix_from(prefix, prefix)
    }

    fn scan_prefix_from<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Kv, StoreError>> + 'a> {
        // a snapshot, as scan_prefix
        let items: Vec<Kv> = self
            .map
            .read()
            .range(prefix_range(prefix))
            .filter(|(k, _)| k.as_slice() >= from)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Box::new(items.into_iter().map(Ok))
    }

    fn visit_prefix(
        &self,
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), StoreError> {
        for (k, v) in self.map.read().range(prefix_range(prefix)) {
            f(k, v);
        }
        Ok(())
    }

    fn apply(&self, batch: Batch) -> Result<(), StoreError> {
        let mut map = self.map.write();
        for op in batch.into_ops() {
            match op {
                Op::Put(k, v) => {
                    map.insert(k, v);
                }
                Op::Del(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_scan_stops_at_the_prefix_end() {
        let s = MemStore::new();
        let mut b = Batch::new();
        for k in [&b"a\xff"[..], b"a\xff\xff", b"b", b"a", b"ab", b"\xff\xff"] {
            b.put(k.to_vec(), k.to_vec());
        }
        s.apply(b).unwrap();
        let keys =
            |p: &[u8]| -> Vec<Vec<u8>> { s.scan_prefix(p).map(|kv| kv.unwrap().0).collect() };
        assert_eq!(
            keys(b"a"),
            vec![
                b"a".to_vec(),
                b"ab".to_vec(),
                b"a\xff".to_vec(),
                b"a\xff\xff".to_vec()
            ]
        );
        assert_eq!(
            keys(b"a\xff"),
            vec![b"a\xff".to_vec(), b"a\xff\xff".to_vec()]
        );
        assert_eq!(keys(b"\xff"), vec![b"\xff\xff".to_vec()]);
        assert_eq!(
            s.first_in_range(b"a", b"b").unwrap().unwrap().0,
            b"a".to_vec()
        );
        assert_eq!(
            s.last_in_range(b"a", b"b").unwrap().unwrap().0,
            b"a\xff\xff".to_vec()
        );
        let mut d = Batch::new();
        d.del(b"ab".to_vec());
        s.apply(d).unwrap();
        assert!(!s.contains(b"ab").unwrap());
        assert_eq!(s.len(), 5);
    }
}
