//! The index that finds a path's candidate rules without trying every rule: a sorted array
//! of literal prefixes (one binary search and a walk up a parent chain), and for rules
//! that start with a wildcard an Aho-Corasick automaton over their longest literal piece,
//! built lazily once a policy is checked often enough.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::*;

/// A literal prefix shared by one or more rules, in the sorted prefix array.
#[derive(Clone, Copy, Debug)]
pub(super) struct PrefixEntry {
    pub(super) start: u32,
    pub(super) len: u32,
    /// The longest other entry that is a prefix of this one.
    pub(super) parent: u32,
    /// Range of rule ids in `prefix_rule_ids`, ascending.
    pub(super) rules_start: u32,
    pub(super) rules_end: u32,
}

pub(super) const NO_PARENT: u32 = u32::MAX;

/// Below this many floating rules, trying each in turn, behind its bigram filter, beats
/// scanning the path with an automaton (cnet, 37 floating rules: 2.6 M -> 4.4 M checks/s).
pub(super) const MIN_RULES_FOR_AUTOMATON: usize = 48;

/// The floating rules' automaton, built on the first check that needs it, because building
/// one costs more than parsing a small file: first a contiguous NFA (cheap to build), then,
/// once the policy has proved busy, a DFA (faster to scan).
#[derive(Debug, Default)]
pub(super) struct LazyAutomaton {
    pub(super) nfa: OnceLock<Option<AhoCorasick>>,
    pub(super) dfa: OnceLock<Option<AhoCorasick>>,
    /// Checks that needed the automaton before the DFA existed.
    pub(super) uses: AtomicU32,
}

/// Checks served by the NFA before a DFA is built.
pub(super) const DFA_AFTER_CHECKS: u32 = 64;

/// Above this many pieces a DFA is large enough to scan slower than the NFA (cache misses).
pub(super) const DFA_MAX_PIECES: usize = 100;

impl Clone for LazyAutomaton {
    fn clone(&self) -> Self {
        LazyAutomaton {
            nfa: self.nfa.clone(),
            dfa: self.dfa.clone(),
            uses: AtomicU32::new(self.uses.load(Ordering::Relaxed)),
        }
    }
}

/// Candidate lookup for the rules of one crawler.
#[derive(Clone, Debug, Default)]
pub(super) struct MatchIndex {
    pub(super) prefixes: Vec<PrefixEntry>,
    pub(super) prefix_rule_ids: Vec<u32>,
    /// Floating rules (starting with `*` or `/*`) keyed by their longest literal piece.
    pub(super) floating: LazyAutomaton,
    /// The literal piece (start, len in the arena) of each automaton pattern.
    pub(super) floating_pieces: Vec<(u32, u32)>,
    pub(super) floating_rule_ids: Vec<u32>,
    /// Range in `floating_rule_ids` per automaton pattern.
    pub(super) floating_ranges: Vec<(u32, u32)>,
    /// The best-ranked floating rule: once a better match is known, skip the automaton.
    pub(super) floating_min_id: u32,
    /// Floating rules tried on every check, ascending: those with no literal piece long
    /// enough to index, or all of them when they are too few to be worth an automaton.
    pub(super) always: Vec<u32>,
    /// Per rule id: the [`bigram_set`] of its literal pieces. A rule can match only a
    /// path whose set holds all of these, which rules most wildcard rules out in a few
    /// instructions.
    pub(super) rule_bigrams: Vec<u128>,
    /// Per entry of `prefixes`: its first 8 bytes as a big-endian number (zero-padded),
    /// so that the binary search mostly compares integers.
    pub(super) prefix_keys: Vec<u64>,
}

