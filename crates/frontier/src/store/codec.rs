//! Versioned encodings of the frontier's records.
//!
//! Every value starts with a version byte, and a decoder reads every version this build
//! knows. Host records: versions 1 and 2 are little-endian u64 fields (a decoder takes
//! zero for fields an older writer did not have); version 3 holds the same fields as
//! LEB128 varints, then the optional lease list, journal stamp and address (the host's IP
//! group), and ignores bytes a newer writer added after them. Queue entries: version 1 (no depth), 2 (depth), 3
//! (depth, hop path, via), 4 (and a recrawl record), 5 (3 plus the entry kind, for
//! sitemaps) and 6 (the kind and a recrawl record); drop records: version 1 and 2 (with
//! depth, hop path, via). Damaged bytes are a [`CodecError`], never a panic.

use std::net::IpAddr;

use crate::sched::records::{to_u16, to_u32};
pub use crate::sched::records::{DropReason, HostCounters, HostRecord};
use crate::sched::recrawl::RevisitRecord;
use crate::store::revisit;
use crate::work::EntryKind;

// defined beside StoreError: every record codec returns it (the recrawl record's in
// `revisit.rs` too, which this file uses)
pub use super::CodecError;

const V1: u8 = 1;

/// Host record version 2: version 1's 18 fields followed by `head_seq` (fixed u64 LE).
const HOST_V2: u8 = 2;
/// Host record version 3: the same 19 fields as LEB128 varints, then the optional lease
/// list (count, sequences) and journal stamp, also varints. Most fields are small, so a
/// record is ~40 bytes instead of ~160: the journal writes one per host change.
const HOST_V3: u8 = 3;

/// Bytes of the fixed part of a host record of version 1 or 2.
fn host_fixed_len(ver: u8) -> usize {
    if ver >= HOST_V2 {
        1 + 19 * 8
    } else {
        1 + 18 * 8
    }
}

fn read_u64s<const N: usize>(bytes: &[u8]) -> [u64; N] {
    let mut out = [0u64; N];
    for (i, chunk) in bytes.chunks_exact(8).take(N).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        out[i] = u64::from_le_bytes(b);
    }
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A host record's address trailer: a tag and the octets; anything else is no address.
fn get_address(tail: &[u8]) -> Option<IpAddr> {
    match tail.split_first()? {
        (&ADDRESS_V4, rest) => {
            let octets: [u8; 4] = rest.get(..4)?.try_into().ok()?;
            Some(IpAddr::from(octets))
        }
        (&ADDRESS_V6, rest) => {
            let octets: [u8; 16] = rest.get(..16)?.try_into().ok()?;
            Some(IpAddr::from(octets))
        }
        _ => None,
    }
}

/// A host value's parts: record, lease list, journal stamp, address.
type DecodedHost = (HostRecord, Vec<u64>, u64, Option<IpAddr>);

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The stored value of a host's record. Its lease list holds the leases in flight and the
/// front: both come back to the front at open. Its address (the host's IP group) follows
/// the stamp: the address is host state like the rest, journaled with it, and not a key of
/// its own (one `I` key per host, written in the scattered order hosts are first fetched,
/// was most of sled's memory at a million hosts: docs/benchmarks.md).
pub(crate) fn host_value(h: &crate::sched::hosts::HostMem) -> Vec<u8> {
    stored_host(&h.rec, &h.owed(), 0, h.ip)
}

/// A host record as stored: with its lease list, its journal stamp (0 = none) and its
/// address when it has one.
pub(crate) fn stored_host(
    rec: &HostRecord,
    leased: &[u64],
    stamp: u64,
    ip: Option<IpAddr>,
) -> Vec<u8> {
    match ip {
        Some(ip) => rec.encode_with_address(leased, stamp, ip),
        None if stamp != 0 => rec.encode_stamped(leased, stamp),
        None => rec.encode_with_leases(leased),
    }
}

/// Address tags after a host record's stamp.
const ADDRESS_V4: u8 = 4;
const ADDRESS_V6: u8 = 6;

