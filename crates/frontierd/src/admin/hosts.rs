//! The admin API's host endpoints: `GET /v1/hosts` (listed, filtered by robots state),
//! `GET /v1/hosts/{host}` (one host with its origins' robots states) and
//! `POST /v1/hosts/{host}/pause|resume`, answered from the frontier's records.

use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};

use super::server::{bad_request, error, json};
use crate::admin::request::{self as admin_request, BadRequest};
use crate::daemon::shared::{now_ms, Shared};
use crate::internal_events::admin::HostPauseChanged;
use crate::internal_events::InternalEvent;

/// A host argument from the path, and the politeness key it names.
pub(super) struct HostArg {
    requested: String,
    key: String,
}

pub(super) fn host_arg(sh: &Shared, segment: &str) -> Result<HostArg, BadRequest> {
    let requested = admin_request::path_segment(segment)?;
    let key = admin_request::host_key(&requested, sh.frontier.config().key_mode)?;
    Ok(HostArg { requested, key })
}

pub(super) fn unknown_host(h: &HostArg) -> String {
    if h.requested == h.key {
        format!("unknown host {:?}: the frontier has no record of it", h.key)
    } else {
        format!(
            "unknown host {:?} (politeness key {:?}): the frontier has no record of it",
            h.requested, h.key
        )
    }
}

/// `POST /v1/hosts/{host}/pause|resume`. A host the frontier has no record of (never
/// submitted, or a typo) is a 404, unless `?create=true` asks to pause it ahead of its
/// first URL; resuming a host that is not paused and has no record is a 404 too.
pub(super) fn pause_or_resume(
    sh: &Shared,
    arg: &str,
    action: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    let create = if action == "pause" {
        admin_request::pause_query(query)
    } else {
        admin_request::no_query(query).map(|()| false)
    };
    let (create, h) = match create.and_then(|c| Ok((c, host_arg(sh, arg)?))) {
        Ok(x) => x,
        Err(e) => return bad_request(e),
    };
    let known = match sh.frontier.host_record(&h.key) {
        Ok(rec) => rec.is_some() || sh.frontier.is_paused(&h.key),
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{action} {}: {e:#}", h.key),
            )
        }
    };
    if !known && !create {
        let hint = if action == "pause" {
            "; add ?create=true to pause it before its first URL arrives"
        } else {
            ""
        };
        return error(
            StatusCode::NOT_FOUND,
            &format!("{}{hint}", unknown_host(&h)),
        );
    }
    let changed = if action == "pause" {
        sh.frontier.pause(&h.key)
    } else {
        let r = sh.frontier.resume(&h.key);
        sh.pipeline.kick();
        r
    };
    let changed = match changed {
        Ok(changed) => changed,
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{action} {}: {e:#}", h.key),
            )
        }
    };
    HostPauseChanged {
        host: &h.key,
        requested: &h.requested,
        action,
        changed,
        created: !known,
    }
    .emit(&sh.metrics);
    json(
        StatusCode::OK,
        &serde_json::json!({
            "host": h.key,
            "key": h.key,
            "requested": h.requested,
            "paused": sh.frontier.is_paused(&h.key),
            "changed": changed,
            "created": !known,
        }),
    )
}

