//! One crawl log line: what happened to a URL, where it came from, what was fetched and
//! where it was archived. Field by field, with the Heritrix crawl.log column each one
//! corresponds to: docs/crawl-log.md. Every field is present in every line (null when it
//! does not apply), so a reader never has to guess whether a field was forgotten.

use std::net::IpAddr;

use frontier::{DropReason, VisitOutcome};

use crate::discovery;

/// What happened to a URL: the `outcome` field, and the label of the
/// `frontierd_crawl_outcomes` metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Fetched, whatever the status (a 404 is a fetched page).
    Fetched,
    /// Answered with a redirect; the `Location` was queued, or was unusable.
    Redirected,
    /// Answered with a redirect past `scope.max_redirect_hops`: not followed.
    RedirectLimit,
    /// Dropped by robots.txt (a rule, or a crawl-delay over the cap).
    BlockedByRobots,
    /// Dropped after its last retry failed.
    GivenUp,
    /// A submitted line the canonicalizer refused.
    Rejected,
    /// Not fetched: the address policy refuses the address its host is on (the reason
    /// names the address and the rule).
    BlockedAddress,
}

impl Outcome {
    /// Every outcome, in the order of docs/crawl-log.md.
    pub const ALL: [Outcome; 7] = [
        Outcome::Fetched,
        Outcome::Redirected,
        Outcome::RedirectLimit,
        Outcome::BlockedByRobots,
        Outcome::GivenUp,
        Outcome::Rejected,
        Outcome::BlockedAddress,
    ];

    /// The word written in the `outcome` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Fetched => "fetched",
            Outcome::Redirected => "redirected",
            Outcome::RedirectLimit => "redirect-limit",
            Outcome::BlockedByRobots => "blocked-by-robots",
            Outcome::GivenUp => "given-up",
            Outcome::Rejected => "rejected",
            Outcome::BlockedAddress => "blocked-address",
        }
    }

    /// The outcome of a URL the frontier dropped.
    pub fn of_drop(reason: DropReason) -> Outcome {
        match reason {
            DropReason::RobotsDisallowed | DropReason::CrawlDelayTooLong => {
                Outcome::BlockedByRobots
            }
            DropReason::GaveUp => Outcome::GivenUp,
        }
    }
}

/// Where a URL came from, as queued with it.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// Link depth (0 for a submitted URL).
    pub depth: u32,
    /// The page it was found on or redirected from (None for a submitted URL).
    pub via: Option<&'a str>,
    /// Hop path from its seed (see [`crate::discovery`]).
    pub hops: &'a str,
}

impl Found<'_> {
    /// A submitted URL.
    pub const SUBMITTED: Found<'static> = Found {
        depth: 0,
        via: None,
        hops: "",
    };
}

/// Where the response went in the WARC output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    /// File name (the final `.warc.gz` name, also while the file is still `.open`).
    pub file: String,
    /// Offset of the response record's gzip member in that file.
    pub offset: u64,
    /// The response record's `WARC-Payload-Digest`.
    pub payload_digest: String,
}

/// One line.
#[derive(Debug, Clone)]
pub struct LogLine<'a> {
    pub url: &'a str,
    pub outcome: Outcome,
    pub status: Option<u16>,
    pub bytes: u64,
    pub duration_ms: u64,
    pub reason: &'a str,
    pub found: Found<'a>,
    /// Media type of the response (`Content-Type` without parameters, lower case).
    pub content_type: Option<String>,
    /// The peer the fetch talked to.
    pub ip: Option<IpAddr>,
    pub archived: Option<&'a Archived>,
    /// A fetch with an answer: first visit, or a revisit and what it found (None when
    /// nothing was fetched).
    pub visit: Option<VisitOutcome>,
}

impl<'a> LogLine<'a> {
    /// A line with no fetch behind it (a rejected, dropped or given-up URL).
    pub fn unfetched(url: &'a str, outcome: Outcome, reason: &'a str, found: Found<'a>) -> Self {
        LogLine {
            url,
            outcome,
            status: None,
            bytes: 0,
            duration_ms: 0,
            reason,
            found,
            content_type: None,
            ip: None,
            archived: None,
            visit: None,
        }
    }

    /// The JSON object, `time` being the RFC 3339 instant of logging.
    pub fn to_json(&self, time: &str) -> serde_json::Value {
        serde_json::to_value(self.fields(time)).unwrap_or(serde_json::Value::Null)
    }

    /// The line as written to the crawl log (no newline): the same object as
    /// [`LogLine::to_json`], serialized straight from the fields. A `Value` first cost a
    /// map node and a copy of every string per line, on the path of every fetch.
    pub fn to_json_line(&self, time: &str) -> String {
        // serializing borrowed strings and numbers cannot fail
        serde_json::to_string(&self.fields(time)).unwrap_or_default()
    }

    fn fields<'s>(&'s self, time: &'s str) -> JsonFields<'s> {
        JsonFields {
            bytes: self.bytes,
            content_type: self.content_type.as_deref(),
            depth: self.found.depth,
            discovery: discovery::kind(self.found.hops, self.found.depth),
            duration_ms: self.duration_ms,
            hop_path: self.found.hops,
            ip: self.ip,
            outcome: self.outcome.as_str(),
            payload_digest: self.archived.map(|a| a.payload_digest.as_str()),
            reason: self.reason,
            revisit: self
                .visit
                .filter(|v| *v != VisitOutcome::First)
                .map(VisitOutcome::as_str),
            status: self.status,
            time,
            url: self.url,
            via: self.found.via,
            visit: self.visit.map(|v| match v {
                VisitOutcome::First => "first",
                _ => "revisit",
            }),
            warc_file: self.archived.map(|a| a.file.as_str()),
            warc_offset: self.archived.map(|a| a.offset),
        }
    }
}

