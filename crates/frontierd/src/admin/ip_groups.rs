//! `frontierd hosts --ip`: which hosts share an IP address, and the address's budget
//! (requests in flight, next allowed instant, hosts waiting for it), from `GET /v1/ip-groups`.

use std::process::ExitCode;

use anyhow::Result;
use frontierd_admin::client::{self, Target};

use crate::admin::commands::table;
use crate::stdout::out;

/// Host names shown per group in the table (the JSON has them all).
const HOSTS_SHOWN: usize = 3;

/// `frontierd hosts --ip`: one row per address, most hosts first.
pub async fn print(t: Target, limit: usize) -> Result<ExitCode> {
    let v = client::ip_groups(&t).await?;
    let mut groups = v.ip_groups;
    groups.sort_by_key(|g| std::cmp::Reverse(g.host_count));
    let rows: Vec<Vec<String>> = groups
        .into_iter()
        .take(limit)
        .map(|g| {
            let mut shown = g
                .hosts
                .iter()
                .take(HOSTS_SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(",");
            if g.hosts.len() > HOSTS_SHOWN {
                shown.push_str(&format!(",... (+{})", g.hosts.len() - HOSTS_SHOWN));
            }
            vec![
                g.ip,
                g.host_count.to_string(),
                g.in_flight.to_string(),
                g.waiting.to_string(),
                g.next_allowed_in_ms.to_string(),
                shown,
            ]
        })
        .collect();
    out(&format!(
        "max_in_flight_per_ip {}, ip_delay {} ms\n{}",
        v.max_in_flight_per_ip,
        v.ip_delay_ms,
        table(
            &["IP", "HOSTS", "FLIGHT", "WAITING", "NEXT_MS", "NAMES"],
            &rows,
            &[false, true, true, true, true, false],
        )
    ))?;
    Ok(ExitCode::SUCCESS)
}