impl HostRecord {
    fn fields(&self) -> [u64; 19] {
        let c = &self.counters;
        [
            self.id,
            self.next_allowed_ms,
            u64::from(self.in_flight),
            u64::from(self.backoff_level),
            self.backoff_until_ms,
            u64::from(self.crawl_delay_ms),
            u64::from(self.last_response_ms),
            u64::from(self.skipped),
            u64::from(c.enqueued),
            c.queued,
            u64::from(c.dispatched),
            u64::from(c.completed),
            u64::from(c.dropped),
            u64::from(c.given_up),
            u64::from(c.retried),
            u64::from(c.crawl_delay_clamped),
            u64::from(c.crawl_delay_skipped),
            u64::from(c.robots_fetches),
            self.head_seq,
        ]
    }

    fn from_fields(f: &[u64; 19]) -> HostRecord {
        HostRecord {
            id: f[0],
            next_allowed_ms: f[1],
            in_flight: to_u32(f[2]),
            backoff_level: to_u16(f[3]),
            backoff_until_ms: f[4],
            crawl_delay_ms: to_u32(f[5]),
            last_response_ms: to_u32(f[6]),
            skipped: f[7] != 0,
            counters: HostCounters {
                enqueued: to_u32(f[8]),
                queued: f[9],
                dispatched: to_u32(f[10]),
                completed: to_u32(f[11]),
                dropped: to_u32(f[12]),
                given_up: to_u32(f[13]),
                retried: to_u32(f[14]),
                crawl_delay_clamped: to_u32(f[15]),
                crawl_delay_skipped: to_u32(f[16]),
                robots_fetches: to_u32(f[17]),
            },
            head_seq: f[18],
        }
    }

    /// Encode (version 3).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        out.push(HOST_V3);
        for v in self.fields() {
            put_varint(&mut out, v);
        }
        out
    }

    /// Record, lease list and journal stamp of any version this build knows, in one pass.
    pub fn decode_parts(bytes: &[u8]) -> Result<(HostRecord, Vec<u64>, u64), CodecError> {
        Self::decode_all(bytes).map(|(rec, leases, stamp, _)| (rec, leases, stamp))
    }

    /// The address stored after the stamp (None if there is none, or it does not parse:
    /// the host's next fetch tells it again).
    pub fn decode_address(bytes: &[u8]) -> Option<IpAddr> {
        Self::decode_all(bytes).ok().and_then(|p| p.3)
    }

    fn decode_all(bytes: &[u8]) -> Result<DecodedHost, CodecError> {
        let err = |why| CodecError { what: "host", why };
        let (&ver, rest) = bytes.split_first().ok_or(err("empty"))?;
        match ver {
            HOST_V3 => {
                let mut at = 1;
                let mut f = [0u64; 19];
                for v in f.iter_mut() {
                    *v = get_varint(bytes, &mut at).ok_or(err("truncated"))?;
                }
                let mut leases = Vec::new();
                let mut stamp = 0;
                let mut address = None;
                if let Some(n) = get_varint(bytes, &mut at) {
                    for _ in 0..n.min(bytes.len() as u64) {
                        leases.push(get_varint(bytes, &mut at).ok_or(err("truncated leases"))?);
                    }
                    stamp = get_varint(bytes, &mut at).unwrap_or(0);
                    address = get_address(bytes.get(at..).unwrap_or_default());
                }
                Ok((HostRecord::from_fields(&f), leases, stamp, address))
            }
            1 | HOST_V2 => {
                if rest.len() < 8 {
                    return Err(err("no id"));
                }
                // version 1 has 18 fixed fields; what follows them (a lease list) is not
                // a field
                let fixed_len = host_fixed_len(ver);
                let fixed = &rest[..rest.len().min(fixed_len - 1)];
                let mut f: [u64; 19] = read_u64s(fixed);
                if ver == 1 {
                    f[18] = 0;
                }
                let mut leases = Vec::new();
                let mut stamp = 0;
                if bytes.len() >= fixed_len + 8 {
                    let [n]: [u64; 1] = read_u64s(&bytes[fixed_len..fixed_len + 8]);
                    let tail = &bytes[fixed_len + 8..];
                    let avail = tail.len() / 8;
                    let n = (n as usize).min(avail);
                    leases = tail[..8 * n]
                        .chunks_exact(8)
                        .map(|c| read_u64s::<1>(c)[0])
                        .collect();
                    if let Some(b) = tail.get(8 * n..8 * n + 8) {
                        stamp = read_u64s::<1>(b)[0];
                    }
                }
                Ok((HostRecord::from_fields(&f), leases, stamp, None))
            }
            _ => Err(err("unknown version")),
        }
    }

    /// Decode any version this build knows.
    pub fn decode(bytes: &[u8]) -> Result<HostRecord, CodecError> {
        Ok(Self::decode_parts(bytes)?.0)
    }

    /// Encode (version 3) followed by the sequences of the host's page leases in flight
    /// (and URLs returned to the front of its queue): their count, then each sequence.
    pub fn encode_with_leases(&self, leased: &[u64]) -> Vec<u8> {
        let mut out = self.encode();
        put_varint(&mut out, leased.len() as u64);
        for &s in leased {
            put_varint(&mut out, s);
        }
        out
    }

    /// [`HostRecord::encode_with_leases`] followed by the host-record journal sequence at
    /// the time of writing: journal entries for this host with a lower sequence are older
    /// than this record.
    pub fn encode_stamped(&self, leased: &[u64], journal_seq: u64) -> Vec<u8> {
        let mut out = self.encode_with_leases(leased);
        put_varint(&mut out, journal_seq);
        out
    }

    /// [`HostRecord::encode_stamped`] followed by the host's address: a tag (4 or 6) and
    /// its octets. Decoders before the address ignore it (bytes after the stamp).
    pub fn encode_with_address(&self, leased: &[u64], journal_seq: u64, ip: IpAddr) -> Vec<u8> {
        let mut out = self.encode_stamped(leased, journal_seq);
        match ip {
            IpAddr::V4(v4) => {
                out.push(ADDRESS_V4);
                out.extend_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                out.push(ADDRESS_V6);
                out.extend_from_slice(&v6.octets());
            }
        }
        out
    }

    /// The journal sequence stored after the lease list (0 if none).
    pub fn decode_stamp(bytes: &[u8]) -> u64 {
        Self::decode_parts(bytes).map(|p| p.2).unwrap_or(0)
    }

    /// The lease sequences stored after the fixed fields (empty for a record without them).
    pub fn decode_leases(bytes: &[u8]) -> Vec<u64> {
        Self::decode_parts(bytes).map(|p| p.1).unwrap_or_default()
    }
}

