//! Encodings of the recrawl schedule: a URL's recrawl record (inside its queue entry,
//! version 4) and a due-index value (see [`super::keys::due`]).

use crate::sched::recrawl::{RevisitRecord, Validators};
use crate::store::CodecError;

/// Version 1: due (u64 LE), interval (u64 LE), own interval (u64 LE, `u64::MAX` = none),
/// 404/410 count (u32 LE), visits (u32 LE), last visit (u64 LE), then ETag,
/// Last-Modified and payload digest, each a u32 LE length (`u32::MAX` = none) and bytes.
const REVISIT_V1: u8 = 1;
const NONE_U64: u64 = u64::MAX;
const NONE_LEN: u32 = u32::MAX;

/// Encode (version 1). Validators longer than 64 KiB are not kept (no server sends one
/// that long; the record stays small).
pub fn encode(rec: &RevisitRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.push(REVISIT_V1);
    out.extend_from_slice(&rec.due_ms.to_le_bytes());
    out.extend_from_slice(&rec.interval_ms.to_le_bytes());
    out.extend_from_slice(&rec.url_interval_ms.unwrap_or(NONE_U64).to_le_bytes());
    out.extend_from_slice(&rec.gone_count.to_le_bytes());
    out.extend_from_slice(&rec.visits.to_le_bytes());
    out.extend_from_slice(&rec.captured_ms.to_le_bytes());
    let v = &rec.validators;
    for s in [&v.etag, &v.last_modified, &v.payload_digest] {
        match s.as_deref().filter(|s| s.len() <= 65_536) {
            None => out.extend_from_slice(&NONE_LEN.to_le_bytes()),
            Some(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    out
}

fn err(why: &'static str) -> CodecError {
    CodecError {
        what: "revisit",
        why,
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.at.checked_add(n).ok_or(err("truncated"))?;
        let s = self.bytes.get(self.at..end).ok_or(err("truncated"))?;
        self.at = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| err("truncated"))?;
        Ok(u64::from_le_bytes(b))
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        let b: [u8; 4] = self.take(4)?.try_into().map_err(|_| err("truncated"))?;
        Ok(u32::from_le_bytes(b))
    }
}

/// Decode version 1.
pub fn decode(bytes: &[u8]) -> Result<RevisitRecord, CodecError> {
    if bytes.first() != Some(&REVISIT_V1) {
        return Err(err("unknown version"));
    }
    let mut c = Cursor { bytes, at: 1 };
    let due_ms = c.u64()?;
    let interval_ms = c.u64()?;
    let url_interval_ms = Some(c.u64()?).filter(|&v| v != NONE_U64);
    let gone_count = c.u32()?;
    let visits = c.u32()?;
    let captured_ms = c.u64()?;
    let mut strs = [None, None, None];
    for slot in &mut strs {
        let len = c.u32()?;
        if len != NONE_LEN {
            let s = c.take(len as usize)?;
            let s = std::str::from_utf8(s).map_err(|_| err("validator not UTF-8"))?;
            *slot = Some(s.to_string());
        }
    }
    let [etag, last_modified, payload_digest] = strs;
    Ok(RevisitRecord {
        due_ms,
        interval_ms,
        url_interval_ms,
        gone_count,
        visits,
        captured_ms,
        validators: Validators {
            etag,
            last_modified,
            payload_digest,
        },
    })
}

/// Encode one due-index value: per entry its due time (u64 LE), length (u32 LE) and
/// queue entry bytes.
pub fn encode_due<E: AsRef<[u8]>>(entries: &[(u64, E)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.iter().map(|(_, e)| 12 + e.as_ref().len()).sum());
    for (due, e) in entries {
        let e = e.as_ref();
        out.extend_from_slice(&due.to_le_bytes());
        out.extend_from_slice(&(e.len() as u32).to_le_bytes());
        out.extend_from_slice(e);
    }
    out
}

/// Decode a due-index value into (due time, queue entry bytes).
pub fn decode_due(bytes: &[u8]) -> Result<Vec<(u64, &[u8])>, CodecError> {
    let mut c = Cursor { bytes, at: 0 };
    let mut out = Vec::new();
    while c.at < bytes.len() {
        let due = c.u64()?;
        let len = c.u32()?;
        out.push((due, c.take(len as usize)?));
    }
    Ok(out)
}

/// A scheduled URL's place in the due index (see [`super::keys::locator`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locator {
    /// Due second of its due-index key.
    pub slot_ms: u64,
    /// Random id of its due-index key.
    pub id: u64,
    /// When it was last fetched (unix ms; 0: never, or not known).
    pub fetched_ms: u64,
}

/// Encode a locator: version 1, then slot, id and fetch time (u64 LE each).
pub fn encode_locator(l: &Locator) -> Vec<u8> {
    let mut out = Vec::with_capacity(25);
    out.push(1);
    out.extend_from_slice(&l.slot_ms.to_le_bytes());
    out.extend_from_slice(&l.id.to_le_bytes());
    out.extend_from_slice(&l.fetched_ms.to_le_bytes());
    out
}

/// Decode a locator (version 1).
pub fn decode_locator(bytes: &[u8]) -> Result<Locator, CodecError> {
    if bytes.first() != Some(&1) {
        return Err(CodecError {
            what: "locator",
            why: "unknown version",
        });
    }
    let mut c = Cursor { bytes, at: 1 };
    Ok(Locator {
        slot_ms: c.u64()?,
        id: c.u64()?,
        fetched_ms: c.u64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_truncation() {
        let rec = RevisitRecord {
            due_ms: 17,
            interval_ms: 3_600_000,
            url_interval_ms: Some(0),
            gone_count: 2,
            visits: 9,
            captured_ms: 1_800_000_000_000,
            validators: Validators {
                etag: Some("W/\"x\"".into()),
                last_modified: None,
                payload_digest: Some("sha1:ABC".into()),
            },
        };
        let b = encode(&rec);
        assert_eq!(decode(&b).unwrap(), rec);
        assert_eq!(
            decode(&encode(&RevisitRecord::default())).unwrap(),
            RevisitRecord::default()
        );
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "prefix of {n} bytes accepted");
        }
    }

    #[test]
    fn locators_round_trip_and_refuse_truncation() {
        let l = Locator {
            slot_ms: 1_800_000_000_000,
            id: 42,
            fetched_ms: 1_799_000_000_000,
        };
        let b = encode_locator(&l);
        assert_eq!(decode_locator(&b).unwrap(), l);
        for n in 0..b.len() {
            assert!(
                decode_locator(&b[..n]).is_err(),
                "prefix of {n} bytes accepted"
            );
        }
    }

    #[test]
    fn due_values_round_trip_and_refuse_truncation() {
        let entries = vec![
            (5u64, b"abc".to_vec()),
            (7, Vec::new()),
            (9, b"xy".to_vec()),
        ];
        let v = encode_due(&entries);
        let back: Vec<(u64, Vec<u8>)> = decode_due(&v)
            .unwrap()
            .into_iter()
            .map(|(d, e)| (d, e.to_vec()))
            .collect();
        assert_eq!(back, entries);
        assert!(decode_due(&[]).unwrap().is_empty());
        for n in [1, 11, 12, 14, v.len() - 1] {
            assert!(decode_due(&v[..n]).is_err(), "cut at {n}");
        }
    }
}
