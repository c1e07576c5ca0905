//! Two SHA-1 digests computed together: a response record's block digest (head and body)
//! and its payload digest (the body) cost one pass's time instead of two. With the CPU's
//! SHA extensions the two messages' blocks go through the rounds interleaved, so the core
//! runs both dependency chains at once (a round's input is the round before's output: one
//! message alone leaves the SHA unit idle between rounds; docs/benchmarks.md, "Daemon
//! throughput", has the figures). Without the extensions (or off x86_64) each digest is
//! computed alone by the `sha1` crate.

use sha1::{Digest, Sha1};

/// A SHA-1 digest.
pub type Sha1Digest = [u8; 20];

/// The digest label of nothing (a request record's payload), [`crate::sha1_label`] of
/// [`sha1_parts`] of no bytes, spelled out so it is not computed for every record.
pub const EMPTY_SHA1_LABEL: &str = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ";

/// SHA-1 of the concatenation of `a`'s parts and of `b`'s parts.
pub fn sha1_pair(a: &[&[u8]], b: &[&[u8]]) -> (Sha1Digest, Sha1Digest) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sha")
            && std::arch::is_x86_feature_detected!("sse4.1")
            && std::arch::is_x86_feature_detected!("ssse3")
        {
            // SAFETY: the features the function is compiled for were detected just above
            return unsafe { shani::pair(a, b) };
        }
    }
    (sha1_parts(a), sha1_parts(b))
}

/// SHA-1 of the concatenation of `parts`, one message alone.
pub fn sha1_parts(parts: &[&[u8]]) -> Sha1Digest {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// A message's 64-byte blocks in order, its padding (the 0x80 byte, zeros, the bit length)
/// included: borrowed from a part when the block lies in one, gathered otherwise.
struct Blocks<'a> {
    parts: &'a [&'a [u8]],
    part: usize,
    at: usize,
    /// Bytes left before the padding.
    left: usize,
    /// The last, padded, one or two blocks, once the whole blocks are out.
    tail: [u8; 128],
    tail_blocks: usize,
    tail_next: usize,
    gathered: [u8; 64],
}

impl<'a> Blocks<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Blocks<'a> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        Blocks {
            parts,
            part: 0,
            at: 0,
            left: len,
            tail: [0; 128],
            tail_blocks: 0,
            tail_next: 0,
            gathered: [0; 64],
        }
        .with_tail(len)
    }

    /// Copy the bytes after the last whole block into `tail` and pad them (the message is
    /// not consumed: `next` hands out the whole blocks first).
    fn with_tail(mut self, len: usize) -> Blocks<'a> {
        let rest = len % 64;
        let mut skip = len - rest;
        let mut n = 0;
        for p in self.parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let bytes = &p[skip..];
            skip = 0;
            self.tail[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        }
        self.tail[n] = 0x80;
        self.tail_blocks = if rest < 56 { 1 } else { 2 };
        let end = self.tail_blocks * 64;
        let bits = (len as u64).wrapping_mul(8);
        self.tail[end - 8..end].copy_from_slice(&bits.to_be_bytes());
        self.left = len - rest;
        self
    }

    fn next(&mut self) -> Option<&[u8; 64]> {
        if self.left == 0 {
            if self.tail_next == self.tail_blocks {
                return None;
            }
            let i = self.tail_next * 64;
            self.tail_next += 1;
            return self.tail[i..i + 64].try_into().ok();
        }
        while self.at == self.parts[self.part].len() {
            self.part += 1;
            self.at = 0;
        }
        self.left -= 64;
        let p = self.parts[self.part];
        if p.len() - self.at >= 64 {
            let block = &p[self.at..self.at + 64];
            self.at += 64;
            return block.try_into().ok();
        }
        // the block spans parts (all whole blocks' bytes are there: `left` said so)
        let mut n = 0;
        while n < 64 {
            let p = self.parts[self.part];
            let take = (p.len() - self.at).min(64 - n);
            self.gathered[n..n + take].copy_from_slice(&p[self.at..self.at + take]);
            n += take;
            self.at += take;
            if self.at == p.len() && n < 64 {
                self.part += 1;
                self.at = 0;
            }
        }
        Some(&self.gathered)
    }
}

#[cfg(target_arch = "x86_64")]
mod shani {
    use std::arch::x86_64::*;

    use super::{Blocks, Sha1Digest};

