//! One record as one gzip member, and the fields' formats: digests, record ids, dates.

use std::cell::RefCell;
use std::io::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sha1_pair::{sha1_parts, Sha1Digest};
use libdeflater::{CompressionLvl, Compressor};

use crate::{WarcError, MAX_GZIP_LEVEL};

/// Builds one record as a complete gzip member, deflated at `gzip_level`
/// (libdeflate's 0-12).
/// `payload_digest` is the digest label of the entity body, if the record has one;
/// `block_digest` the SHA-1 of `block` when the caller computed it (with the payload's:
/// `sha1_pair`), else computed here.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_record(
    warc_type: &str,
    record_id: &str,
    date: &str,
    fields: &[(&str, String)],
    content_type: &str,
    block: &[&[u8]],
    block_digest: Option<&Sha1Digest>,
    payload_digest: Option<&str>,
    gzip_level: u32,
) -> Result<Vec<u8>, WarcError> {
    let length: usize = block.iter().map(|p| p.len()).sum();
    let block_digest = match block_digest {
        Some(d) => *d,
        None => sha1_parts(block),
    };
    // the whole record (head, block, the two CRLFs after it) in one buffer, written in
    // place: libdeflate takes its input in one piece
    let mut record = Vec::with_capacity(
        400 + fields
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum::<usize>()
            + length
            + 4,
    );
    // writes to a Vec cannot fail
    let _ = write!(
        record,
        "WARC/1.1\r\nWARC-Type: {warc_type}\r\nWARC-Record-ID: {record_id}\r\nWARC-Date: {date}\r\n"
    );
    for (name, value) in fields {
        let _ = write!(record, "{name}: {value}\r\n");
    }
    let _ = write!(
        record,
        "WARC-Block-Digest: {}\r\n",
        sha1_label(&block_digest)
    );
    if let Some(digest) = payload_digest {
        let _ = write!(record, "WARC-Payload-Digest: {digest}\r\n");
    }
    let _ = write!(
        record,
        "Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    );
    for part in block {
        record.extend_from_slice(part);
    }
    record.extend_from_slice(b"\r\n\r\n");
    gzip_member(&record, gzip_level)
}

/// Records up to this size go into their gzip member stored (deflate level 0).
pub const STORED_MAX_BYTES: usize = 1024;

thread_local! {
    /// One compressor per thread and level, reused: a new one per record costs its
    /// tables (allocated and zeroed) per record, which was a tenth of the daemon's CPU
    /// on small pages.
    /// (Two levels in use at most: the configured one, and 0 for small records.)
    static DEFLATE: RefCell<Vec<(u32, Compressor)>> = const { RefCell::new(Vec::new()) };
}

/// `input` as one complete gzip member (RFC 1952: header with no name and mtime 0, raw
/// deflate, CRC-32 and length trailer).
///
/// libdeflate compresses a whole buffer at once, which is why it is 1.4x (level 6) to
/// 2.5x (level 1) the speed of zlib-rs streaming at its level 6, with level 1's output
/// about 5 % larger than zlib's 6 on real HTML (docs/benchmarks.md, "WARC deflate").
fn gzip_member(input: &[u8], level: u32) -> Result<Vec<u8>, WarcError> {
    // a small record (a request, a short metadata record) is stored, not deflated: every
    // deflate call costs about 5 us whatever the input (building the block's Huffman
    // codes, most of it, and clearing the match finder's tables), which for a 650-byte
    // request record saved 300 bytes at a twentieth of the daemon's CPU per page
    // (docs/benchmarks.md, "WARC deflate"); stored costs 0.04 us
    let level = if input.len() <= STORED_MAX_BYTES {
        0
    } else {
        level
    };
    DEFLATE.with(|d| {
        let mut cached = d.borrow_mut();
        let at = match cached.iter().position(|(l, _)| *l == level) {
            Some(at) => at,
            None => {
                let lvl = CompressionLvl::new(level.min(MAX_GZIP_LEVEL) as i32)
                    .map_err(compress_error)?;
                cached.push((level, Compressor::new(lvl)));
                cached.len() - 1
            }
        };
        let compressor = &mut cached[at].1;
        let mut member = vec![0; compressor.gzip_compress_bound(input.len())];
        let written = compressor
            .gzip_compress(input, &mut member)
            .map_err(compress_error)?;
        member.truncate(written);
        Ok(member)
    })
}

/// libdeflate's errors (a level out of range, an output too small) as the writer's.
fn compress_error(e: impl std::fmt::Debug) -> WarcError {
    WarcError::Compress(io::Error::other(format!("libdeflate: {e:?}")))
}

/// `sha1:` + RFC 4648 base32 (upper case, padded: a SHA-1 is 32 characters, no padding).
pub fn sha1_label(digest: &[u8]) -> String {
    format!("sha1:{}", data_encoding::BASE32.encode(digest))
}

pub(crate) fn new_record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

pub(crate) fn check_uri(uri: &str) -> Result<(), WarcError> {
    if uri.is_empty() || uri.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(WarcError::InvalidTargetUri(uri.to_string()));
    }
    Ok(())
}

