//! The URL message format on `frontierd.urls.<shard>` and `frontierd.intake`.
//!
//! A message body is lines (`\n`, an optional `\r` before it is dropped). Each line is one of:
//! - blank, or starting with `#`: skipped;
//! - starting with `{`: a JSON object `{"url": "...", "depth": 2, "via": "...", "hops": "LL"}`
//!   (`url` required; `depth` defaults to 0, `via` to none, `hops` to empty; other fields
//!   are refused so a typo is not silently ignored);
//! - anything else: a URL, trimmed, with depth 0 (a seed).
//!
//! Lines that are not UTF-8 are rejected, never rewritten (the daemon's intake rule): a
//! rewritten URL would be a different URL. Every rejection names its 1-based line number and
//! the reason. The parser takes arbitrary bytes and never panics (see the proptests).

use serde::{Deserialize, Serialize};

/// Longest line read; longer lines are rejected whole (a URL is capped well below this by
/// the frontier's `max_url_len`, and JSON adds little).
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One URL with the fields frontier's `EnqueueItem` has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlRecord {
    pub url: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hops: String,
    /// Handed off by the shard's last holder (`"handoff": true`): queued by the new owner
    /// even if its seen-set knows it (it may have held the shard before, and the URL was
    /// never fetched since it left).
    #[serde(default, skip_serializing_if = "is_false")]
    pub handoff: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl UrlRecord {
    /// A queued entry handed to the next owner of its shard (`handoff`), with where it came
    /// from.
    pub fn handed_off(e: frontier::QueueEntry) -> UrlRecord {
        UrlRecord {
            url: e.url,
            depth: e.depth,
            via: e.via,
            hops: e.hops,
            handoff: true,
        }
    }

    /// A seed: depth 0, no via, no hops.
    pub fn seed(url: impl Into<String>) -> UrlRecord {
        UrlRecord {
            url: url.into(),
            depth: 0,
            via: None,
            hops: String::new(),
            handoff: false,
        }
    }
}

impl From<UrlRecord> for frontier::EnqueueItem {
    fn from(r: UrlRecord) -> frontier::EnqueueItem {
        frontier::EnqueueItem {
            url: r.url,
            depth: r.depth,
            via: r.via,
            hops: r.hops,
            ..frontier::EnqueueItem::default()
        }
    }
}

impl From<frontier::EnqueueItem> for UrlRecord {
    fn from(i: frontier::EnqueueItem) -> UrlRecord {
        UrlRecord {
            url: i.url,
            depth: i.depth,
            via: i.via,
            hops: i.hops,
            handoff: false,
        }
    }
}

/// A refused line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number in the message.
    pub line: usize,
    /// Reason code (a metric label): `not-utf8`, `too-long`, `bad-json`, `empty-url`.
    pub code: &'static str,
    /// The code and what is wrong.
    pub reason: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// A parsed message: the URLs in order, and the lines refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedBatch {
    pub records: Vec<UrlRecord>,
    pub rejected: Vec<LineError>,
}

/// Parse a message body (see the module docs).
pub fn parse_batch(body: &[u8]) -> ParsedBatch {
    let mut out = ParsedBatch::default();
    if body.is_empty() {
        return out;
    }
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let bytes = raw.strip_suffix(b"\r").unwrap_or(raw);
        match parse_line(bytes) {
            Ok(Some(record)) => out.records.push(record),
            Ok(None) => {}
            Err((code, reason)) => out.rejected.push(LineError {
                line,
                code,
                reason: format!("{code}: {reason}"),
            }),
        }
    }
    out
}

fn parse_line(bytes: &[u8]) -> Result<Option<UrlRecord>, (&'static str, String)> {
    let trimmed = bytes.trim_ascii();
    if trimmed.is_empty() || trimmed.starts_with(b"#") {
        return Ok(None);
    }
    if bytes.len() > MAX_LINE_BYTES {
        return Err((
            "too-long",
            format!(
                "{} bytes, lines over {MAX_LINE_BYTES} are not read",
                bytes.len()
            ),
        ));
    }
    let text = std::str::from_utf8(trimmed).map_err(|e| {
        let at = e.valid_up_to();
        let byte = trimmed.get(at).copied().unwrap_or(0);
        ("not-utf8", format!("byte 0x{byte:02X} at offset {at}"))
    })?;
    let record = if text.starts_with('{') {
        serde_json::from_str::<UrlRecord>(text).map_err(|e| ("bad-json", e.to_string()))?
    } else {
        UrlRecord::seed(text)
    };
    if record.url.trim().is_empty() {
        return Err(("empty-url", "the url field is empty".into()));
    }
    Ok(Some(record))
}

