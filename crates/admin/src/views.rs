//! What the admin API shows of a frontier, read-only: hosts with their origins' robots.txt
//! states, and IP groups. Which robots states hold a host's URLs and which origins belong
//! to a politeness key are decided here, once, for the list and the detail alike.

use std::time::Duration;

use frontier::{Frontier, FrontierError, HostRecord};
use robots_policy::state::{RobotsStateKind, RobotsStatus};

use crate::answers::{
    HostCounters, HostView, HostsAnswer, IpGroup, IpGroupsAnswer, LastFetch, OriginView,
    RobotsSummary,
};

/// An instant as RFC 3339 with milliseconds.
pub fn rfc3339_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// Whether the robots state an origin is in holds its URLs (nothing fetched, nothing
/// dropped): never fetched, stale (refetch due) or failing (5xx-disallow).
pub fn robots_holds(kind: RobotsStateKind) -> bool {
    use RobotsStateKind as K;
    matches!(kind, K::Unknown | K::Stale | K::ServerErrorDisallow)
}

/// The robots summary of one host's origins.
pub fn robots_summary(kinds: &[RobotsStateKind]) -> RobotsSummary {
    let mut robots_states = std::collections::BTreeMap::new();
    for k in kinds {
        *robots_states.entry(k.as_str().to_string()).or_insert(0) += 1;
    }
    let held = kinds.iter().filter(|k| robots_holds(**k)).count();
    let state = match kinds.split_first() {
        None => "unknown",
        Some((first, rest)) if rest.iter().all(|k| k == first) => first.as_str(),
        Some(_) => "mixed",
    };
    let n = kinds.len();
    RobotsSummary {
        robots: format!("{held} of {n} origin{} held", if n == 1 { "" } else { "s" }),
        robots_held: held,
        robots_states,
        robots_state: state.to_string(),
    }
}

fn host_view(
    frontier: &Frontier,
    key: &str,
    rec: &HostRecord,
    kinds: &[RobotsStateKind],
    now_ms: u64,
) -> HostView {
    let c = &rec.counters;
    HostView {
        host: key.to_string(),
        ip: frontier
            .host_address(key)
            .ok()
            .flatten()
            .map(|ip| ip.to_string()),
        queued: c.queued,
        in_flight: rec.in_flight.into(),
        paused: frontier.is_paused(key),
        next_allowed: rfc3339_ms(rec.next_allowed_ms),
        next_allowed_in_ms: rec.next_allowed_ms.saturating_sub(now_ms),
        backoff_level: rec.backoff_level.into(),
        backoff_until: (rec.backoff_until_ms > now_ms).then(|| rfc3339_ms(rec.backoff_until_ms)),
        crawl_delay_ms: rec.crawl_delay_ms.into(),
        last_response_ms: rec.last_response_ms.into(),
        skipped: rec.skipped,
        counters: HostCounters {
            enqueued: c.enqueued.into(),
            dispatched: c.dispatched.into(),
            completed: c.completed.into(),
            dropped: c.dropped.into(),
            given_up: c.given_up.into(),
            retried: c.retried.into(),
            robots_fetches: c.robots_fetches.into(),
            crawl_delay_clamped: c.crawl_delay_clamped.into(),
        },
        robots: robots_summary(kinds),
        key: None,
        requested: None,
        origins: None,
    }
}

fn origin_view(origin: String, st: &RobotsStatus, sitemaps: Vec<String>) -> OriginView {
    OriginView {
        origin,
        robots_state: st.kind.as_str().to_string(),
        held: robots_holds(st.kind),
        since: st.since.map(|t| rfc3339_ms(t.0)),
        expires: st.expires_at.map(|t| rfc3339_ms(t.0)),
        fallback_at: st.fallback_at.map(|t| rfc3339_ms(t.0)),
        next_fetch: rfc3339_ms(st.next_fetch_at.0),
        attempt: st.attempt,
        last_fetch: st.last_fetch.as_ref().map(|l| LastFetch {
            at: rfc3339_ms(l.at.0),
            outcome: format!("{:?}", l.outcome),
        }),
        body_bytes: st.copy_body_len,
        sitemaps,
    }
}

