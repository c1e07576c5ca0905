//! `GET /v1/ip-groups` and `frontierd hosts --ip`: which hosts share an IP address, and the
//! address's budget (requests in flight, next allowed instant, hosts waiting for it).

use anyhow::Result;
use std::process::ExitCode;
use std::time::Duration;

use crate::admin::client::{cell, get_json, table, Target};
use crate::daemon::shared::{now_ms, Shared};
use crate::stdout::out;

/// Host names shown per group in the table (the JSON has them all).
const HOSTS_SHOWN: usize = 3;

/// The groups of the hosts the frontier holds in memory (queued or in-flight work).
pub fn ip_groups_json(sh: &Shared) -> serde_json::Value {
    let now = now_ms();
    let cfg = sh.frontier.config();
    let groups: Vec<serde_json::Value> = sh
        .frontier
        .ip_groups()
        .into_iter()
        .map(|g| {
            serde_json::json!({
                "ip": g.ip.to_string(),
                "hosts": g.hosts,
                "host_count": g.hosts.len(),
                "in_flight": g.in_flight,
                "waiting": g.waiting,
                "next_allowed": humantime::format_rfc3339_millis(
                    std::time::UNIX_EPOCH + Duration::from_millis(g.next_allowed_ms)
                ).to_string(),
                "next_allowed_in_ms": g.next_allowed_ms.saturating_sub(now),
            })
        })
        .collect();
    serde_json::json!({
        "max_in_flight_per_ip": cfg.max_in_flight_per_ip,
        "ip_delay_ms": cfg.ip_delay_ms,
        "ip_groups": groups,
    })
}

/// `frontierd hosts --ip`: one row per address, most hosts first.
pub async fn print(t: Target, limit: usize) -> Result<ExitCode> {
    let v = get_json(&t, "/v1/ip-groups").await?;
    let mut groups: Vec<&serde_json::Value> =
        v["ip_groups"].as_array().into_iter().flatten().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g["host_count"].as_u64().unwrap_or(0)));
    let rows: Vec<Vec<String>> = groups
        .into_iter()
        .take(limit)
        .map(|g| {
            let names: Vec<&str> = g["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h.as_str())
                .collect();
            let mut shown = names
                .iter()
                .take(HOSTS_SHOWN)
                .copied()
                .collect::<Vec<_>>()
                .join(",");
            if names.len() > HOSTS_SHOWN {
                shown.push_str(&format!(",... (+{})", names.len() - HOSTS_SHOWN));
            }
            vec![
                cell(&g["ip"]),
                cell(&g["host_count"]),
                cell(&g["in_flight"]),
                cell(&g["waiting"]),
                cell(&g["next_allowed_in_ms"]),
                shown,
            ]
        })
        .collect();
    out(&format!(
        "max_in_flight_per_ip {}, ip_delay {} ms\n{}",
        cell(&v["max_in_flight_per_ip"]),
        cell(&v["ip_delay_ms"]),
        table(
            &["IP", "HOSTS", "FLIGHT", "WAITING", "NEXT_MS", "NAMES"],
            &rows,
            &[false, true, true, true, true, false],
        )
    ))?;
    Ok(ExitCode::SUCCESS)
}