/// Encode records as a message body [`parse_batch`] reads back to the same records: a
/// plain line for a seed whose URL survives trimming, a JSON line otherwise.
pub fn encode_batch(records: &[UrlRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        encode_record(r, &mut out);
    }
    out
}

/// Append one record's line to `out`.
pub fn encode_record(r: &UrlRecord, out: &mut Vec<u8>) {
    let plain = r.depth == 0
        && !r.handoff
        && r.via.is_none()
        && r.hops.is_empty()
        && !r.url.is_empty()
        && r.url.trim() == r.url
        && !r.url.starts_with(['{', '#'])
        && !r.url.contains(['\n', '\r']);
    if plain {
        out.extend_from_slice(r.url.as_bytes());
    } else {
        // serializing a struct of strings and a u32 cannot fail
        match serde_json::to_vec(r) {
            Ok(json) => out.extend_from_slice(&json),
            Err(_) => unreachable!("UrlRecord serializes"),
        }
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_and_json_lines_parse_with_their_fields() {
        let body = b"http://a.test/\r\n\n# note\n{\"url\":\"http://b.test/x\",\"depth\":2,\"via\":\"http://a.test/\",\"hops\":\"LL\"}\n  http://c.test/  \n";
        let p = parse_batch(body);
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
        assert_eq!(
            p.records,
            vec![
                UrlRecord::seed("http://a.test/"),
                UrlRecord {
                    url: "http://b.test/x".into(),
                    depth: 2,
                    via: Some("http://a.test/".into()),
                    hops: "LL".into(),
                    handoff: false,
                },
                UrlRecord::seed("http://c.test/"),
            ]
        );
    }

    #[test]
    fn bad_lines_are_rejected_by_number_and_reason_not_rewritten() {
        let mut body = b"http://ok.test/\nhttp://caf\xE9.test/\n{\"url\":1}\n{\"url\":\"\"}\n{\"url\":\"http://x.test/\",\"dpth\":1}\n".to_vec();
        body.extend(vec![b'a'; MAX_LINE_BYTES + 1]);
        let p = parse_batch(&body);
        assert_eq!(p.records, vec![UrlRecord::seed("http://ok.test/")]);
        let got: Vec<(usize, &str)> = p.rejected.iter().map(|e| (e.line, e.code)).collect();
        assert_eq!(
            got,
            vec![
                (2, "not-utf8"),
                (3, "bad-json"),
                (4, "empty-url"),
                (5, "bad-json"),
                (6, "too-long")
            ]
        );
        assert_eq!(
            p.rejected[0].to_string(),
            "line 2: not-utf8: byte 0xE9 at offset 10"
        );
        assert!(
            p.rejected[3].reason.contains("dpth"),
            "{}",
            p.rejected[3].reason
        );
    }

    #[test]
    fn records_convert_to_and_from_enqueue_items() {
        let r = UrlRecord {
            url: "http://a.test/".into(),
            depth: 3,
            via: Some("http://v.test/".into()),
            hops: "LLR".into(),
            handoff: false,
        };
        let item: frontier::EnqueueItem = r.clone().into();
        assert_eq!((item.depth, item.hops.as_str()), (3, "LLR"));
        assert_eq!(UrlRecord::from(item), r);
    }

    fn record() -> impl Strategy<Value = UrlRecord> {
        (
            "\\PC{1,40}",
            0u32..5,
            proptest::option::of("\\PC{0,20}"),
            "[LRE]{0,4}",
            any::<bool>(),
        )
            .prop_filter("url not blank", |(u, ..)| !u.trim().is_empty())
            .prop_map(|(url, depth, via, hops, handoff)| UrlRecord {
                url,
                depth,
                via,
                hops,
                handoff,
            })
    }

    proptest! {
        #[test]
        fn encoded_batches_parse_back_unchanged(records in proptest::collection::vec(record(), 0..20)) {
            let p = parse_batch(&encode_batch(&records));
            prop_assert!(p.rejected.is_empty(), "{:?}", p.rejected);
            prop_assert_eq!(p.records, records);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_every_line_is_accounted(body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let p = parse_batch(&body);
            let lines = if body.is_empty() { 0 } else { body.strip_suffix(b"\n").unwrap_or(&body).split(|&b| b == b'\n').count() };
            prop_assert!(p.records.len() + p.rejected.len() <= lines);
            for e in &p.rejected {
                prop_assert!(e.line >= 1 && e.line <= lines);
            }
        }
    }
}
