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
        self.bytes.extend_from_slice(encoded);
        self.ends.push(self.bytes.len() as u32);
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
