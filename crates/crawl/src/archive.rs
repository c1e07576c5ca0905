//! What of a response goes into the WARC file: the head rewritten to describe the body as
//! archived, and why the body was cut, if it was.

use fetcher::{ResponseRecord, RobotsHop};
use warc::{Exchange, Truncated};

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
    let (body, drop_content_encoding): (&[u8], bool) = match &resp.wire_body {
        Some(w) => (w, false),
        None => (&resp.body, resp.content_coding.is_decoded()),
    };
    // the head written without the dropped headers, not a copy of the record without
    // them (header names are lower case)
    let head = resp.head_bytes_keeping(|name| match name.as_str() {
        "transfer-encoding" => false,
        "content-encoding" => !drop_content_encoding,
        _ => true,
    });
    let truncated = if resp.truncated {
        Some(Truncated::Length)
    } else if resp.body_error.is_some() {
        Some(Truncated::Disconnect)
    } else {
        None
    };
    ArchivedResponse {
        head,
        body,
        truncated,
    }
}

/// Each request of a robots.txt fetch's chain that got an answer, as archived, handed to
/// `archive` in order; the bytes of their bodies.
pub fn robots_exchanges(hops: &[RobotsHop], mut archive: impl FnMut(&Exchange<'_>)) -> u64 {
    let mut bytes = 0;
    for hop in hops {
        let Some(resp) = &hop.response else {
            continue;
        };
        bytes += resp.body.len() as u64;
        let request_head = hop.request.head_bytes();
        let archived = archive_response(resp);
        archive(&Exchange {
            target_uri: hop.request.url.as_str(),
            ip: hop.peer_addr.map(|a| a.ip()),
            date: hop.started_at,
            request_head: &request_head,
            response_head: &archived.head,
            response_body: archived.body,
            truncated: archived.truncated,
            payload_digest: None,
        });
    }
    bytes
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

    #[test]
    fn a_robots_chain_is_archived_hop_by_hop_answered_ones_only() {
        let hop = |url: &str, resp: Option<ResponseRecord>| RobotsHop {
            request: fetcher::RequestRecord {
                method: http::Method::GET,
                url: fetcher::Url::parse(url).unwrap(),
                version: Default::default(),
                headers: HeaderMap::new(),
            },
            response: resp,
            peer_addr: Some("127.0.0.1:80".parse().unwrap()),
            started_at: std::time::UNIX_EPOCH,
        };
        let hops = [
            hop(
                "http://a.test/robots.txt",
                Some(response(&[("transfer-encoding", "chunked")])),
            ),
            hop("http://b.test/robots.txt", None),
            hop("http://c.test/robots.txt", Some(response(&[]))),
        ];
        let mut seen = Vec::new();
        let bytes = robots_exchanges(&hops, |ex| {
            let head = String::from_utf8_lossy(ex.response_head).to_ascii_lowercase();
            assert!(!head.contains("transfer-encoding"), "{head}");
            assert!(String::from_utf8_lossy(ex.request_head).starts_with("GET /robots.txt"));
            assert_eq!(ex.ip, Some("127.0.0.1".parse().unwrap()));
            assert_eq!(ex.payload_digest, None);
            seen.push(ex.target_uri.to_string());
        });
        assert_eq!(
            seen,
            ["http://a.test/robots.txt", "http://c.test/robots.txt"]
        );
        assert_eq!(bytes, 2 * b"decoded".len() as u64);
    }
}
