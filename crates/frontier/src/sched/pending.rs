//! A host's newest queue entries, held in memory (as their encoded bytes) until the intake
//! log is folded into stored segments.

/// A host's newest queue entries, sequences `first..first + len`, held in memory until the
/// intake log is folded into segments (they are durable in the log meanwhile).
///
/// One block a host, not two lists: at a fold's start a million hosts hold four or five
/// entries each, and a second list cost each of them another allocation (its 16-byte header
/// and its size class's rounding) and another 8 bytes in the host (docs/benchmarks.md,
/// "Memory at 10M URLs over 1M hosts"). The block holds, in order: the number of entries
/// (u32), the entries' bytes from the front, and each
/// entry's end offset (u32) from the back, the first entry's last, so both grow towards the
/// free middle and an entry is found by its index without a scan.
#[derive(Debug, Default)]
pub struct Pending {
    /// Sequence of the first entry.
    pub first: u64,
    // thin: a million hosts each hold one, most of them empty between folds. Its length is
    // the block's size: every byte of it is initialised.
    block: thin_vec::ThinVec<u8>,
}

/// The block's header: the number of entries.
const HEADER: usize = 4;
/// An entry's end offset, at the block's back.
const END: usize = 4;

fn read_u32(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w) as usize
}

fn write_u32(b: &mut [u8], at: usize, v: usize) {
    // the block never reaches 4 GiB: a host's entries between two folds are bounded by the
    // intake buffer (64 MiB by default)
    let v = u32::try_from(v).unwrap_or(u32::MAX);
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

impl Pending {
    /// Empty, starting at `first`.
    pub fn starting_at(first: u64) -> Pending {
        Pending {
            first,
            block: thin_vec::ThinVec::new(),
        }
    }
    /// Sequence after the last entry.
    pub fn end(&self) -> u64 {
        self.first + self.len() as u64
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        if self.block.is_empty() {
            0
        } else {
            read_u32(&self.block, 0)
        }
    }
    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Length of the entries' bytes: the last entry's end.
    fn data_len(&self) -> usize {
        match self.len() {
            0 => 0,
            n => self.end_of(n - 1),
        }
    }
    /// End offset (within the entries' bytes) of entry `i`, which must exist.
    fn end_of(&self, i: usize) -> usize {
        read_u32(&self.block, self.block.len() - END * (i + 1))
    }
    /// Append an encoded entry (it gets sequence [`Pending::end`]).
    pub fn push(&mut self, encoded: &[u8]) {
        let n = self.len();
        let data = self.data_len();
        let need = HEADER + data + encoded.len() + END * (n + 1);
        if need > self.block.len() {
            self.grow_to(need, n, data);
        }
        let at = HEADER + data;
        self.block[at..at + encoded.len()].copy_from_slice(encoded);
        let data = data + encoded.len();
        let back = self.block.len() - END * (n + 1);
        write_u32(&mut self.block, back, data);
        write_u32(&mut self.block, 0, n + 1);
    }
    /// A block of at least `need` bytes (an eighth more than now, at least: see
    /// [`grow_gently`]), the header and entries at its front and the end offsets at its back.
    fn grow_to(&mut self, need: usize, n: usize, data: usize) {
        let old = self.block.len();
        let size = need.max(old.saturating_add(old / 8));
        let mut block = thin_vec::ThinVec::with_capacity(size);
        if old == 0 {
            block.resize(size, 0);
        } else {
            block.extend_from_slice(&self.block[..HEADER + data]);
            block.resize(size - END * n, 0);
            block.extend_from_slice(&self.block[old - END * n..]);
        }
        self.block = block;
    }
    /// Bytes allocated for the entries and their end offsets (without the block's headers).
    #[cfg(test)]
    pub fn capacity_bytes(&self) -> usize {
        self.block.len().saturating_sub(HEADER)
    }
    /// The encoded entry with sequence `seq`, if held.
    pub fn get(&self, seq: u64) -> Option<&[u8]> {
        let i = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        if i >= self.len() {
            return None;
        }
        Some(self.entry(i))
    }
    /// Entry `i`, which must exist.
    fn entry(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.end_of(i - 1) };
        &self.block[HEADER + start..HEADER + self.end_of(i)]
    }
    /// Encoded entries with sequences `from..end()` (from clamped to the held range).
    pub fn from(&self, from: u64) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        let n = self.len();
        let skip = (from.saturating_sub(self.first) as usize).min(n);
        (skip..n).map(move |i| self.entry(i))
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
    fn entries_read_back_and_their_block_grows_by_an_eighth() {
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

    proptest::proptest! {
        /// Against a list of entries: whatever their sizes (empty ones too), every entry
        /// reads back at its sequence and from any sequence on, as they grow the block.
        #[test]
        fn the_block_reads_back_what_a_list_of_entries_holds(
            first in 0u64..1_000,
            entries in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..300), 0..200),
            from in 0u64..1_300,
        ) {
            let mut p = Pending::starting_at(first);
            for (i, e) in entries.iter().enumerate() {
                p.push(e);
                proptest::prop_assert_eq!(p.len(), i + 1);
                proptest::prop_assert_eq!(p.get(first + i as u64), Some(&e[..]));
            }
            proptest::prop_assert_eq!(p.end(), first + entries.len() as u64);
            for (i, e) in entries.iter().enumerate() {
                proptest::prop_assert_eq!(p.get(first + i as u64), Some(&e[..]));
            }
            proptest::prop_assert_eq!(p.get(first + entries.len() as u64), None);
            if first > 0 {
                proptest::prop_assert_eq!(p.get(first - 1), None);
            }
            let skip = (from.saturating_sub(first) as usize).min(entries.len());
            let got: Vec<&[u8]> = p.from(from).collect();
            let want: Vec<&[u8]> = entries[skip..].iter().map(|e| &e[..]).collect();
            proptest::prop_assert_eq!(got, want);
            p.reset(first + 7);
            proptest::prop_assert!(p.is_empty());
            proptest::prop_assert_eq!(p.end(), first + 7);
        }
    }
}