/// A queued (or leased) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// Attempts made so far (0 for a fresh URL).
    pub attempts: u32,
    /// Link depth: 0 for a seed, one more than the page it was found on otherwise. Kept
    /// with the URL so that a restart does not reset it (and so widen the crawl scope).
    pub depth: u32,
    /// The URL of the page it was found on (a link) or that redirected to it; None for a
    /// submitted URL, and for entries written before version 3.
    pub via: Option<String>,
    /// Hop path from its seed, Heritrix style (`L` link, `R` redirect, empty for a seed);
    /// the caller bounds its length. Empty in entries written before version 3.
    pub hops: String,
    /// What it is fetched as: a page in every entry but version 5.
    pub kind: EntryKind,
    /// Canonical URL.
    pub url: String,
    /// Its recrawl record (`docs/recrawl.md`): set once it was fetched under a revisit
    /// schedule, or queued with its own interval. Kept in the entry (version 4), so the
    /// schedule of a URL costs no key of its own.
    pub recrawl: Option<RevisitRecord>,
}

/// Queue entry version 2: version, attempts (u32 LE), depth (u32 LE), URL bytes.
const QUEUE_V2: u8 = 2;
/// Queue entry version 3: version, attempts (u32 LE), depth (u32 LE), hop path length
/// (varint) and bytes, via length (varint, 0 = none) and bytes, URL bytes.
const QUEUE_V3: u8 = 3;
/// Queue entry version 4: version 3 with the recrawl record (varint length and
/// `store::revisit` bytes) before the URL. Written only for pages that have one.
const QUEUE_V4: u8 = 4;
/// Queue entry version 5: version 3 with the kind ([`EntryKind::code`], one byte) between
/// the via and the URL. Written only for entries that are not pages, so a page's entry
/// stays version 3 or 4 (same bytes, same size as before sitemaps).
const QUEUE_V5: u8 = 5;
/// Queue entry version 6: version 5's kind byte, then version 4's recrawl record, then the
/// URL: a sitemap with a revisit schedule.
const QUEUE_V6: u8 = 6;

