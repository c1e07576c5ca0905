//! What a fetch of a URL visited before means: the conditional request to send, whether
//! the answer changed (a 304, the same payload digest, or new content), how it is archived
//! (a WARC `revisit` record or a full response) and what the schedule keeps of it
//! (`docs/recrawl.md`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fetcher::{Conditional, HeaderMap, PageFetch};
use frontier::{RevisitRecord, Validators, Visit, VisitOutcome};
use warc::{Exchange, Revisit, RevisitProfile};

use crate::archive::{archive_response, ArchivedResponse};

/// The earlier visit a fetch is compared with: the record on the lease when the URL was
/// answered before (a record made only to carry a per-URL interval is not a visit).
pub fn previous(revisit: Option<&RevisitRecord>) -> Option<&RevisitRecord> {
    revisit.filter(|r| r.visits > 0)
}

/// The conditional request for a revisit: the last answer's validators.
pub fn conditional(previous: Option<&RevisitRecord>) -> Conditional {
    match previous {
        None => Conditional::default(),
        Some(r) => Conditional {
            if_none_match: r.validators.etag.clone(),
            if_modified_since: r.validators.last_modified.clone(),
        },
    }
}

/// Compare an answer with the earlier visit. `payload_digest` is the digest of the body
/// as archived (`warc::payload_digest`).
pub fn judge(previous: Option<&RevisitRecord>, status: u16, payload_digest: &str) -> VisitOutcome {
    let Some(prev) = previous else {
        return VisitOutcome::First;
    };
    if status == 304 {
        return VisitOutcome::NotModified;
    }
    let same = prev.validators.payload_digest.as_deref() == Some(payload_digest);
    if (200..300).contains(&status) && same {
        VisitOutcome::IdenticalDigest
    } else {
        VisitOutcome::Changed
    }
}

/// How to archive the answer: a `revisit` record referring to the capture of the earlier
/// payload when there is one to refer to, else None (a full response record).
pub fn warc_revisit<'a>(
    outcome: VisitOutcome,
    previous: Option<&RevisitRecord>,
    url: &'a str,
) -> Option<Revisit<'a>> {
    let profile = match outcome {
        VisitOutcome::NotModified => RevisitProfile::ServerNotModified,
        VisitOutcome::IdenticalDigest => RevisitProfile::IdenticalPayloadDigest,
        VisitOutcome::First | VisitOutcome::Changed => return None,
    };
    let captured = previous.map(|p| p.captured_ms).filter(|&ms| ms > 0)?;
    Some(Revisit {
        profile,
        refers_to_uri: url,
        refers_to_date: UNIX_EPOCH + Duration::from_millis(captured),
    })
}

/// What the schedule keeps of an answer: its status, the comparison, the validators it
/// carried and the digest of its payload (none for a 304: it has no payload).
pub fn visit(
    status: u16,
    outcome: VisitOutcome,
    headers: &HeaderMap,
    payload_digest: &str,
    fetched_at: SystemTime,
) -> Visit {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    Visit {
        refetch_at_ms: None,
        status,
        outcome,
        validators: Validators {
            etag: header("etag"),
            last_modified: header("last-modified"),
            payload_digest: (status != 304).then(|| payload_digest.to_string()),
        },
        fetched_at_ms: fetched_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    }
}

/// A page's answer: how it is archived and what the recrawl schedule keeps of it.
#[derive(Debug)]
pub struct Answer<'a> {
    pub request_head: Vec<u8>,
    pub response: ArchivedResponse<'a>,
    /// The payload digest; empty when nothing will compare with it (see [`answer`]).
    pub digest: String,
    /// The answer compared with the earlier visit.
    pub outcome: VisitOutcome,
    /// Archived as a `revisit` record (else a full response).
    pub as_revisit: Option<Revisit<'a>>,
    pub visit: Visit,
    /// The `Content-Type`'s media type, for the crawl log.
    pub content_type: Option<String>,
    /// Body bytes received.
    pub bytes: u64,
    url: &'a str,
    ip: Option<std::net::IpAddr>,
    date: SystemTime,
}