/// A line's fields, in the (alphabetical) order the log has always had them. What each
/// means, and its Heritrix column: docs/crawl-log.md.
#[derive(serde::Serialize)]
struct JsonFields<'a> {
    bytes: u64,
    content_type: Option<&'a str>,
    depth: u32,
    discovery: Option<&'static str>,
    duration_ms: u64,
    hop_path: &'a str,
    /// Written as text ("127.0.0.1"), as `IpAddr`'s serde form is for a text format.
    ip: Option<IpAddr>,
    outcome: &'static str,
    payload_digest: Option<&'a str>,
    reason: &'a str,
    revisit: Option<&'static str>,
    status: Option<u16>,
    time: &'a str,
    url: &'a str,
    via: Option<&'a str>,
    visit: Option<&'static str>,
    warc_file: Option<&'a str>,
    warc_offset: Option<u64>,
}

/// The media type of a `Content-Type` value: parameters dropped, lower case (Heritrix logs
/// it the same way). None when empty.
pub fn media_type(content_type: &str) -> Option<String> {
    let t = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    (!t.is_empty()).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_fields_keep_their_names_and_new_ones_are_added() {
        let archived = Archived {
            file: "frontierd-20260101000000000-00001.warc.gz".into(),
            offset: 1234,
            payload_digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ".into(),
        };
        let line = LogLine {
            url: "http://a.test/x",
            outcome: Outcome::Fetched,
            status: Some(200),
            bytes: 10,
            duration_ms: 5,
            reason: "",
            found: Found {
                depth: 2,
                via: Some("http://a.test/r"),
                hops: "LR",
            },
            content_type: media_type("Text/HTML; charset=utf-8"),
            ip: Some("127.0.0.1".parse().unwrap()),
            archived: Some(&archived),
            visit: Some(VisitOutcome::IdenticalDigest),
        };
        let v = line.to_json("2026-01-01T00:00:00.000Z");
        let want = serde_json::json!({
            "time": "2026-01-01T00:00:00.000Z", "url": "http://a.test/x", "status": 200,
            "bytes": 10, "duration_ms": 5, "outcome": "fetched", "reason": "",
            "depth": 2, "via": "http://a.test/r", "discovery": "redirect", "hop_path": "LR",
            "content_type": "text/html", "ip": "127.0.0.1",
            "payload_digest": "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
            "warc_file": "frontierd-20260101000000000-00001.warc.gz", "warc_offset": 1234,
            "visit": "revisit", "revisit": "identical-digest",
        });
        assert_eq!(v, want);
        // a rejected submission: every field present, null where nothing applies
        let v =
            LogLine::unfetched("x", Outcome::Rejected, "no-host", Found::SUBMITTED).to_json("t");
        assert_eq!(
            v.as_object().unwrap().len(),
            want.as_object().unwrap().len()
        );
        assert_eq!(
            (
                &v["discovery"],
                &v["hop_path"],
                &v["via"],
                &v["warc_offset"],
                &v["status"]
            ),
            (
                &serde_json::json!("seed"),
                &serde_json::json!(""),
                &serde_json::Value::Null,
                &serde_json::Value::Null,
                &serde_json::Value::Null
            )
        );
    }

    #[test]
    fn the_written_line_is_the_object_with_its_keys_in_the_order_the_log_always_had() {
        let archived = Archived {
            file: "f.warc.gz".into(),
            offset: 7,
            payload_digest: "sha1:X".into(),
        };
        let line = LogLine {
            url: "http://a.test/\"q\"",
            outcome: Outcome::Fetched,
            status: Some(304),
            bytes: 0,
            duration_ms: 12,
            reason: "",
            found: Found {
                depth: 1,
                via: Some("http://a.test/"),
                hops: "L",
            },
            content_type: None,
            ip: Some("::1".parse().unwrap()),
            archived: Some(&archived),
            visit: Some(VisitOutcome::NotModified),
        };
        let text = line.to_json_line("T");
        assert_eq!(
            text,
            concat!(
                r#"{"bytes":0,"content_type":null,"depth":1,"discovery":"link","duration_ms":12,"#,
                r#""hop_path":"L","ip":"::1","outcome":"fetched","payload_digest":"sha1:X","#,
                r#""reason":"","revisit":"not-modified","status":304,"time":"T","#,
                r#""url":"http://a.test/\"q\"","via":"http://a.test/","visit":"revisit","#,
                r#""warc_file":"f.warc.gz","warc_offset":7}"#
            )
        );
        // the same object as the Value form, which sorts its keys
        assert_eq!(text, line.to_json("T").to_string());
    }

    #[test]
    fn outcomes_are_the_documented_words() {
        let words: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            words,
            [
                "fetched",
                "redirected",
                "redirect-limit",
                "blocked-by-robots",
                "given-up",
                "rejected",
                "blocked-address"
            ]
        );
        assert_eq!(
            Outcome::of_drop(DropReason::CrawlDelayTooLong),
            Outcome::BlockedByRobots
        );
        assert_eq!(
            Outcome::of_drop(DropReason::RobotsDisallowed),
            Outcome::BlockedByRobots
        );
        assert_eq!(Outcome::of_drop(DropReason::GaveUp), Outcome::GivenUp);
    }

    #[test]
    fn media_type_drops_parameters() {
        assert_eq!(media_type("text/html").as_deref(), Some("text/html"));
        assert_eq!(
            media_type(" Application/XHTML+XML ;q=1").as_deref(),
            Some("application/xhtml+xml")
        );
        assert_eq!(media_type(""), None);
        assert_eq!(media_type("; charset=x"), None);
    }
}