impl MatchIndex {
    pub(super) fn build(arena: &[u8], rules: &[Rule]) -> MatchIndex {
        let text = |r: &Rule| &arena[r.start as usize..(r.start + r.len) as usize];
        let mut anchored: Vec<(&[u8], u32, u32)> = Vec::new(); // (prefix, start, rule id)
        let mut floating: HashMap<&[u8], Vec<u32>> = HashMap::new();
        let mut always = Vec::new();
        for (id, rule) in rules.iter().enumerate() {
            let id = id as u32;
            let pattern = text(rule);
            let prefix_len = literal_prefix_len(pattern);
            let prefix = &pattern[..prefix_len];
            let has_star = prefix_len < pattern.len() && pattern[prefix_len] == b'*';
            // Rules starting `*` or `/*` would sit at a prefix every path has.
            let floats = prefix.is_empty() || (prefix == b"/" && has_star);
            if !floats {
                anchored.push((prefix, rule.start, id));
                continue;
            }
            // A floating rule: find its longest literal piece to look it up by.
            let body = pattern.strip_suffix(b"$").unwrap_or(pattern);
            let piece = body
                .split(|&b| b == b'*')
                .max_by_key(|p| p.len())
                .unwrap_or(&[]);
            if piece.len() >= 2 {
                floating.entry(piece).or_default().push(id);
            } else {
                always.push(id);
            }
        }

        // Sorted, de-duplicated prefixes, each with its rules (ascending ids) and parent.
        anchored.sort_by(|a, b| a.0.cmp(b.0).then(a.2.cmp(&b.2)));
        let mut prefixes: Vec<PrefixEntry> = Vec::new();
        let mut prefix_rule_ids = Vec::with_capacity(anchored.len());
        let mut chain: Vec<u32> = Vec::new();
        let mut previous: Option<&[u8]> = None;
        for &(prefix, start, id) in &anchored {
            if previous != Some(prefix) {
                let at = |e: &PrefixEntry| &arena[e.start as usize..(e.start + e.len) as usize];
                while let Some(&top) = chain.last() {
                    if prefix.starts_with(at(&prefixes[top as usize])) {
                        break;
                    }
                    chain.pop();
                }
                let parent = chain.last().copied().unwrap_or(NO_PARENT);
                chain.push(prefixes.len() as u32);
                prefixes.push(PrefixEntry {
                    start,
                    len: prefix.len() as u32,
                    parent,
                    rules_start: prefix_rule_ids.len() as u32,
                    rules_end: prefix_rule_ids.len() as u32,
                });
                previous = Some(prefix);
            }
            prefix_rule_ids.push(id);
            if let Some(last) = prefixes.last_mut() {
                last.rules_end += 1;
            }
        }

        let mut floating: Vec<(&[u8], Vec<u32>)> = floating.into_iter().collect();
        let floating_count: usize = floating.iter().map(|(_, ids)| ids.len()).sum();
        if floating_count < MIN_RULES_FOR_AUTOMATON {
            // Too few to be worth an automaton: trying each is cheaper than building one.
            always.extend(floating.drain(..).flat_map(|(_, ids)| ids));
        }
        always.sort_unstable();
        floating.sort_by_key(|(_, ids)| ids[0]);
        let mut floating_rule_ids = Vec::new();
        let mut floating_ranges = Vec::with_capacity(floating.len());
        let mut floating_pieces = Vec::with_capacity(floating.len());
        for (piece, ids) in &floating {
            let from = floating_rule_ids.len() as u32;
            floating_rule_ids.extend_from_slice(ids);
            floating_ranges.push((from, floating_rule_ids.len() as u32));
            // The piece is a sub-slice of the arena: record where.
            let start = piece.as_ptr() as usize - arena.as_ptr() as usize;
            floating_pieces.push((start as u32, piece.len() as u32));
        }
        let floating_min_id = floating_rule_ids.iter().copied().min().unwrap_or(u32::MAX);
        // Only rules that go through `glob_match` use theirs: no time spent on the others
        // while parsing (an empty set filters nothing).
        let rule_bigrams = rules
            .iter()
            .map(|rule| {
                if rule.shape != Shape::Glob {
                    return 0;
                }
                let pattern = text(rule);
                let body = pattern.strip_suffix(b"$").unwrap_or(pattern);
                body.split(|&b| b == b'*')
                    .fold(0, |set, piece| set | bigram_set(piece))
            })
            .collect();
        let prefix_keys = prefixes
            .iter()
            .map(|e| key8(&arena[e.start as usize..(e.start + e.len) as usize]))
            .collect();
        MatchIndex {
            rule_bigrams,
            prefix_keys,
            prefixes,
            prefix_rule_ids,
            floating: LazyAutomaton::default(),
            floating_pieces,
            floating_rule_ids,
            floating_ranges,
            floating_min_id,
            always,
        }
    }