/// Judge a page's answer (None: no response arrived) against `revisit`, the lease's record.
/// The payload digest is computed only when the URL was visited before or may be
/// scheduled (`schedules_any`: the `[recrawl]` configuration revisits some URLs); either
/// way the body is hashed once for it (and once more within the record's block digest).
pub fn answer<'a>(
    revisit: Option<&'a RevisitRecord>,
    schedules_any: bool,
    fetch: &'a PageFetch,
) -> Option<Answer<'a>> {
    let resp = fetch.response.as_ref()?;
    let previous = previous(revisit);
    let response = archive_response(resp);
    let status = resp.status.as_u16();
    let digest = match revisit.is_some() || schedules_any {
        true => warc::payload_digest(response.body),
        false => String::new(),
    };
    let outcome = judge(previous, status, &digest);
    let started_at = fetch.timings.started_at;
    Some(Answer {
        request_head: fetch.request.head_bytes(),
        as_revisit: warc_revisit(outcome, previous, fetch.url.as_str()),
        visit: visit(status, outcome, &resp.headers, &digest, started_at),
        content_type: resp
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::media_type),
        bytes: resp.body.len() as u64,
        response,
        digest,
        outcome,
        url: fetch.url.as_str(),
        ip: fetch.peer_addr.map(|a| a.ip()),
        date: started_at,
    })
}