fn origin_host(origin: &str) -> String {
    url::Url::parse(origin)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

fn host_matches_key(host: &str, key: &str) -> bool {
    host == key || host.ends_with(&format!(".{key}"))
}

fn robots_states(sh: &Shared) -> Result<Vec<(String, robots_policy::state::RobotsStatus)>> {
    let views = sh.frontier.origins(now_ms())?;
    Ok(views.into_iter().map(|o| (o.origin, o.status)).collect())
}

fn ms_time(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

fn host_json(sh: &Shared, key: &str, rec: &frontier::HostRecord) -> serde_json::Value {
    let now = now_ms();
    serde_json::json!({
        "host": key,
        // where its fetches last connected: hosts with the same address share its budget
        "ip": sh.frontier.host_address(key).ok().flatten().map(|ip| ip.to_string()),
        "queued": rec.counters.queued,
        "in_flight": rec.in_flight,
        "paused": sh.frontier.is_paused(key),
        "next_allowed": ms_time(rec.next_allowed_ms),
        "next_allowed_in_ms": rec.next_allowed_ms.saturating_sub(now),
        "backoff_level": rec.backoff_level,
        "backoff_until": (rec.backoff_until_ms > now).then(|| ms_time(rec.backoff_until_ms)),
        "crawl_delay_ms": rec.crawl_delay_ms,
        "last_response_ms": rec.last_response_ms,
        "skipped": rec.skipped != 0,
        "counters": {
            "enqueued": rec.counters.enqueued,
            "dispatched": rec.counters.dispatched,
            "completed": rec.counters.completed,
            "dropped": rec.counters.dropped,
            "given_up": rec.counters.given_up,
            "retried": rec.counters.retried,
            "robots_fetches": rec.counters.robots_fetches,
            "crawl_delay_clamped": rec.counters.crawl_delay_clamped,
        },
    })
}

fn origin_json(origin: &str, st: &robots_policy::state::RobotsStatus) -> serde_json::Value {
    serde_json::json!({
        "origin": origin,
        "robots_state": st.kind.as_str(),
        "since": st.since.map(|t| ms_time(t.0)),
        "expires": st.expires_at.map(|t| ms_time(t.0)),
        "fallback_at": st.fallback_at.map(|t| ms_time(t.0)),
        "next_fetch": ms_time(st.next_fetch_at.0),
        "attempt": st.attempt,
        "last_fetch": st.last_fetch.as_ref().map(|l| serde_json::json!({
            "at": ms_time(l.at.0),
            "outcome": format!("{:?}", l.outcome),
        })),
        "body_bytes": st.copy_body_len,
    })
}

/// Whether the robots state `origin` is in holds its URLs (nothing fetched, nothing
/// dropped): never fetched, stale (refetch due) or failing (5xx-disallow).
fn robots_holds(kind: robots_policy::state::RobotsStateKind) -> bool {
    use robots_policy::state::RobotsStateKind as K;
    matches!(kind, K::Unknown | K::Stale | K::ServerErrorDisallow)
}

/// Whether an origin belongs to a politeness key (a host, a registrable domain, or, with
/// `politeness.key = "origin"`, the origin itself).
fn origin_in_key(origin: &str, key: &str) -> bool {
    origin == key || host_matches_key(&origin_host(origin), key)
}

/// The robots summary of one host's origins: `"robots"` ("2 of 3 origins held"),
/// `"robots_states"` (origins per state) and `"robots_state"` (the one state they share,
/// or "mixed"; "unknown" when no origin has a record yet).
fn robots_summary(kinds: &[robots_policy::state::RobotsStateKind]) -> serde_json::Value {
    let mut per_state = serde_json::Map::new();
    for k in kinds {
        let n = per_state
            .get(k.as_str())
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        per_state.insert(k.as_str().to_string(), serde_json::json!(n + 1));
    }
    let held = kinds.iter().filter(|k| robots_holds(**k)).count();
    let state = match kinds.split_first() {
        None => "unknown",
        Some((first, rest)) if rest.iter().all(|k| k == first) => first.as_str(),
        Some(_) => "mixed",
    };
    let n = kinds.len();
    serde_json::json!({
        "robots": format!("{held} of {n} origin{} held", if n == 1 { "" } else { "s" }),
        "robots_held": held,
        "robots_states": per_state,
        "robots_state": state,
    })
}

pub(super) fn list_hosts(
    sh: &Shared,
    state: Option<&str>,
    limit: usize,
) -> Result<serde_json::Value> {
    let states = robots_states(sh)?;
    let mut out = Vec::new();
    for (key, rec) in sh.frontier.hosts(None, usize::MAX)? {
        if out.len() >= limit {
            break;
        }
        // every origin of the host, not only the first: one held origin next to good ones
        // is what an operator needs to see
        let kinds: Vec<robots_policy::state::RobotsStateKind> = states
            .iter()
            .filter(|(o, _)| origin_in_key(o, &key))
            .map(|(_, s)| s.kind)
            .collect();
        if let Some(want) = state {
            let matched =
                kinds.iter().any(|k| k.as_str() == want) || (kinds.is_empty() && want == "unknown");
            if !matched {
                continue;
            }
        }
        let mut v = host_json(sh, &key, &rec);
        if let (Some(o), serde_json::Value::Object(summary)) =
            (v.as_object_mut(), robots_summary(&kinds))
        {
            o.extend(summary);
        }
        out.push(v);
    }
    Ok(serde_json::json!({ "hosts": out }))
}

/// One host in detail; a key paused ahead of its first URL (`?create=true`) has no record
/// yet and shows as an empty one.
pub(super) fn host_detail(sh: &Shared, h: &HostArg) -> Result<Option<serde_json::Value>> {
    let host = h.key.as_str();
    let rec = match sh.frontier.host_record(host)? {
        Some(rec) => rec,
        None if sh.frontier.is_paused(host) => frontier::HostRecord::default(),
        None => return Ok(None),
    };
    let mut v = host_json(sh, host, &rec);
    v["key"] = serde_json::json!(host);
    v["requested"] = serde_json::json!(h.requested);
    let mut origins = Vec::new();
    let mut kinds = Vec::new();
    for view in sh.frontier.origins_of(host, now_ms())? {
        let status = view.status;
        kinds.push(status.kind);
        let mut o = origin_json(&view.origin, &status);
        o["held"] = serde_json::json!(robots_holds(status.kind));
        // Sitemaps of the copy in force, or of the last good one.
        o["sitemaps"] = serde_json::json!(view.sitemaps);
        origins.push(o);
    }
    if let (Some(o), serde_json::Value::Object(summary)) =
        (v.as_object_mut(), robots_summary(&kinds))
    {
        o.extend(summary);
    }
    v["origins"] = serde_json::json!(origins);
    Ok(Some(v))
}