    /// The automaton over the floating rules' pieces, built once, on first use.
    pub(super) fn automaton(&self, arena: &[u8]) -> Option<&AhoCorasick> {
        if self.floating_pieces.is_empty() {
            return None;
        }
        let lazy = &self.floating;
        let build = |kind: AhoCorasickKind| {
            let pieces = self
                .floating_pieces
                .iter()
                .map(|&(start, len)| &arena[start as usize..(start + len) as usize]);
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .kind(Some(kind))
                .build(pieces)
                .ok()
        };
        let dfa = match lazy.dfa.get() {
            Some(dfa) => dfa.as_ref(),
            None if self.floating_pieces.len() <= DFA_MAX_PIECES
                && lazy.uses.fetch_add(1, Ordering::Relaxed) >= DFA_AFTER_CHECKS =>
            {
                lazy.dfa
                    .get_or_init(|| build(AhoCorasickKind::DFA))
                    .as_ref()
            }
            None => None,
        };
        // A DFA can exceed the crate's size limits: the NFA then serves every check.
        dfa.or_else(|| {
            lazy.nfa
                .get_or_init(|| build(AhoCorasickKind::ContiguousNFA))
                .as_ref()
        })
    }

    /// The longest indexed prefix that is a prefix of `path`; the rest follow via `parent`.
    pub(super) fn deepest_prefix_of(&self, arena: &[u8], path: &[u8]) -> Option<u32> {
        let at = |e: &PrefixEntry| &arena[e.start as usize..(e.start + e.len) as usize];
        // The last entry <= path: every entry that is a prefix of path sorts <= path.
        // Keys order like the texts when they differ (see `key8`).
        let path_key = key8(path);
        let mut low = 0;
        let mut high = self.prefixes.len();
        while low < high {
            let mid = low + (high - low) / 2;
            let key = self.prefix_keys[mid];
            let entry_le_path = if key != path_key {
                key < path_key
            } else {
                at(&self.prefixes[mid]) <= path
            };
            if entry_le_path {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let mut candidate = low.checked_sub(1)? as u32;
        let shared = common_prefix_len(at(&self.prefixes[candidate as usize]), path);
        loop {
            let entry = &self.prefixes[candidate as usize];
            if entry.len as usize <= shared {
                return Some(candidate);
            }
            if entry.parent == NO_PARENT {
                return None;
            }
            candidate = entry.parent;
        }
    }
}

/// The first 8 bytes of `bytes`, big-endian, zero-padded. If two keys differ, the texts
/// compare the same way: the first differing byte is a real byte of both, or the end of
/// the shorter text (padding 0) against a byte of the longer one.
#[inline]
pub(super) fn key8(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(chunk) => u64::from_be_bytes(*chunk),
        None => {
            let mut buf = [0u8; 8];
            buf[..bytes.len()].copy_from_slice(bytes);
            u64::from_be_bytes(buf)
        }
    }
}

/// A 128-bit set of the byte pairs (hashed) that occur in `bytes`. A pattern's literal
/// pieces occur in every path it matches, so must their pairs: a pattern whose set is not
/// contained in the path's cannot match.
#[inline]
pub(super) fn bigram_set(bytes: &[u8]) -> u128 {
    bytes.windows(2).fold(0u128, |set, pair| {
        let hash = (u32::from(pair[0]) << 8 | u32::from(pair[1])).wrapping_mul(0x9E37_79B1);
        set | 1u128 << (hash >> 25)
    })
}

pub(super) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