/// A length-prefixed UTF-8 string at `at` (varint length), advancing `at`.
fn get_str<'a>(bytes: &'a [u8], at: &mut usize, what: &'static str) -> Result<&'a str, CodecError> {
    let err = |why| CodecError { what, why };
    let len = get_varint(bytes, at).ok_or(err("truncated length"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| at.checked_add(l))
        .filter(|&e| e <= bytes.len())
        .ok_or(err("truncated string"))?;
    let s = std::str::from_utf8(&bytes[*at..end]).map_err(|_| err("string not UTF-8"))?;
    *at = end;
    Ok(s)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

impl QueueEntry {
    /// A fresh entry (no attempts yet).
    pub fn new(url: String, depth: u32, via: Option<String>, hops: String) -> QueueEntry {
        QueueEntry {
            attempts: 0,
            depth,
            via,
            hops,
            kind: EntryKind::Page,
            url,
            recrawl: None,
        }
    }
    /// Encode (version 3; 4 with a recrawl record; 5 for a sitemap; 6 for both).
    pub fn encode(&self) -> Vec<u8> {
        let via = self.via.as_deref().map_or(0, str::len);
        let mut out = Vec::with_capacity(13 + self.hops.len() + via + self.url.len());
        self.encode_into(&mut out);
        out
    }
    /// Append the encoding (version 3; 4 with a recrawl record; 5 for a sitemap; 6 for
    /// both) to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let page = self.kind == EntryKind::Page;
        out.push(match (page, self.recrawl.is_some()) {
            (true, false) => QUEUE_V3,
            (true, true) => QUEUE_V4,
            (false, false) => QUEUE_V5,
            (false, true) => QUEUE_V6,
        });
        out.extend_from_slice(&self.attempts.to_le_bytes());
        out.extend_from_slice(&self.depth.to_le_bytes());
        put_str(out, &self.hops);
        put_str(out, self.via.as_deref().unwrap_or(""));
        if !page {
            out.push(self.kind.code());
        }
        if let Some(r) = &self.recrawl {
            let rec = revisit::encode(r);
            put_varint(out, rec.len() as u64);
            out.extend_from_slice(&rec);
        }
        out.extend_from_slice(self.url.as_bytes());
    }
    /// Decode version 6, 5, 4, 3, 2 (no via, no hop path) or 1 (no depth either: read as
    /// depth 0).
    pub fn decode(bytes: &[u8]) -> Result<QueueEntry, CodecError> {
        let err = |why| CodecError { what: "queue", why };
        let u32_at = |i: usize| -> Result<u32, CodecError> {
            let b: [u8; 4] = bytes
                .get(i..i + 4)
                .and_then(|s| s.try_into().ok())
                .ok_or(err("truncated"))?;
            Ok(u32::from_le_bytes(b))
        };
        let mut via = None;
        let mut hops = String::new();
        let mut recrawl = None;
        let mut kind = EntryKind::Page;
        let (attempts, depth, url_at) = match bytes.first() {
            Some(&V1) => (u32_at(1)?, 0, 5),
            Some(&QUEUE_V2) => (u32_at(1)?, u32_at(5)?, 9),
            Some(&v @ (QUEUE_V3 | QUEUE_V4 | QUEUE_V5 | QUEUE_V6)) => {
                let (attempts, depth) = (u32_at(1)?, u32_at(5)?);
                let mut at = 9;
                hops = get_str(bytes, &mut at, "queue")?.to_string();
                via = Some(get_str(bytes, &mut at, "queue")?)
                    .filter(|v| !v.is_empty())
                    .map(str::to_string);
                if v == QUEUE_V5 || v == QUEUE_V6 {
                    let code = *bytes.get(at).ok_or(err("truncated kind"))?;
                    kind = EntryKind::from_code(code).ok_or(err("unknown kind"))?;
                    at += 1;
                }
                if v == QUEUE_V4 || v == QUEUE_V6 {
                    let len = get_varint(bytes, &mut at).ok_or(err("truncated length"))?;
                    let end = usize::try_from(len)
                        .ok()
                        .and_then(|l| at.checked_add(l))
                        .filter(|&e| e <= bytes.len())
                        .ok_or(err("truncated recrawl record"))?;
                    recrawl = Some(revisit::decode(&bytes[at..end])?);
                    at = end;
                }
                (attempts, depth, at)
            }
            Some(_) => return Err(err("unknown version")),
            None => return Err(err("empty")),
        };
        let url = std::str::from_utf8(&bytes[url_at..]).map_err(|_| err("URL not UTF-8"))?;
        Ok(QueueEntry {
            attempts,
            depth,
            via,
            hops,
            kind,
            url: url.to_string(),
            recrawl,
        })
    }
}

impl DropReason {
    pub(crate) fn from_u8(b: u8) -> Option<DropReason> {
        match b {
            1 => Some(DropReason::RobotsDisallowed),
            2 => Some(DropReason::CrawlDelayTooLong),
            3 => Some(DropReason::GaveUp),
            _ => None,
        }
    }
}

/// Persisted record of a dropped or given-up URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropRecord {
    /// Why.
    pub reason: DropReason,
    /// When (unix ms).
    pub at_ms: u64,
    /// Details (e.g. the deciding robots line, the last failure).
    pub detail: String,
    /// The queue entry's link depth (0 in version-1 records).
    pub depth: u32,
    /// The queue entry's `via` (None in version-1 records).
    pub via: Option<String>,
    /// The queue entry's hop path (empty in version-1 records).
    pub hops: String,
    /// Canonical URL.
    pub url: String,
}