/// The head with exactly one terminating blank line guaranteed.
pub(crate) fn with_blank_line(head: &[u8]) -> Vec<u8> {
    let mut head = head.to_vec();
    if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
        // already terminated
    } else if head.ends_with(b"\r\n") {
        head.extend_from_slice(b"\r\n");
    } else if !head.is_empty() {
        head.extend_from_slice(b"\r\n\r\n");
    }
    head
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn utc_parts(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (y, mo, da) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400) as u32;
    (
        y,
        mo,
        da,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis(),
    )
}

/// `v` in decimal, zero-padded to at least `width` digits. Timestamps are written on every
/// page (the WARC-Date, the crawl log's time): no formatter machinery for them.
fn push_padded(out: &mut String, v: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let mut rest = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let at = at.min(digits.len().saturating_sub(width));
    // ASCII digits only
    out.extend(digits[at..].iter().map(|&b| char::from(b)));
}

/// `YYYY-MM-DDTHH:MM:SS` of `t` (UTC), with `.mmm` when `millis`, then `Z`.
fn rfc3339(t: SystemTime, millis: bool) -> String {
    let (y, mo, d, h, mi, s, ms) = utc_parts(t);
    let mut out = String::with_capacity(24);
    push_padded(&mut out, y.max(0) as u64, 4);
    for (sep, v) in [('-', mo), ('-', d), ('T', h), (':', mi), (':', s)] {
        out.push(sep);
        push_padded(&mut out, u64::from(v), 2);
    }
    if millis {
        out.push('.');
        push_padded(&mut out, u64::from(ms), 3);
    }
    out.push('Z');
    out
}

/// WARC-Date: ISO 8601 / RFC 3339 UTC with second precision, e.g. `2024-05-01T12:00:00Z`.
pub fn warc_date(t: SystemTime) -> String {
    rfc3339(t, false)
}

/// RFC 3339 UTC with milliseconds, e.g. `2024-05-01T12:00:00.250Z` (the crawl log's time).
pub fn rfc3339_millis(t: SystemTime) -> String {
    rfc3339(t, true)
}

/// File name timestamp, sortable, millisecond precision: `20240501120000123`.
pub(crate) fn file_timestamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, ms) = utc_parts(t);
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{ms:03}")
}

#[cfg(test)]
mod gzip_member_tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Read;

    /// What a gzip reader gets back from one member (flate2 checks its CRC-32 and length
    /// trailer).
    fn inflate(member: &[u8]) -> Vec<u8> {
        let mut dec = flate2::read::GzDecoder::new(member);
        let mut out = Vec::new();
        dec.read_to_end(&mut out).expect("a valid gzip member");
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Any input at any level: one member that inflates to the input (the reference
        /// model: the input itself).
        #[test]
        fn a_member_inflates_to_its_input(
            data in prop::collection::vec(any::<u8>(), 0..3000),
            repeat in 1usize..40,
            level in 0u32..=MAX_GZIP_LEVEL,
        ) {
            // repeated data makes matches for the deflater, random bytes make none
            let input = data.repeat(repeat);
            let member = gzip_member(&input, level).unwrap();
            prop_assert_eq!(inflate(&member), input);
        }
    }

    /// The thread's compressor follows the level asked for, back and forth, on a member
    /// of several MB.
    #[test]
    fn levels_alternate_and_large_members_round_trip() {
        let text = b"<p>frontierd archives this paragraph again</p>\n".repeat(100_000);
        for level in [1, 0, 12, 1, 6] {
            let out = gzip_member(&text, level).unwrap();
            assert_eq!(inflate(&out), text, "level {level}");
            if level == 0 {
                assert!(out.len() > text.len(), "level 0 stores");
            } else {
                assert!(
                    out.len() * 50 < text.len(),
                    "level {level} deflates: {}",
                    out.len()
                );
            }
        }
    }

    /// A record up to STORED_MAX_BYTES is stored whatever the level (its deflate would cost
    /// the match finder's reset for a few hundred bytes), one byte over it is deflated, and
    /// both read back as they were.
    #[test]
    fn small_records_are_stored_and_larger_ones_deflated() {
        let line = b"GET /page HTTP/1.1\r\nHost: a.test\r\n";
        let small = line.repeat(STORED_MAX_BYTES / line.len());
        assert!(small.len() <= STORED_MAX_BYTES);
        let stored = gzip_member(&small, 1).unwrap();
        assert_eq!(inflate(&stored), small);
        assert!(stored.len() > small.len(), "stored: {} bytes", stored.len());
        let larger = [small.as_slice(), &line[..]].concat();
        assert!(larger.len() > STORED_MAX_BYTES);
        let deflated = gzip_member(&larger, 1).unwrap();
        assert_eq!(inflate(&deflated), larger);
        assert!(
            deflated.len() * 4 < larger.len(),
            "deflated: {} bytes",
            deflated.len()
        );
    }
}