    const INITIAL: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];

    /// One message's chaining value in the registers' layout: A B C D in one vector (A
    /// highest), E in the highest lane of another.
    #[derive(Clone, Copy)]
    struct State {
        abcd: __m128i,
        e: __m128i,
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn initial() -> State {
        let [a, b, c, d, e] = INITIAL.map(|w| w as i32);
        State {
            abcd: _mm_set_epi32(a, b, c, d),
            e: _mm_set_epi32(e, 0, 0, 0),
        }
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn digest_of(s: State) -> Sha1Digest {
        let words = [
            _mm_extract_epi32(s.abcd, 3),
            _mm_extract_epi32(s.abcd, 2),
            _mm_extract_epi32(s.abcd, 1),
            _mm_extract_epi32(s.abcd, 0),
            _mm_extract_epi32(s.e, 3),
        ];
        let mut out = [0u8; 20];
        for (chunk, w) in out.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&(w as u32).to_be_bytes());
        }
        out
    }

    /// A block's sixteen big-endian words as four vectors.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn words(block: &[u8; 64]) -> [__m128i; 4] {
        let swap = _mm_set_epi64x(0x0001_0203_0405_0607, 0x0809_0A0B_0C0D_0E0F);
        let p = block.as_ptr() as *const __m128i;
        // SAFETY: four unaligned 16-byte loads inside the 64-byte block
        unsafe {
            [
                _mm_shuffle_epi8(_mm_loadu_si128(p), swap),
                _mm_shuffle_epi8(_mm_loadu_si128(p.add(1)), swap),
                _mm_shuffle_epi8(_mm_loadu_si128(p.add(2)), swap),
                _mm_shuffle_epi8(_mm_loadu_si128(p.add(3)), swap),
            ]
        }
    }

    /// The 80 rounds as 20 groups of four over `LANES` messages, each group's instructions
    /// for every lane side by side. Group g takes message vector w[g % 4] (from group 4 on
    /// computed from the four before it) and round function g / 5.
    macro_rules! rounds {
        ($states:expr, $blocks:expr, $lanes:literal) => {{
            let zero = _mm_setzero_si128();
            let mut w: [[__m128i; 4]; $lanes] = [[zero; 4]; $lanes];
            let mut x: [__m128i; $lanes] = [zero; $lanes];
            let mut e: [__m128i; $lanes] = [zero; $lanes];
            for l in 0..$lanes {
                w[l] = words($blocks[l]);
                x[l] = $states[l].abcd;
                e[l] = _mm_add_epi32($states[l].e, w[l][0]);
            }
            macro_rules! group {
                ($g:literal) => {
                    for l in 0..$lanes {
                        if $g >= 4 {
                            let m = _mm_sha1msg1_epu32(w[l][$g % 4], w[l][($g + 1) % 4]);
                            let m = _mm_xor_si128(m, w[l][($g + 2) % 4]);
                            w[l][$g % 4] = _mm_sha1msg2_epu32(m, w[l][($g + 3) % 4]);
                        }
                        let next_e = if $g == 0 {
                            e[l]
                        } else {
                            _mm_sha1nexte_epu32(e[l], w[l][$g % 4])
                        };
                        let rounds = _mm_sha1rnds4_epu32(x[l], next_e, $g / 5);
                        e[l] = x[l];
                        x[l] = rounds;
                    }
                };
            }
            group!(0);
            group!(1);
            group!(2);
            group!(3);
            group!(4);
            group!(5);
            group!(6);
            group!(7);
            group!(8);
            group!(9);
            group!(10);
            group!(11);
            group!(12);
            group!(13);
            group!(14);
            group!(15);
            group!(16);
            group!(17);
            group!(18);
            group!(19);
            for l in 0..$lanes {
                $states[l].abcd = _mm_add_epi32($states[l].abcd, x[l]);
                $states[l].e = _mm_sha1nexte_epu32(e[l], $states[l].e);
            }
        }};
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn two(states: &mut [State; 2], a: &[u8; 64], b: &[u8; 64]) {
        let blocks = [a, b];
        rounds!(states, blocks, 2);
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    unsafe fn one(states: &mut [State; 1], a: &[u8; 64]) {
        let blocks = [a];
        rounds!(states, blocks, 1);
    }

    /// # Safety
    /// The CPU must have the SHA, SSE4.1 and SSSE3 extensions.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub(super) unsafe fn pair(a: &[&[u8]], b: &[&[u8]]) -> (Sha1Digest, Sha1Digest) {
        let mut blocks = (Blocks::new(a), Blocks::new(b));
        let mut states = [initial(), initial()];
        loop {
            match (blocks.0.next(), blocks.1.next()) {
                (Some(x), Some(y)) => two(&mut states, x, y),
                (Some(x), None) => {
                    let mut s = [states[0]];
                    one(&mut s, x);
                    while let Some(x) = blocks.0.next() {
                        one(&mut s, x);
                    }
                    states[0] = s[0];
                    break;
                }
                (None, Some(y)) => {
                    let mut s = [states[1]];
                    one(&mut s, y);
                    while let Some(y) = blocks.1.next() {
                        one(&mut s, y);
                    }
                    states[1] = s[0];
                    break;
                }
                (None, None) => break,
            }
        }
        (digest_of(states[0]), digest_of(states[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(parts: &[&[u8]]) -> Sha1Digest {
        Sha1::digest(parts.concat()).into()
    }

    #[test]
    fn lengths_around_the_padding_edges_give_the_reference_digests() {
        let data: Vec<u8> = (0..400u32).map(|i| (i * 7 % 256) as u8).collect();
        for len in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 191, 300] {
            for split in [0, 1, 30, 63, 64, len / 2, len] {
                let split = split.min(len);
                let parts: [&[u8]; 2] = [&data[..split], &data[split..len]];
                let other: [&[u8]; 1] = [&data[..len / 3]];
                let (x, y) = sha1_pair(&parts, &other);
                assert_eq!(x, reference(&parts), "len {len} split {split}");
                assert_eq!(y, reference(&other), "len {len}");
                assert_eq!(sha1_parts(&parts), reference(&parts));
            }
        }
        // the digest of nothing, as the request records carry it
        let (empty, _) = sha1_pair(&[], &[b"abc"]);
        assert_eq!(crate::sha1_label(&empty), EMPTY_SHA1_LABEL);
        assert_eq!(crate::sha1_label(&sha1_parts(&[])), EMPTY_SHA1_LABEL);
    }

    proptest! {
        #[test]
        fn any_two_messages_in_any_parts_give_the_reference_digests(
            a in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..6),
            b in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..700), 0..4),
        ) {
            let a: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
            let b: Vec<&[u8]> = b.iter().map(Vec::as_slice).collect();
            let (x, y) = sha1_pair(&a, &b);
            prop_assert_eq!(x, reference(&a));
            prop_assert_eq!(y, reference(&b));
        }
    }
}