/// Drop record version 2: version 1's fields, with depth (u32 LE), hop path and via
/// (varint length each) between the detail and the URL.
const DROP_V2: u8 = 2;

impl DropRecord {
    /// The record of dropping `entry`: its URL and where it came from.
    pub fn of(entry: QueueEntry, reason: DropReason, detail: String, at_ms: u64) -> DropRecord {
        DropRecord {
            reason,
            at_ms,
            detail,
            depth: entry.depth,
            via: entry.via,
            hops: entry.hops,
            url: entry.url,
        }
    }
    /// Encode (version 2).
    pub fn encode(&self) -> Vec<u8> {
        let via = self.via.as_deref().unwrap_or("");
        let mut out = Vec::with_capacity(
            24 + self.detail.len() + self.hops.len() + via.len() + self.url.len(),
        );
        out.push(DROP_V2);
        out.push(self.reason as u8);
        out.extend_from_slice(&self.at_ms.to_le_bytes());
        let dl = u32::try_from(self.detail.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&dl.to_le_bytes());
        out.extend_from_slice(&self.detail.as_bytes()[..dl as usize]);
        out.extend_from_slice(&self.depth.to_le_bytes());
        put_str(&mut out, &self.hops);
        put_str(&mut out, via);
        out.extend_from_slice(self.url.as_bytes());
        out
    }
    /// Decode version 2 or version 1 (no depth, via or hop path).
    pub fn decode(bytes: &[u8]) -> Result<DropRecord, CodecError> {
        let err = |why| CodecError { what: "drop", why };
        if bytes.len() < 14 {
            return Err(err("short"));
        }
        let ver = bytes[0];
        if ver != V1 && ver != DROP_V2 {
            return Err(err("unknown version"));
        }
        let reason = DropReason::from_u8(bytes[1]).ok_or(err("unknown reason"))?;
        let [at_ms]: [u64; 1] = read_u64s(&bytes[2..10]);
        let mut l = [0u8; 4];
        l.copy_from_slice(&bytes[10..14]);
        let dl = u32::from_le_bytes(l) as usize;
        let rest = &bytes[14..];
        if rest.len() < dl {
            return Err(err("detail truncated"));
        }
        let detail = String::from_utf8_lossy(&rest[..dl]).into_owned();
        let mut at = 14 + dl;
        let (mut depth, mut via, mut hops) = (0, None, String::new());
        if ver == DROP_V2 {
            let d: [u8; 4] = bytes
                .get(at..at + 4)
                .and_then(|s| s.try_into().ok())
                .ok_or(err("depth truncated"))?;
            depth = u32::from_le_bytes(d);
            at += 4;
            hops = get_str(bytes, &mut at, "drop")?.to_string();
            via = Some(get_str(bytes, &mut at, "drop")?)
                .filter(|v| !v.is_empty())
                .map(str::to_string);
        }
        let url = String::from_utf8_lossy(&bytes[at..]).into_owned();
        Ok(DropRecord {
            reason,
            at_ms,
            detail,
            depth,
            via,
            hops,
            url,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store keeps u64 where a host in memory has u32 or u16 (sched/records.rs): a
    /// stored value past the field's range reads back as its largest, not wrapped to a
    /// small one.
    #[test]
    fn a_stored_value_past_a_narrow_field_reads_back_saturated() {
        let mut v2 = vec![2u8];
        for f in [
            7u64,
            99,
            u64::MAX,
            1 << 40,
            0,
            5_000_000_000,
            u64::from(u32::MAX) + 1,
        ] {
            v2.extend_from_slice(&f.to_le_bytes());
        }
        let d = HostRecord::decode(&v2).unwrap();
        assert_eq!(
            (
                d.in_flight,
                d.backoff_level,
                d.crawl_delay_ms,
                d.last_response_ms
            ),
            (u32::MAX, u16::MAX, u32::MAX, u32::MAX)
        );
        // a version-3 record's running totals past 2^32 saturate too; `queued` is kept whole
        let big = 5_000_000_000u64;
        let mut v3 = vec![HOST_V3];
        for f in [[1, 2, 3, 4, 5, 6, 7, 0].as_slice(), &[big; 10], &[11]].concat() {
            put_varint(&mut v3, f);
        }
        let d = HostRecord::decode(&v3).unwrap();
        let c = d.counters;
        assert_eq!(c.queued, big);
        for total in [
            c.enqueued,
            c.dispatched,
            c.completed,
            c.dropped,
            c.given_up,
            c.retried,
            c.crawl_delay_clamped,
            c.crawl_delay_skipped,
            c.robots_fetches,
        ] {
            assert_eq!(total, u32::MAX);
        }
        assert_eq!(d.head_seq, 11);
    }

    #[test]
    fn host_record_roundtrip_and_compat() {
        let mut r = HostRecord {
            id: 7,
            next_allowed_ms: 99,
            backoff_level: 2,
            ..Default::default()
        };
        r.counters.given_up = 3;
        let enc = r.encode();
        assert_eq!(HostRecord::decode(&enc).unwrap(), r);
        assert!(enc.len() < 40, "varint record is small: {}", enc.len());
        // a cut record is an error, not a panic or a half-read record
        for cut in 1..enc.len() {
            assert!(HostRecord::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        assert!(HostRecord::decode(&[9, 1, 2]).is_err());
        // a version-2 record (fixed u64 fields), shorter than its fields: zeros
        let mut v2 = vec![2u8];
        for f in [7u64, 99, 0, 2] {
            v2.extend_from_slice(&f.to_le_bytes());
        }
        let d = HostRecord::decode(&v2).unwrap();
        assert_eq!((d.id, d.next_allowed_ms, d.backoff_level), (7, 99, 2));
        assert_eq!(d.counters.given_up, 0);
        // a newer, longer record: extra bytes after the lease list and stamp ignored
        let mut newer = r.encode_stamped(&[1], 2);
        newer.extend_from_slice(&[5, 5, 5]);
        assert_eq!(HostRecord::decode(&newer).unwrap(), r);
        assert_eq!(HostRecord::decode_leases(&newer), vec![1]);
        assert!(HostRecord::decode(&[]).is_err());
        // the lease list rides after the fixed fields
        let with = r.encode_with_leases(&[3, 9]);
        assert_eq!(HostRecord::decode(&with).unwrap(), r);
        assert_eq!(HostRecord::decode_leases(&with), vec![3, 9]);
        assert!(HostRecord::decode_leases(&enc).is_empty());
        assert!(HostRecord::decode_leases(&r.encode_with_leases(&[])).is_empty());
        let st = r.encode_stamped(&[4], 77);
        assert_eq!(HostRecord::decode(&st).unwrap(), r);
        assert_eq!(HostRecord::decode_leases(&st), vec![4]);
        assert_eq!(HostRecord::decode_stamp(&st), 77);
        assert_eq!(HostRecord::decode_stamp(&with), 0);
        assert_eq!(HostRecord::decode_stamp(&enc), 0);
        // head_seq is the 19th field
        let h = HostRecord { head_seq: 42, ..r };
        assert_eq!(HostRecord::decode(&h.encode_stamped(&[5], 9)).unwrap(), h);
        // a version-1 record with a lease list: the list is not read as head_seq
        let mut v1 = vec![1u8];
        for f in 0..18u64 {
            v1.extend_from_slice(&(if f == 0 { 7u64 } else { 0 }).to_le_bytes());
        }
        v1.extend_from_slice(&1u64.to_le_bytes());
        v1.extend_from_slice(&33u64.to_le_bytes());
        v1.extend_from_slice(&8u64.to_le_bytes());
        let d = HostRecord::decode(&v1).unwrap();
        assert_eq!((d.id, d.head_seq), (7, 0));
        assert_eq!(HostRecord::decode_leases(&v1), vec![33]);
        assert_eq!(HostRecord::decode_stamp(&v1), 8);
    }

    #[test]
    fn entries_roundtrip() {
        let q = QueueEntry {
            attempts: 2,
            depth: 3,
            via: Some("http://a/from".into()),
            hops: "LLR".into(),
            kind: EntryKind::Page,
            url: "http://a/".into(),
            recrawl: None,
        };
        let enc = q.encode();
        assert_eq!(enc[0], 3);
        assert_eq!(QueueEntry::decode(&enc).unwrap(), q);
        // via and hop path cost their length plus one length byte each
        assert_eq!(enc.len(), 9 + 1 + 3 + 1 + 13 + 9);
        // a cut entry is an error up to the URL (whose end is the value's end)
        for cut in 0..enc.len() - 9 {
            assert!(QueueEntry::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        // a seed: no via, empty hop path
        let seed = QueueEntry::new("http://a/s".into(), 0, None, String::new());
        assert_eq!(QueueEntry::decode(&seed.encode()).unwrap(), seed);
        assert_eq!(seed.encode().len(), 11 + 10);
        // a version-2 entry (depth, no via): reads with no via and an empty hop path
        let mut v2 = vec![2u8];
        v2.extend_from_slice(&1u32.to_le_bytes());
        v2.extend_from_slice(&4u32.to_le_bytes());
        v2.extend_from_slice(b"http://a/");
        assert_eq!(
            QueueEntry::decode(&v2).unwrap(),
            QueueEntry {
                attempts: 1,
                depth: 4,
                via: None,
                hops: String::new(),
                kind: EntryKind::Page,
                url: "http://a/".into(),
                recrawl: None,
            }
        );
        // a version-1 entry (written before depth was kept) reads as depth 0
        let mut v1 = vec![1u8];
        v1.extend_from_slice(&2u32.to_le_bytes());
        v1.extend_from_slice(b"http://a/");
        let old = QueueEntry::decode(&v1).unwrap();
        assert_eq!(
            (
                old.attempts,
                old.depth,
                old.via,
                old.hops.as_str(),
                old.url.as_str()
            ),
            (2, 0, None, "", "http://a/")
        );
        assert!(QueueEntry::decode(&[]).is_err());
        assert!(QueueEntry::decode(&[2, 0, 0]).is_err());
        assert!(QueueEntry::decode(&[9, 0, 0, 0, 0]).is_err());
        // a hop path length past the end, a via that is not UTF-8: errors
        assert!(QueueEntry::decode(&[3, 0, 0, 0, 0, 0, 0, 0, 0, 9, b'L']).is_err());
        assert!(QueueEntry::decode(&[3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]).is_err());
        // version 4: with a recrawl record, cut anywhere before the URL is an error
        let with = QueueEntry {
            recrawl: Some(RevisitRecord {
                interval_ms: 60_000,
                visits: 2,
                ..RevisitRecord::default()
            }),
            ..q
        };
        let enc = with.encode();
        assert_eq!(enc[0], 4);
        assert_eq!(QueueEntry::decode(&enc).unwrap(), with);
        for cut in 0..enc.len() - 9 {
            assert!(QueueEntry::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn sitemap_entries_keep_their_kind_and_pages_stay_version_3() {
        use crate::work::SitemapSource;
        let page = QueueEntry::new("http://a/p".into(), 1, None, "L".into());
        assert_eq!(page.encode()[0], 3);
        for source in [
            SitemapSource::Listed,
            SitemapSource::Robots,
            SitemapSource::IndexChild,
        ] {
            let q = QueueEntry {
                attempts: 1,
                kind: EntryKind::Sitemap(source),
                ..QueueEntry::new(
                    "http://a/sitemap.xml".into(),
                    0,
                    Some("http://a/robots.txt".into()),
                    "M".into(),
                )
            };
            let enc = q.encode();
            assert_eq!(enc[0], 5);
            // version 3's fields, then the kind byte, then the URL
            assert_eq!(enc.len(), 9 + (1 + 1) + (1 + 19) + 1 + q.url.len());
            assert_eq!(QueueEntry::decode(&enc).unwrap(), q);
            // cut before the URL: an error, not a page
            for cut in 0..enc.len() - q.url.len() {
                assert!(QueueEntry::decode(&enc[..cut]).is_err(), "cut at {cut}");
            }
        }
        // a sitemap with a revisit schedule: version 6, kind and record both kept
        let both = QueueEntry {
            kind: EntryKind::Sitemap(SitemapSource::Robots),
            recrawl: Some(RevisitRecord {
                interval_ms: 86_400_000,
                visits: 1,
                ..RevisitRecord::default()
            }),
            ..page.clone()
        };
        let enc = both.encode();
        assert_eq!(enc[0], 6);
        assert_eq!(QueueEntry::decode(&enc).unwrap(), both);
        for cut in 0..enc.len() - both.url.len() {
            assert!(QueueEntry::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        // a kind this version does not know is an error, not a page
        let mut unknown = QueueEntry {
            kind: EntryKind::Sitemap(SitemapSource::Listed),
            ..page.clone()
        }
        .encode();
        let at = unknown.len() - page.url.len() - 1;
        unknown[at] = 9;
        assert!(QueueEntry::decode(&unknown).is_err());
    }

    #[test]
    fn drop_records_roundtrip_and_compat() {
        let entry = QueueEntry {
            attempts: 5,
            depth: 2,
            via: Some("http://a/p".into()),
            hops: "LR".into(),
            kind: EntryKind::Page,
            url: "http://a/x".into(),
            recrawl: None,
        };
        let d = DropRecord::of(
            entry,
            DropReason::RobotsDisallowed,
            "Disallow: /x".into(),
            5,
        );
        assert_eq!(
            (d.depth, d.via.as_deref(), d.hops.as_str(), d.url.as_str()),
            (2, Some("http://a/p"), "LR", "http://a/x")
        );
        let enc = d.encode();
        assert_eq!(DropRecord::decode(&enc).unwrap(), d);
        for cut in 0..14 + 12 + 4 + 1 + 2 + 1 + 10 {
            assert!(DropRecord::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        // a version-1 record (no depth, via, hop path)
        let mut v1 = vec![1u8, 3];
        v1.extend_from_slice(&7u64.to_le_bytes());
        v1.extend_from_slice(&3u32.to_le_bytes());
        v1.extend_from_slice(b"whyhttp://a/y");
        let old = DropRecord::decode(&v1).unwrap();
        assert_eq!(
            (old.reason, old.at_ms, old.detail.as_str(), old.url.as_str()),
            (DropReason::GaveUp, 7, "why", "http://a/y")
        );
        assert_eq!((old.depth, old.via, old.hops.as_str()), (0, None, ""));
        let mut unknown = enc.clone();
        unknown[0] = 7;
        assert!(DropRecord::decode(&unknown).is_err());
    }
}
