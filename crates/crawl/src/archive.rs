//! What of a response goes into the WARC file: the head rewritten to describe the body as
//! archived, and why the body was cut, if it was.

use fetcher::ResponseRecord;
use warc::Truncated;

/// A response as it is archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedResponse<'a> {
    /// Status line and headers, without the framing the body no longer has.
    pub head: Vec<u8>,
    /// The body as received on the wire (de-chunked; still content-encoded when the
    /// fetcher kept the wire bytes).
    pub body: &'a [u8],
    /// Why the body was cut short, if it was.
    pub truncated: Option<Truncated>,
}

/// The head as it should be archived: the body handed to WARC is de-chunked, so
/// `Transfer-Encoding` must not be announced; a body the fetcher decoded without keeping
/// the wire bytes is archived decoded, so `Content-Encoding` goes too (replay tools would
/// decode it a second time).
pub fn archive_response(resp: &ResponseRecord) -> ArchivedResponse<'_> {
    let mut r = resp.clone();
    r.headers.remove("transfer-encoding");
    let body: &[u8] = match &resp.wire_body {
        Some(w) => w,
        None => {
            if resp.content_coding.is_decoded() {
                r.headers.remove("content-encoding");
            }
            &resp.body
        }
    };
    let truncated = if resp.truncated {
        Some(Truncated::Length)
    } else if resp.body_error.is_some() {
        Some(Truncated::Disconnect)
    } else {
        None
    };
    ArchivedResponse {
        head: r.head_bytes(),
        body,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use fetcher::{ContentCoding, HeaderMap, NetworkErrorKind, StatusCode};

    use super::*;

    fn response(headers: &[(&'static str, &'static str)]) -> ResponseRecord {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(*k, v.parse().unwrap());
        }
        ResponseRecord {
            status: StatusCode::OK,
            version: Default::default(),
            headers: map,
            body: b"decoded".to_vec().into(),
            wire_body: None,
            content_coding: ContentCoding::Identity,
            truncated: false,
            body_error: None,
        }
    }

    fn head(a: &ArchivedResponse<'_>) -> String {
        String::from_utf8(a.head.clone())
            .unwrap()
            .to_ascii_lowercase()
    }

    #[test]
    fn chunking_is_never_announced() {
        let r = response(&[
            ("transfer-encoding", "chunked"),
            ("content-type", "text/html"),
        ]);
        let a = archive_response(&r);
        assert!(!head(&a).contains("transfer-encoding"), "{}", head(&a));
        assert!(head(&a).contains("content-type: text/html"));
        assert_eq!(a.body, b"decoded");
        assert_eq!(a.truncated, None);
    }

    #[test]
    fn a_decoded_body_loses_its_content_encoding_the_wire_body_keeps_it() {
        let mut r = response(&[("content-encoding", "gzip")]);
        r.content_coding = ContentCoding::Gzip;
        let a = archive_response(&r);
        assert!(!head(&a).contains("content-encoding"));
        assert_eq!(a.body, b"decoded");
        r.wire_body = Some(b"\x1f\x8bwire".to_vec().into());
        let a = archive_response(&r);
        assert!(head(&a).contains("content-encoding: gzip"));
        assert_eq!(a.body, b"\x1f\x8bwire");
    }

    #[test]
    fn cut_bodies_say_why() {
        let mut r = response(&[]);
        r.body_error = Some(NetworkErrorKind::Reset);
        assert_eq!(archive_response(&r).truncated, Some(Truncated::Disconnect));
        r.truncated = true;
        assert_eq!(archive_response(&r).truncated, Some(Truncated::Length));
    }
}
