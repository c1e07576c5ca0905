//! Shared segments ("packs"): a fold puts the entries of hosts with only a few pending
//! (less than a quarter of a value's worth, [`PACK_BELOW_BYTES`]) into values shared by
//! many hosts, `p` + pack number, in the intake-log record format (host id, sequence,
//! entry), instead of a segment key per host. Spread over millions of hosts a fold finds
//! one URL a host: one key each put 3M keys into sled at once and its memory went from 1.3
//! to 4.4 GiB (docs/benchmarks.md, "Where it is not flat"); packed, dozens of hosts share a
//! key, and at a million hosts of about four URLs a fold the submit writes a fifth less.
//!
//! A host points into a pack with a [`SegRef`] whose fold is marked as a pack
//! ([`SegRef::pack_no`]); the pack counts the hosts pointing into it and goes once the
//! last has handed its entries out. The counts are rebuilt at open from the packs
//! themselves.

use std::collections::HashMap;

use thin_vec::ThinVec;

use crate::sched::hosts::SegRef;
use crate::store::codec::CodecError;
use crate::store::keys;
use crate::store::packed;

/// A host whose pending entries at a fold take fewer bytes than this shares a pack.
pub(crate) const PACK_BELOW_BYTES: usize = packed::VALUE_TARGET_BYTES / 4;

/// The packs in the store and how many hosts point into each.
#[derive(Debug, Default)]
pub(crate) struct Packs {
    refs: HashMap<u32, u32>,
}

impl Packs {
    /// A host points into pack `no`.
    pub(crate) fn add_ref(&mut self, no: u32) {
        *self.refs.entry(no).or_default() += 1;
    }

    /// The key to delete now that a host no longer points into `seg`: a host's own
    /// segment's, or a pack's once no host points into it.
    pub(crate) fn release(&mut self, seg: &SegRef, id: u64) -> Option<Vec<u8>> {
        let Some(no) = seg.pack_no() else {
            return Some(keys::segment_key(seg, id));
        };
        match self.refs.get_mut(&no) {
            Some(n) if *n > 1 => {
                *n -= 1;
                None
            }
            _ => {
                self.refs.remove(&no);
                Some(keys::pack(no))
            }
        }
    }

    /// Packs in the store with a host pointing into them.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.refs.len()
    }
}

/// A pack being filled by a fold.
pub(crate) struct OpenPack {
    pub(crate) no: u32,
    buf: Vec<u8>,
}

impl OpenPack {
    pub(crate) fn new(no: u32) -> OpenPack {
        OpenPack {
            no,
            buf: packed::intake_record_start(),
        }
    }

    /// Whether `bytes` more would take it past the size every packed value stays under.
    pub(crate) fn full_for(&self, bytes: usize) -> bool {
        self.buf.len() > 1 && self.buf.len() + bytes > packed::VALUE_TARGET_BYTES
    }

    /// Add host `id`'s entries from sequence `first` on; the bytes they take.
    pub(crate) fn push(&mut self, id: u64, first: u64, entries: &[&[u8]]) -> usize {
        let before = self.buf.len();
        for (i, e) in entries.iter().enumerate() {
            packed::intake_record_push(&mut self.buf, id, first + i as u64, e);
        }
        self.buf.len() - before
    }

    /// Its key and value.
    pub(crate) fn finish(self) -> (Vec<u8>, Vec<u8>) {
        (keys::pack(self.no), self.buf)
    }
}

/// The entry at `seq` of host `id` in a pack's value (read on every dispatch from a pack:
/// the walk stops at it and allocates nothing).
pub(crate) fn entry_in(value: &[u8], id: u64, seq: u64) -> Result<Option<&[u8]>, CodecError> {
    for entry in packed::intake_entries_iter(value)? {
        let (h, s, e) = entry?;
        if h == id && s == seq {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// The hosts' places in pack `no` (its value `value`), as segment references by host:
/// each host's entries in a pack are consecutive.
pub(crate) fn refs_in(
    no: u32,
    value: &[u8],
    into: &mut HashMap<u64, ThinVec<SegRef>>,
    packs: &mut Packs,
) -> Result<(), CodecError> {
    let mut last: Option<(u64, u64)> = None;
    for entry in packed::intake_entries_iter(value)? {
        let (id, seq, _) = entry?;
        match last {
            Some((h, end)) if h == id && end == seq => {
                if let Some(s) = into.get_mut(&id).and_then(|v| v.last_mut()) {
                    s.len += 1;
                }
            }
            _ => {
                into.entry(id).or_default().push(SegRef {
                    first: seq,
                    len: 1,
                    fold: SegRef::pack(no),
                });
                packs.add_ref(no);
            }
        }
        last = Some((id, seq + 1));
    }
    Ok(())
}
