//! The store layer: the storage engine behind a small trait ([`sled`] on disk, [`mem`] in
//! memory for tests), the key schema ([`keys`]), the record encodings ([`codec`],
//! [`packed`]), the host-record journal, recovery at open, group commit and the segment
//! reclaimer.
//!
//! The frontier keeps everything in one ordered key space; the first byte of a key names
//! the record kind (see [`keys`]). One [`Batch`] is applied atomically, and
//! [`Store::flush`] makes everything applied so far durable.

pub(crate) mod checkpoint;
pub mod codec;
pub(crate) mod commit;
pub mod control;
pub(crate) mod journal;
pub mod keys;
pub mod mem;
pub mod packed;
pub(crate) mod reclaim;
pub mod revisit;
pub mod sled;

pub use self::mem::MemStore;
pub use self::sled::{SledConfig, SledStore};

/// A record's bytes that do not decode: what kind of record, and what is wrong. Damaged
/// bytes are this error, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt {what} record: {why}")]
pub struct CodecError {
    /// Record kind.
    pub what: &'static str,
    /// Problem.
    pub why: &'static str,
}

/// A storage failure, with the operation that failed.
#[derive(Debug, thiserror::Error)]
#[error("store {op} failed: {source}")]
pub struct StoreError {
    /// What the frontier was doing.
    pub op: &'static str,
    /// Engine error.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl StoreError {
    /// Whether the engine failed because its disk is full or read-only: nothing is wrong
    /// with the data, and the same operation goes through once there is room or the
    /// filesystem is writable again.
    pub fn disk_unavailable(&self) -> bool {
        match self.source.downcast_ref::<::sled::Error>() {
            Some(::sled::Error::Io(e)) => matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::ReadOnlyFilesystem
            ),
            _ => false,
        }
    }

    pub(crate) fn sled(op: &'static str, e: ::sled::Error) -> StoreError {
        StoreError {
            op,
            source: Box::new(e),
        }
    }
}

/// One write in a batch.
#[derive(Debug, Clone)]
pub enum Op {
    /// Insert or overwrite.
    Put(Vec<u8>, Vec<u8>),
    /// Remove (absent keys are fine).
    Del(Vec<u8>),
}

/// Writes applied atomically, or, where the writer marked [`Batch::cut`] points, atomically
/// between them: a crash during [`Store::apply`] may leave the batch applied up to some cut
/// (never up to a point in between). Nothing is acknowledged before the following flush, so
/// cuts only bound how much one engine call holds; the frontier puts them between
/// self-contained units (one URL's seen key and queue entry, one host record, ...).
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<Op>,
    cuts: Vec<usize>,
}

impl Batch {
    /// Empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }
    /// Queue an insert.
    pub fn put(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.ops.push(Op::Put(k, v));
    }
    /// Queue a removal.
    pub fn del(&mut self, k: Vec<u8>) {
        self.ops.push(Op::Del(k));
    }
    /// Mark the end of a self-contained unit: the engine may commit what precedes it
    /// separately from what follows.
    pub fn cut(&mut self) {
        if self.cuts.last() != Some(&self.ops.len()) && !self.ops.is_empty() {
            self.cuts.push(self.ops.len());
        }
    }
    /// Append another batch (its cuts kept), with a cut between the two.
    pub fn append(&mut self, other: Batch) {
        self.cut();
        let base = self.ops.len();
        self.ops.extend(other.ops);
        self.cuts.extend(other.cuts.into_iter().map(|c| c + base));
    }
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// No operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// The operations.
    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }
    /// The operations and the cut points (indices into the operations).
    pub fn into_parts(self) -> (Vec<Op>, Vec<usize>) {
        (self.ops, self.cuts)
    }
}