impl Answer<'_> {
    /// The exchange to archive (its digest handed over when computed: not hashed again).
    pub fn exchange(&self) -> Exchange<'_> {
        Exchange {
            target_uri: self.url,
            ip: self.ip,
            date: self.date,
            request_head: &self.request_head,
            response_head: &self.response.head,
            response_body: self.response.body,
            truncated: self.response.truncated,
            payload_digest: (!self.digest.is_empty()).then_some(self.digest.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(status: u16, body: &'static [u8]) -> PageFetch {
        let url = fetcher::Url::parse("http://a.test/p").unwrap();
        let mut headers = HeaderMap::new();
        headers.append("content-type", "text/html; charset=utf-8".parse().unwrap());
        headers.append("etag", "\"v2\"".parse().unwrap());
        let status = fetcher::StatusCode::from_u16(status).unwrap();
        PageFetch {
            url: url.clone(),
            outcome: fetcher::FetchOutcome::ClientError { status },
            request: fetcher::RequestRecord {
                method: http::Method::GET,
                url,
                version: Default::default(),
                headers: HeaderMap::new(),
            },
            response: Some(fetcher::ResponseRecord {
                status,
                version: Default::default(),
                headers,
                body: body.to_vec().into(),
                wire_body: None,
                content_coding: fetcher::ContentCoding::Identity,
                truncated: false,
                body_error: None,
            }),
            peer_addr: Some("127.0.0.1:80".parse().unwrap()),
            timings: fetcher::Timings {
                started_at: UNIX_EPOCH + Duration::from_secs(1_714_564_800),
                time_to_headers: None,
                total: Duration::ZERO,
            },
        }
    }

    #[test]
    fn an_answer_is_digested_only_when_something_compares_with_it() {
        let f = fetched(200, b"same");
        let a = answer(None, false, &f).unwrap();
        assert_eq!(a.digest, "");
        assert_eq!(a.exchange().payload_digest, None);
        assert_eq!(a.outcome, VisitOutcome::First);
        assert_eq!(a.content_type.as_deref(), Some("text/html"));
        assert_eq!(
            (a.bytes, a.exchange().ip),
            (4, Some("127.0.0.1".parse().unwrap()))
        );
        assert_eq!(a.visit.validators.etag.as_deref(), Some("\"v2\""));
        let a = answer(None, true, &f).unwrap();
        assert_eq!(a.digest, warc::payload_digest(b"same"));
        assert_eq!(a.exchange().payload_digest, Some(a.digest.as_str()));
        assert!(a.as_revisit.is_none());
    }

    #[test]
    fn an_unchanged_answer_is_archived_as_a_revisit() {
        let f = fetched(200, b"same");
        let prev = seen_before(&warc::payload_digest(b"same"), None);
        let a = answer(Some(&prev), false, &f).unwrap();
        assert_eq!(a.outcome, VisitOutcome::IdenticalDigest);
        assert!(a.as_revisit.is_some());
        let none = PageFetch {
            response: None,
            ..fetched(200, b"")
        };
        assert!(answer(Some(&prev), true, &none).is_none());
    }

    fn seen_before(digest: &str, etag: Option<&str>) -> RevisitRecord {
        RevisitRecord {
            visits: 1,
            captured_ms: 1_700_000_000_000,
            validators: Validators {
                etag: etag.map(str::to_string),
                last_modified: Some("Tue, 14 Nov 2023 22:13:20 GMT".into()),
                payload_digest: Some(digest.into()),
            },
            ..RevisitRecord::default()
        }
    }

    #[test]
    fn first_visit_then_not_modified_identical_or_changed() {
        let prev = seen_before("sha1:A", Some("\"v1\""));
        assert_eq!(judge(None, 200, "sha1:A"), VisitOutcome::First);
        // a record that only carries a per-URL interval is no earlier visit
        let interval_only = RevisitRecord::default();
        assert_eq!(previous(Some(&interval_only)), None);
        assert_eq!(judge(Some(&prev), 304, ""), VisitOutcome::NotModified);
        assert_eq!(
            judge(Some(&prev), 200, "sha1:A"),
            VisitOutcome::IdenticalDigest
        );
        assert_eq!(judge(Some(&prev), 200, "sha1:B"), VisitOutcome::Changed);
        // the same (empty) body on an error page is no unchanged page
        assert_eq!(judge(Some(&prev), 404, "sha1:A"), VisitOutcome::Changed);
    }

    #[test]
    fn conditional_request_carries_the_last_validators() {
        let prev = seen_before("sha1:A", Some("\"v1\""));
        let c = conditional(previous(Some(&prev)));
        assert_eq!(c.if_none_match.as_deref(), Some("\"v1\""));
        assert_eq!(
            c.if_modified_since.as_deref(),
            Some("Tue, 14 Nov 2023 22:13:20 GMT")
        );
        assert_eq!(conditional(None), Conditional::default());
    }

    #[test]
    fn revisit_records_refer_to_the_earlier_capture() {
        let prev = seen_before("sha1:A", None);
        let url = "http://a.test/x";
        let r = warc_revisit(VisitOutcome::NotModified, Some(&prev), url).unwrap();
        assert_eq!(r.profile, RevisitProfile::ServerNotModified);
        assert_eq!(r.refers_to_uri, url);
        assert_eq!(
            r.refers_to_date,
            UNIX_EPOCH + Duration::from_millis(1_700_000_000_000)
        );
        let r = warc_revisit(VisitOutcome::IdenticalDigest, Some(&prev), url).unwrap();
        assert_eq!(r.profile, RevisitProfile::IdenticalPayloadDigest);
        assert!(warc_revisit(VisitOutcome::Changed, Some(&prev), url).is_none());
        // nothing archived to refer to: a full record
        let never = RevisitRecord {
            captured_ms: 0,
            ..prev
        };
        assert!(warc_revisit(VisitOutcome::NotModified, Some(&never), url).is_none());
    }

    #[test]
    fn a_304_keeps_no_payload_digest() {
        let mut h = HeaderMap::new();
        h.insert("etag", "\"v2\"".parse().unwrap());
        let t = UNIX_EPOCH + Duration::from_millis(5_000);
        let v = visit(304, VisitOutcome::NotModified, &h, "sha1:EMPTY", t);
        assert_eq!(v.validators.etag.as_deref(), Some("\"v2\""));
        assert_eq!(v.validators.payload_digest, None);
        assert_eq!(v.fetched_at_ms, 5_000);
        let v = visit(200, VisitOutcome::Changed, &HeaderMap::new(), "sha1:B", t);
        assert_eq!(v.validators.payload_digest.as_deref(), Some("sha1:B"));
    }
}
