//! A gzip body that arrived whole, decoded in one call by libdeflate, faster than
//! streaming it through flate2 (docs/benchmarks.md, "Decoding a gzip body whole"). Only a
//! body of exactly one gzip member whose announced size fits the cap is decoded here;
//! anything else (more members, an announced size over the cap, corrupt data) is left to
//! the streaming decoder, which cuts at the cap and reports errors as before.

use std::cell::RefCell;
use std::ptr::NonNull;

use libdeflate_sys::{
    libdeflate_alloc_decompressor, libdeflate_decompressor, libdeflate_free_decompressor,
    libdeflate_gzip_decompress_ex, libdeflate_result_LIBDEFLATE_SUCCESS,
};

/// One libdeflate decompressor (about 10 KB of tables), reused by its thread.
struct Decompressor(NonNull<libdeflate_decompressor>);

impl Decompressor {
    fn new() -> Option<Decompressor> {
        // SAFETY: no arguments; a null return (out of memory) is checked.
        NonNull::new(unsafe { libdeflate_alloc_decompressor() }).map(Decompressor)
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: allocated by libdeflate_alloc_decompressor, freed once, here.
        unsafe { libdeflate_free_decompressor(self.0.as_ptr()) }
    }
}

thread_local! {
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

/// The most deflate expands its input: a 258-byte match from a code of one bit, plus the
/// bits around it, is a little over 1 032 to 1 (zlib's technical notes).
const MAX_DEFLATE_RATIO: usize = 1032;

/// Gzip header, shortest deflate stream and trailer.
const SMALLEST_MEMBER: usize = 18;

/// `wire` decoded, when it is exactly one gzip member whose decoded size (its trailer's
/// ISIZE, checked by libdeflate with its CRC-32) is at most `cap`; `None` otherwise.
pub(crate) fn gunzip_whole(wire: &[u8], cap: usize) -> Option<Vec<u8>> {
    let len = wire.len();
    if len < SMALLEST_MEMBER {
        return None;
    }
    let mut trailer_size = [0u8; 4];
    trailer_size.copy_from_slice(&wire[len - 4..]);
    // the server's word, mod 2^32: only an upper bound on what is allocated, since
    // libdeflate writes no more than the buffer holds and the size is checked after
    let announced = u32::from_le_bytes(trailer_size) as usize;
    // nor more than deflate can expand this input to: a lying trailer does not get its
    // size allocated
    if announced > cap || announced > len.saturating_mul(MAX_DEFLATE_RATIO) {
        return None;
    }
    // not zeroed: libdeflate writes what it produces, and only that much is kept
    let mut out: Vec<u8> = Vec::with_capacity(announced);
    let (mut consumed, mut produced) = (0usize, 0usize);
    let ok = DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Decompressor::new();
        }
        let Some(d) = cell.as_ref() else {
            return false;
        };
        // SAFETY: `wire` is a live slice of `len` bytes and `out` has room for `announced`;
        // libdeflate reads at most `len` bytes, writes at most `announced` and sets the two
        // counts; the decompressor is this thread's own, used by one call at a time.
        let result = unsafe {
            libdeflate_gzip_decompress_ex(
                d.0.as_ptr(),
                wire.as_ptr().cast(),
                len,
                out.spare_capacity_mut().as_mut_ptr().cast(),
                announced,
                &mut consumed,
                &mut produced,
            )
        };
        result == libdeflate_result_LIBDEFLATE_SUCCESS
    });
    // one member, all of it: a second member (or trailing bytes) is the streaming
    // decoder's, which reads every member
    if !(ok && consumed == len && produced == announced) {
        return None;
    }
    // SAFETY: libdeflate succeeded having written `produced` (== `announced`, the
    // capacity) bytes from the start of `out`.
    unsafe { out.set_len(produced) };
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::gunzip_whole;
    use proptest::prelude::*;
    use std::io::{Read, Write};

    fn gzip(data: &[u8], level: u32) -> Vec<u8> {
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        g.write_all(data).unwrap();
        g.finish().unwrap()
    }

    /// Every member, as the streaming decoder reads them.
    fn reference(wire: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(wire)
            .read_to_end(&mut out)
            .ok()?;
        Some(out)
    }

    #[test]
    fn one_member_is_decoded_and_anything_else_left_to_the_stream() {
        let page = b"<p>a page, gzip-encoded by its server</p>\n".repeat(500);
        let one = gzip(&page, 6);
        assert_eq!(gunzip_whole(&one, 1 << 20), Some(page.clone()));
        // decoded size over the cap: the stream cuts it there
        assert_eq!(gunzip_whole(&one, page.len() - 1), None);
        assert_eq!(gunzip_whole(&one, page.len()), Some(page.clone()));
        // two members, the second the same as the first: only the stream reads both
        let two = [one.clone(), one.clone()].concat();
        assert_eq!(gunzip_whole(&two, 1 << 20), None);
        assert_eq!(reference(&two), Some([page.clone(), page.clone()].concat()));
        // trailing bytes, a cut member, a corrupt one, not gzip at all
        assert_eq!(
            gunzip_whole(&[one.clone(), b"junk".to_vec()].concat(), 1 << 20),
            None
        );
        assert_eq!(gunzip_whole(&one[..one.len() - 1], 1 << 20), None);
        let mut corrupt = one.clone();
        corrupt[one.len() / 2] ^= 0x55;
        assert_eq!(gunzip_whole(&corrupt, 1 << 20), None);
        assert_eq!(gunzip_whole(b"plainly not gzip at all", 1 << 20), None);
        assert_eq!(gunzip_whole(&gzip(b"", 6), 0), Some(Vec::new()));
        // deflate at its densest (a mebibyte of one byte) is within the ratio bound
        let zeros = vec![0u8; 1 << 20];
        let dense = gzip(&zeros, 9);
        assert!(dense.len() * 990 < zeros.len(), "{}", dense.len());
        assert_eq!(gunzip_whole(&dense, 1 << 20), Some(zeros));
    }

    proptest! {
        /// Whatever the bytes: what is decoded here is what the streaming decoder gives,
        /// and a single member within the cap is always decoded here.
        #[test]
        fn agrees_with_the_streaming_decoder(
            data in proptest::collection::vec(any::<u8>(), 0..4000),
            repeat in 1usize..4,
            members in 1usize..3,
            level in 0u32..10,
            cap in 0usize..20_000,
            flip in proptest::option::of((any::<usize>(), 1u8..=255)),
        ) {
            let page = data.repeat(repeat);
            let mut wire = gzip(&page, level).repeat(members);
            if let Some((at, x)) = flip {
                let at = at % wire.len();
                wire[at] ^= x;
            }
            let whole = gunzip_whole(&wire, cap);
            if let Some(out) = &whole {
                prop_assert!(out.len() <= cap);
                prop_assert_eq!(Some(out.clone()), reference(&wire));
            }
            if members == 1 && flip.is_none() && page.len() <= cap {
                prop_assert_eq!(whole, Some(page));
            }
        }
    }
}
