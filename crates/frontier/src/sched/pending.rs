//! A host's newest queue entries, held in memory (as their encoded bytes) until the intake
//! log is folded into stored segments.

/// A host's newest queue entries, sequences `first..first + len`, held in memory until the
/// intake log is folded into segments (they are durable in the log meanwhile).
#[derive(Debug, Default)]
pub struct Pending {
    /// Sequence of the first entry.
    pub first: u64,
    // thin: a million hosts each hold one, most of them empty between folds
    ends: thin_vec::ThinVec<u32>,
    bytes: thin_vec::ThinVec<u8>,
}

impl Pending {
    /// Empty, starting at `first`.
    pub fn starting_at(first: u64) -> Pending {
        Pending {
            first,
            ends: thin_vec::ThinVec::new(),
            bytes: thin_vec::ThinVec::new(),
        }
    }
    /// Sequence after the last entry.
    pub fn end(&self) -> u64 {
        self.first + self.ends.len() as u64
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// Append an encoded entry (it gets sequence [`Pending::end`]).
    pub fn push(&mut self, encoded: &[u8]) {
        grow_gently(&mut self.bytes, encoded.len());
        self.bytes.extend_from_slice(encoded);
        grow_gently(&mut self.ends, 1);
        self.ends.push(self.bytes.len() as u32);
    }
    /// Bytes allocated for the entries (both lists' capacity, without their headers).
    #[cfg(test)]
    pub fn capacity_bytes(&self) -> usize {
        self.bytes.capacity() + 4 * self.ends.capacity()
    }
    /// The encoded entry with sequence `seq`, if held.
    pub fn get(&self, seq: u64) -> Option<&[u8]> {
        let i = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.bytes.get(start..end)
    }
    /// Encoded entries with sequences `from..end()` (from clamped to the held range).
    pub fn from(&self, from: u64) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        let skip = (from.saturating_sub(self.first) as usize).min(self.ends.len());
        (skip..self.ends.len()).map(move |i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            &self.bytes[start..self.ends[i] as usize]
        })
    }
    /// Forget everything; the next entry gets sequence `first`.
    pub fn reset(&mut self, first: u64) {
        *self = Pending::starting_at(first);
    }
}

/// Make room for `more` items, growing by an eighth instead of doubling (from 4). At a fold
/// a million hosts hold four or five entries each, and doubling left about 40 % of what they
/// had allocated empty (heaptrack at 10M URLs over 1M hosts: 395 MB, 98 bytes an entry of
/// about 60); a host's segment list, one segment per fold for most hosts, took room for 4.
/// The allocator's size classes add their own rounding on top, and growing a block within
/// its class costs no copy.
pub(crate) fn grow_gently<T>(v: &mut thin_vec::ThinVec<T>, more: usize) {
    let need = v.len().saturating_add(more);
    if need > v.capacity() {
        let target = need.max(v.capacity().saturating_add(v.capacity() / 8));
        v.reserve_exact(target - v.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> Vec<u8> {
        format!("entry {i} {}", "x".repeat(i % 50)).into_bytes()
    }

    /// A host's few entries take what they hold; many take at most an eighth more; every
    /// entry reads back at its sequence through all that growth.
    #[test]
    fn entries_read_back_and_their_lists_grow_by_an_eighth() {
        let mut p = Pending::starting_at(7);
        let mut held = 0;
        for i in 0..5 {
            p.push(&entry(i));
            held += entry(i).len() + 4;
            assert_eq!(p.capacity_bytes(), held, "after {} entries", i + 1);
        }
        for i in 5..20_000 {
            p.push(&entry(i));
            held += entry(i).len() + 4;
        }
        assert!(
            p.capacity_bytes() <= held + held / 8 + 64,
            "{} bytes allocated for {held}",
            p.capacity_bytes()
        );
        for i in 0..20_000 {
            assert_eq!(p.get(7 + i as u64), Some(&entry(i)[..]));
        }
        assert_eq!(p.get(7 + 20_000), None);
        assert_eq!(p.from(7 + 19_998).count(), 2);
        assert_eq!(p.end(), 7 + 20_000);
    }
}