/// Test stores wrap a [`MemStore`] and change only what they watch (writes, flushes):
/// this writes the read half of [`Store`] for them, each call passed to `self.$field`.
#[cfg(test)]
/// `delegate_store_reads!(store, except get)` leaves out `get`, for a store that watches it.
macro_rules! delegate_store_reads {
    ($field:ident) => {
        fn get(
            &self,
            key: &[u8],
        ) -> ::std::result::Result<Option<Vec<u8>>, $crate::store::StoreError> {
            self.$field.get(key)
        }
        $crate::store::delegate_store_reads!($field, except get);
    };
    ($field:ident, except get) => {
        fn read_with(
            &self,
            key: &[u8],
            f: &mut dyn FnMut(Option<&[u8]>),
        ) -> ::std::result::Result<(), $crate::store::StoreError> {
            self.$field.read_with(key, f)
        }
        fn contains(&self, key: &[u8]) -> ::std::result::Result<bool, $crate::store::StoreError> {
            self.$field.contains(key)
        }
        fn first_in_range(
            &self,
            from: &[u8],
            to: &[u8],
        ) -> ::std::result::Result<Option<$crate::store::Kv>, $crate::store::StoreError> {
            self.$field.first_in_range(from, to)
        }
        fn last_in_range(
            &self,
            from: &[u8],
            to: &[u8],
        ) -> ::std::result::Result<Option<$crate::store::Kv>, $crate::store::StoreError> {
            self.$field.last_in_range(from, to)
        }
        fn scan_prefix<'a>(
            &'a self,
            prefix: &[u8],
        ) -> Box<
            dyn Iterator<Item = ::std::result::Result<$crate::store::Kv, $crate::store::StoreError>>
                + 'a,
        > {
            self.$field.scan_prefix(prefix)
        }
        fn visit_prefix(
            &self,
            prefix: &[u8],
            f: &mut dyn FnMut(&[u8], &[u8]),
        ) -> ::std::result::Result<(), $crate::store::StoreError> {
            self.$field.visit_prefix(prefix, f)
        }
        fn size_on_disk(&self) -> ::std::result::Result<u64, $crate::store::StoreError> {
            self.$field.size_on_disk()
        }
    };
}
#[cfg(test)]
pub(crate) use delegate_store_reads;

/// Key/value pairs returned by scans.
pub type Kv = (Vec<u8>, Vec<u8>);

/// The engine interface the frontier needs.
pub trait Store: Send + Sync {
    /// Point read.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Point read without copying the value: `f` sees it (or `None`) while the engine
    /// holds it. For large values read only in part (a seen bucket searched for a few
    /// hashes).
    fn read_with(&self, key: &[u8], f: &mut dyn FnMut(Option<&[u8]>)) -> Result<(), StoreError>;
    /// Whether a key exists.
    fn contains(&self, key: &[u8]) -> Result<bool, StoreError>;
    /// Smallest key in `[from, to)`.
    fn first_in_range(&self, from: &[u8], to: &[u8]) -> Result<Option<Kv>, StoreError>;
    /// Largest key in `[from, to)`.
    fn last_in_range(&self, from: &[u8], to: &[u8]) -> Result<Option<Kv>, StoreError>;
    /// All pairs whose key starts with `prefix`, in key order.
    fn scan_prefix<'a>(
        &'a self,
        prefix: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Kv, StoreError>> + 'a>;
    /// The pairs whose key starts with `prefix` and is at least `from`, in key order (a
    /// page of a long listing, without walking the keys before it).
    fn scan_prefix_from<'a>(
        &'a self,
        prefix: &[u8],
        from: &[u8],
    ) -> Box<dyn Iterator<Item = Result<Kv, StoreError>> + 'a> {
        let from = from.to_vec();
        Box::new(
            self.scan_prefix(prefix)
                .filter(move |kv| kv.as_ref().map_or(true, |(k, _)| *k >= from)),
        )
    }
    /// Visit the pairs whose key starts with `prefix`, in key order, without copying them
    /// (a scan at open that needs only keys or a value's header).
    fn visit_prefix(
        &self,
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), StoreError>;
    /// Apply a batch atomically (all or nothing, also across a crash), or atomically between
    /// its [`Batch::cut`] points.
    fn apply(&self, batch: Batch) -> Result<(), StoreError>;
    /// Make every applied write durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// Bytes used on disk.
    fn size_on_disk(&self) -> Result<u64, StoreError>;
    /// The first write or flush that failed, if one did. sled fails every later write of a
    /// database once one failed (a full disk, an I/O error): only opening it again (a new
    /// process) recovers, from what was made durable before.
    fn write_failure(&self) -> Option<String> {
        None
    }
}
