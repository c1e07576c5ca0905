//! The hosts in memory, found by id and by politeness key.
//!
//! Two `HashMap`s (id -> `Box<HostMem>`, key -> id) cost 17 and 25 bytes a bucket, and at a
//! million hosts their tables have two million buckets each: 84 bytes a host beside the
//! record. Here both tables hold 8 bytes a bucket (the box; the id): the id and the key are
//! read from the record itself, which already holds both (docs/benchmarks.md, "Memory at
//! 10M URLs over 1M hosts").

use std::hash::BuildHasher;

use hashbrown::hash_table::HashTable;

use crate::sched::hosts::HostMem;

/// Hosts by id (`rec.id`) and by key.
pub(crate) struct HostTable {
    by_id: HashTable<Box<HostMem>>,
    /// Ids, hashed by their host's key.
    by_key: HashTable<u64>,
    /// Keys come from pages' links: a keyed hash, so no one can pick names that collide.
    key_hasher: std::collections::hash_map::RandomState,
}

/// Ids are handed out in sequence: mixed so that both the table's position bits (low) and
/// its tag bits (high) vary.
fn id_hash(id: u64) -> u64 {
    (id ^ (id >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Default for HostTable {
    fn default() -> HostTable {
        HostTable {
            by_id: HashTable::new(),
            by_key: HashTable::new(),
            key_hasher: std::collections::hash_map::RandomState::new(),
        }
    }
}

impl HostTable {
    pub(crate) fn get(&self, id: u64) -> Option<&HostMem> {
        self.by_id
            .find(id_hash(id), |h| h.rec.id == id)
            .map(|h| &**h)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut HostMem> {
        self.by_id
            .find_mut(id_hash(id), |h| h.rec.id == id)
            .map(|h| &mut **h)
    }

    /// The id of the host with politeness key `key`.
    pub(crate) fn id_of(&self, key: &str) -> Option<u64> {
        let by_id = &self.by_id;
        self.by_key
            .find(self.key_hasher.hash_one(key), |&id| {
                by_id
                    .find(id_hash(id), |h| h.rec.id == id)
                    .is_some_and(|h| &*h.key == key)
            })
            .copied()
    }

    /// Add `h` under its id and key, replacing a host with the same id.
    pub(crate) fn insert(&mut self, h: Box<HostMem>) {
        let id = h.rec.id;
        let replaced = self.remove(id);
        debug_assert!(replaced.is_none(), "host {id} inserted twice");
        let key_hash = self.key_hasher.hash_one(&*h.key);
        let by_id = &self.by_id;
        let hasher = &self.key_hasher;
        // the rehash reads each id's key from its record (present: both tables change together)
        self.by_key.insert_unique(key_hash, id, |&other| {
            by_id
                .find(id_hash(other), |h| h.rec.id == other)
                .map_or(0, |h| hasher.hash_one(&*h.key))
        });
        self.by_id
            .insert_unique(id_hash(id), h, |h| id_hash(h.rec.id));
    }

    /// Take host `id` out.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Box<HostMem>> {
        let h = match self.by_id.find_entry(id_hash(id), |h| h.rec.id == id) {
            Ok(found) => found.remove().0,
            Err(_) => return None,
        };
        if let Ok(found) = self
            .by_key
            .find_entry(self.key_hasher.hash_one(&*h.key), |&other| other == id)
        {
            found.remove();
        }
        Some(h)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Every host (in no order).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &HostMem> {
        self.by_id.iter().map(|h| &**h)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sched::records::HostRecord;

    fn host(id: u64, key: &str) -> Box<HostMem> {
        let rec = HostRecord {
            id,
            ..HostRecord::default()
        };
        Box::new(HostMem::empty(Arc::from(key), rec))
    }

    #[test]
    fn hosts_are_found_by_id_and_key_through_growth_and_removal() {
        let mut t = HostTable::default();
        for id in 0..5_000u64 {
            t.insert(host(id, &format!("h{id}.test")));
        }
        for id in (0..5_000u64).step_by(3) {
            assert_eq!(t.remove(id).map(|h| h.rec.id), Some(id));
        }
        assert!(t.remove(0).is_none(), "gone already");
        for id in 0..5_000u64 {
            let kept = id % 3 != 0;
            let key = format!("h{id}.test");
            assert_eq!(t.get(id).is_some(), kept, "{id}");
            assert_eq!(t.id_of(&key), kept.then_some(id), "{key}");
        }
        assert_eq!(t.len(), 5_000 - 1_667);
        assert_eq!(t.iter().count(), t.len());
        // a key that came back gets its new id
        t.insert(host(9_000, "h0.test"));
        assert_eq!(t.id_of("h0.test"), Some(9_000));
        assert_eq!(t.get_mut(9_000).map(|h| h.rec.id), Some(9_000));
    }
}
