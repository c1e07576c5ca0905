//! A URL list sent as JSON: an array of URL strings, or of `{"url", "revisit_interval",
//! "refetch_at", "kind"}` objects. Errors name the element (or the byte) and the reason.

use crate::url_list::{self, Batch};

/// Whether a body is a JSON list rather than lines (its first non-blank byte is `[`).
pub fn is_json(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// `kind` of a JSON element: `page` (the default) or `sitemap`.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
enum JsonKind {
    #[default]
    Page,
    Sitemap,
}

/// A JSON array of URL strings or `{"url", "kind"}` objects; the error names the position
/// of what is wrong.
pub fn parse(body: &[u8]) -> std::result::Result<Batch, String> {
    let text = std::str::from_utf8(body).map_err(|e| {
        let at = e.valid_up_to();
        let line = body[..at].iter().filter(|b| **b == b'\n').count() + 1;
        let column = at
            - body[..at]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        format!(
            "body is not UTF-8: byte 0x{:02X} at offset {at} (line {line}, column {column})",
            body.get(at).copied().unwrap_or(0)
        )
    })?;
    let elements = serde_json::from_str::<Vec<JsonUrl>>(text).map_err(|e| {
        format!("expected a JSON array of URL strings or {{\"url\", \"revisit_interval\", \"refetch_at\", \"kind\": \"page\" | \"sitemap\"}} objects: {e}")
    })?;
    let mut urls = Vec::with_capacity(elements.len());
    let mut recrawl = std::collections::BTreeMap::new();
    let mut kinds = std::collections::BTreeMap::new();
    for (i, e) in elements.into_iter().enumerate() {
        match e {
            JsonUrl::Plain(u) => urls.push(u),
            JsonUrl::WithFields {
                url,
                revisit_interval,
                refetch_at,
                kind,
            } => {
                if let JsonKind::Sitemap = kind {
                    kinds.insert(
                        i,
                        frontier::EntryKind::Sitemap(frontier::SitemapSource::Listed),
                    );
                }
                let fields = url_list::UrlRecrawl {
                    revisit_interval_ms: revisit_interval
                        .map(|s| interval_ms(&s))
                        .transpose()
                        .map_err(|why| format!("element {}: revisit_interval: {why}", i + 1))?,
                    refetch_at_ms: refetch_at
                        .map(|s| rfc3339_ms(&s))
                        .transpose()
                        .map_err(|why| format!("element {}: refetch_at: {why}", i + 1))?,
                };
                recrawl.insert(i, fields);
                urls.push(url);
            }
        }
    }
    let mut batch = Batch::from_urls(urls);
    batch.recrawl = recrawl;
    batch.kinds = kinds;
    Ok(batch)
}

/// One element of a JSON URL list: a URL, or a URL with its own recrawl fields.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum JsonUrl {
    Plain(String),
    WithFields {
        url: String,
        revisit_interval: Option<String>,
        refetch_at: Option<String>,
        #[serde(default)]
        kind: JsonKind,
    },
}

/// `"off"` (0: never revisit) or a duration such as `"6h"`, in ms.
fn interval_ms(s: &str) -> std::result::Result<u64, String> {
    if s.trim() == "off" {
        return Ok(0);
    }
    humantime::parse_duration(s.trim())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| format!("{s:?} is not \"off\" or a duration such as \"6h\" ({e})"))
}

/// An RFC 3339 instant such as `"2026-12-01T00:00:00Z"`, in unix ms.
fn rfc3339_ms(s: &str) -> std::result::Result<u64, String> {
    humantime::parse_rfc3339_weak(s.trim())
        .map_err(|e| {
            format!("{s:?} is not an RFC 3339 time such as \"2026-12-01T00:00:00Z\" ({e})")
        })
        .map(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_objects_become_one_batch_with_their_fields() {
        let b = parse(
            br#"["https://a.example/", {"url": "https://b.example/s.xml", "kind": "sitemap"},
               {"url": "https://c.example/", "revisit_interval": "off", "refetch_at": "2026-12-01T00:00:00Z"}]"#,
        )
        .expect("a valid list");
        assert_eq!(b.urls.len(), 3);
        assert_eq!(b.urls[2], (3, "https://c.example/".to_string()));
        assert!(b.kinds.contains_key(&1));
        let r = b.recrawl[&2];
        assert_eq!(r.revisit_interval_ms, Some(0));
        assert_eq!(r.refetch_at_ms, Some(1_796_083_200_000));
    }

    #[test]
    fn errors_name_the_element_or_the_byte() {
        let e = parse(br#"[{"url": "https://a.example/", "revisit_interval": "soon"}]"#)
            .expect_err("a bad interval");
        assert!(
            e.starts_with("element 1: revisit_interval: \"soon\""),
            "{e}"
        );
        let e = parse(b"[\"https://a.example/\xff\"]").expect_err("not UTF-8");
        assert!(
            e.contains("byte 0xFF at offset 20 (line 1, column 21)"),
            "{e}"
        );
        assert!(parse(b"[1, 2]").is_err());
    }
}