/// `GET /v1/hosts`: at most `limit` hosts, those with an origin in robots state `state`
/// when given ("unknown" also matches a host none of whose origins has a record), in key
/// order, or with `sort` the hosts in memory ranked by it, highest first.
///
/// In key order the hosts come a page at a time, each page's robots states from one walk
/// of the frontier's robots census: with a million hosts an answer costs a few pages, not
/// every host against every origin. A state few origins are in is answered from those
/// origins' hosts.
pub fn hosts(
    frontier: &Frontier,
    state: Option<&str>,
    limit: usize,
    sort: Option<frontier::HostRank>,
    now_ms: u64,
) -> Result<HostsAnswer, FrontierError> {
    /// The largest page of hosts read at once while looking for `state`.
    const MAX_PAGE: usize = 1 << 18;
    /// At most this many origins in `state`: the hosts are found from them.
    const RARE_STATE_ORIGINS: usize = 1 << 16;
    let mut hosts = Vec::new();
    if limit == 0 {
        return Ok(HostsAnswer { hosts });
    }
    match sort {
        // ranked: the hosts in memory; with a state to match, all of them, then the first
        Some(by) => {
            let listed =
                frontier.hosts_ranked(by, if state.is_some() { usize::MAX } else { limit });
            push_matching(frontier, &listed, state, limit, now_ms, &mut hosts)?;
        }
        None => {
            // a state few origins are in (5xx-disallow, say): its hosts found from those
            // origins, not by walking a million hosts for a handful
            let rare = state
                .and_then(|want| RobotsStateKind::ALL.iter().find(|k| k.as_str() == want))
                .filter(|k| **k != RobotsStateKind::Unknown);
            if let Some(kind) = rare {
                if let Some(listed) =
                    frontier.hosts_with_origin_in(*kind, now_ms, RARE_STATE_ORIGINS)?
                {
                    push_matching(frontier, &listed, state, limit, now_ms, &mut hosts)?;
                    return Ok(HostsAnswer { hosts });
                }
            }
            // a state may match few hosts: pages grow until enough are found
            let mut page = if state.is_some() {
                limit.max(1024)
            } else {
                limit
            };
            let mut after: Option<String> = None;
            loop {
                let listed = frontier.hosts(after.as_deref(), page)?;
                let last_page = listed.len() < page;
                push_matching(frontier, &listed, state, limit, now_ms, &mut hosts)?;
                after = listed.last().map(|(key, _)| key.clone());
                if last_page || hosts.len() >= limit {
                    break;
                }
                page = page.saturating_mul(2).min(MAX_PAGE);
            }
        }
    }
    Ok(HostsAnswer { hosts })
}

/// Add to `out` (up to `limit`) the hosts of `listed` with an origin in `state`, if given.
fn push_matching(
    frontier: &Frontier,
    listed: &[(String, HostRecord)],
    state: Option<&str>,
    limit: usize,
    now_ms: u64,
    out: &mut Vec<HostView>,
) -> Result<(), FrontierError> {
    let keys: Vec<&str> = listed.iter().map(|(key, _)| key.as_str()).collect();
    // every origin of a host, not only the first: one held origin next to good ones is
    // what an operator needs to see
    let kinds = frontier.robots_kinds_under(&keys, now_ms)?;
    for (key, rec) in listed {
        if out.len() >= limit {
            break;
        }
        let kinds = kinds.get(key).map(Vec::as_slice).unwrap_or_default();
        if let Some(want) = state {
            let matched =
                kinds.iter().any(|k| k.as_str() == want) || (kinds.is_empty() && want == "unknown");
            if !matched {
                continue;
            }
        }
        out.push(host_view(frontier, key, rec, kinds, now_ms));
    }
    Ok(())
}

/// `GET /v1/hosts/{host}`: one politeness key in detail, None if the frontier has no record
/// of it; a key paused ahead of its first URL (`?create=true`) shows as an empty record.
pub fn host(
    frontier: &Frontier,
    key: &str,
    requested: &str,
    now_ms: u64,
) -> Result<Option<HostView>, FrontierError> {
    let rec = match frontier.host_record(key)? {
        Some(rec) => rec,
        None if frontier.is_paused(key) => HostRecord::default(),
        None => return Ok(None),
    };
    let mut origins = Vec::new();
    let mut kinds = Vec::new();
    for view in frontier.origins_of(key, now_ms)? {
        kinds.push(view.status.kind);
        origins.push(origin_view(view.origin, &view.status, view.sitemaps));
    }
    let mut v = host_view(frontier, key, &rec, &kinds, now_ms);
    v.key = Some(key.to_string());
    v.requested = Some(requested.to_string());
    v.origins = Some(origins);
    Ok(Some(v))
}

/// `GET /v1/ip-groups`: the groups of the hosts the frontier holds in memory.
pub fn ip_groups(frontier: &Frontier, now_ms: u64) -> IpGroupsAnswer {
    let cfg = frontier.config();
    IpGroupsAnswer {
        max_in_flight_per_ip: cfg.max_in_flight_per_ip,
        ip_delay_ms: cfg.ip_delay_ms,
        ip_groups: frontier
            .ip_groups()
            .into_iter()
            .map(|g| IpGroup {
                ip: g.ip.to_string(),
                host_count: g.hosts.len(),
                hosts: g.hosts,
                in_flight: g.in_flight,
                waiting: g.waiting,
                next_allowed: rfc3339_ms(g.next_allowed_ms),
                next_allowed_in_ms: g.next_allowed_ms.saturating_sub(now_ms),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use robots_policy::state::RobotsStateKind as K;

    #[test]
    fn the_summary_counts_held_origins_and_names_a_shared_state() {
        let s = robots_summary(&[K::Unknown, K::Unknown]);
        assert_eq!(
            (s.robots.as_str(), s.robots_held, s.robots_state.as_str()),
            ("2 of 2 origins held", 2, "unknown")
        );
        let s = robots_summary(&[K::Unknown, K::Stale, K::ServerErrorDisallow]);
        assert_eq!((s.robots_held, s.robots_state.as_str()), (3, "mixed"));
        let s = robots_summary(&[]);
        assert_eq!(
            (s.robots.as_str(), s.robots_state.as_str()),
            ("0 of 0 origins held", "unknown")
        );
        assert_eq!(robots_summary(&[K::Stale]).robots, "1 of 1 origin held");
    }
}
