//! What the client commands print, from the admin API's typed answers
//! ([`frontierd_admin::answers`]) and the broker's ([`cluster::ClusterStatus`]): tables with
//! aligned columns, the submission's progress line and totals, the publisher's retries. Pure
//! (text in, text out) but for the progress line, drawn on standard error.

use std::time::{Duration, Instant};

use frontierd_admin::answers::{HostsAnswer, IpGroupsAnswer};

/// A JSON value as table text: strings without quotes (`serde_json::Value`'s `Display`
/// ignores width and alignment, so cells are made strings first).
pub fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// Rows under a header, every column as wide as its widest cell; `right[i]` right-aligns
/// column i (numbers).
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut text = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(right)
            .map(|((c, &w), &r)| {
                if r {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// `frontierd stats`: one `name  value` line per counter of `/v1/stats`, in its order.
pub fn stats(answer: &serde_json::Value) -> String {
    let Some(obj) = answer.as_object() else {
        return format!("{answer}\n");
    };
    let w = obj.keys().map(|k| k.len()).max().unwrap_or(0);
    obj.iter()
        .map(|(k, val)| format!("{k:<w$}  {}\n", cell(val)))
        .collect()
}

/// `frontierd hosts`: one row per host.
pub fn hosts(answer: HostsAnswer) -> String {
    let rows: Vec<Vec<String>> = answer
        .hosts
        .into_iter()
        .map(|h| {
            vec![
                h.host,
                h.queued.to_string(),
                h.in_flight.to_string(),
                h.robots.robots_state,
                h.robots.robots,
                h.backoff_level.to_string(),
                h.paused.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "HOST", "QUEUED", "FLIGHT", "ROBOTS", "ORIGINS", "BACKOFF", "PAUSED",
        ],
        &rows,
        &[false, true, true, false, false, true, false],
    )
}

/// Host names shown per group in the IP groups' table (the JSON has them all).
const HOSTS_SHOWN: usize = 3;

/// `frontierd hosts --ip`: the per-address limits, then one row per address, most hosts
/// first, at most `limit` rows.
pub fn ip_groups(answer: IpGroupsAnswer, limit: usize) -> String {
    let mut groups = answer.ip_groups;
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
    format!(
        "max_in_flight_per_ip {}, ip_delay {} ms\n{}",
        answer.max_in_flight_per_ip,
        answer.ip_delay_ms,
        table(
            &["IP", "HOSTS", "FLIGHT", "WAITING", "NEXT_MS", "NAMES"],
            &rows,
            &[false, true, true, true, true, false],
        )
    )
}

/// `frontierd cluster status`: the shards with their owners (as the nodes report them), their
/// lease holders (as the broker's lease bucket has them) and backlogs, then the nodes' last
/// reports (how long ago, at `now_ms`, unix ms).
pub fn cluster_status(
    status: &cluster::ClusterStatus,
    shards: u32,
    broker: &str,
    now_ms: u64,
) -> String {
    let mut out = format!("cluster: {shards} shards, broker {broker}\n\n");
    let rows: Vec<Vec<String>> = status
        .shards
        .iter()
        .map(|s| {
            let owner = match s.owners.as_slice() {
                [] => "(none)".to_string(),
                [one] => one.to_string(),
                many => format!("CONFLICT:{}", many.join(",")),
            };
            let (pending, ack_pending, redelivered) = match &s.counts {
                cluster::ShardCounts::Consumer(b) => (
                    b.pending.to_string(),
                    b.ack_pending.to_string(),
                    b.redelivered.to_string(),
                ),
                cluster::ShardCounts::Stored(n) => (n.to_string(), "-".into(), "-".into()),
            };
            // how long it has been held (or released), on this machine's clock
            let age = |since: u64| match since {
                0 => String::new(),
                t => format!(" {}s", now_ms.saturating_sub(t) / 1000),
            };
            let lease = match &s.lease {
                Some(v) => match &v.node {
                    Some(node) => format!("{node}{}", age(v.since_ms)),
                    None => format!("(released){}", age(v.since_ms)),
                },
                None => "-".into(),
            };
            vec![
                s.shard.to_string(),
                owner,
                lease,
                pending,
                ack_pending,
                redelivered,
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "shard",
            "owner",
            "lease",
            "pending",
            "ack_pending",
            "redelivered",
        ],
        &rows,
        &[false, false, false, true, true, true],
    ));
    let rows: Vec<Vec<String>> = status
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.id.clone(),
                format!("{:.1}", now_ms.saturating_sub(n.time_ms) as f64 / 1000.0),
                n.connected.to_string(),
                n.owned_shards.clone().unwrap_or_else(|| "?".into()),
                format!("{:.1}", n.urls_received_per_s),
                format!("{:.1}", n.links_published_per_s),
                format!("{:.1}", n.pages_per_s),
                n.outbox.to_string(),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&table(
        &[
            "node",
            "seen_s_ago",
            "connected",
            "owned",
            "urls_in/s",
            "links_out/s",
            "pages/s",
            "outbox",
        ],
        &rows,
        &[false, true, true, false, true, true, true, true],
    ));
    out
}

/// A submission's counts so far (`frontierd submit`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SubmitTotals {
    pub lines: usize,
    pub accepted: u64,
    pub duplicate: u64,
    pub rejected: u64,
}

impl SubmitTotals {
    /// The progress line, after `secs` seconds.
    pub fn progress(&self, secs: f64) -> String {
        format!(
            "{} lines sent, {} accepted, {} duplicate, {} rejected, {:.0} lines/s",
            self.lines,
            self.accepted,
            self.duplicate,
            self.rejected,
            self.lines as f64 / secs.max(0.001)
        )
    }

    /// The last line printed on stdout.
    pub fn summary(&self) -> String {
        format!(
            "accepted {}  duplicate {}  rejected {}",
            self.accepted, self.duplicate, self.rejected
        )
    }
}

/// `frontierd submit`'s counts, and its progress line on standard error when that is a
/// terminal: redrawn in place at most five times a second, cleared before other output.
#[derive(Debug)]
pub struct Progress {
    on_terminal: bool,
    started: Instant,
    shown_at: Option<Instant>,
    totals: SubmitTotals,
}

impl Progress {
    pub fn new(on_terminal: bool) -> Progress {
        Progress {
            on_terminal,
            started: Instant::now(),
            shown_at: None,
            totals: SubmitTotals::default(),
        }
    }

    /// One part answered: its lines, accepted, duplicate and rejected URLs.
    pub fn count(&mut self, lines: usize, accepted: u64, duplicate: u64, rejected: usize) {
        let t = &mut self.totals;
        t.lines += lines;
        t.accepted += accepted;
        t.duplicate += duplicate;
        t.rejected += rejected as u64;
    }

    pub fn totals(&self) -> &SubmitTotals {
        &self.totals
    }

    fn line(&self) -> String {
        self.totals.progress(self.started.elapsed().as_secs_f64())
    }

    /// Redraw in place, at most 5 times a second.
    pub fn show(&mut self) {
        let recent = self
            .shown_at
            .is_some_and(|t| t.elapsed() < Duration::from_millis(200));
        if self.on_terminal && !recent {
            eprint!("\r\x1b[K{}", self.line());
            self.shown_at = Some(Instant::now());
        }
    }

    /// Clear the progress line (before other output).
    pub fn clear(&mut self) {
        if self.on_terminal && self.shown_at.take().is_some() {
            eprint!("\r\x1b[K");
        }
    }

    /// The last progress line, kept.
    pub fn finish(&mut self) {
        if self.on_terminal && self.shown_at.is_some() {
            eprintln!("\r\x1b[K{}", self.line());
        }
    }
}

/// What `frontierd publish` and `cluster status` say while the cluster crate waits out a
/// broker that is down or a publish not acknowledged.
pub fn retrying(r: &cluster::Retrying<'_>) -> String {
    match r {
        cluster::Retrying::Broker { error, pause } => {
            format!("frontierd: {error}; trying again in {pause:?}")
        }
        cluster::Retrying::Unacked { urls, error } => {
            format!("frontierd: {urls} URL(s) not acknowledged ({error}); retrying")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_line_up() {
        let rows = vec![
            vec!["a.test".into(), "3".into(), "true".into()],
            vec![
                "very-long-host-name.example".into(),
                "12345".into(),
                "false".into(),
            ],
        ];
        let t = table(&["HOST", "QUEUED", "PAUSED"], &rows, &[false, true, false]);
        let lines: Vec<&str> = t.lines().collect();
        // every QUEUED cell ends where the header word ends
        let end = lines[0].find("QUEUED").unwrap() + "QUEUED".len();
        for l in &lines[1..] {
            assert!(l[..end].ends_with(|c: char| c.is_ascii_digit()), "{t}");
            assert_eq!(&l[end..end + 2], "  ", "{t}");
        }
        assert!(lines[1].starts_with("a.test "), "{t}");
        assert_eq!(cell(&serde_json::json!("fresh")), "fresh");
        assert_eq!(cell(&serde_json::json!(7)), "7");
        assert_eq!(cell(&serde_json::Value::Null), "-");
    }

    #[test]
    fn stats_lines_align_values_and_show_null_as_a_dash() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"uptime_s": 3, "queued": 12, "cluster": null}"#).unwrap();
        let text = stats(&v);
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["cluster   -", "queued    12", "uptime_s  3"]);
    }

    #[test]
    fn ip_groups_most_hosts_first_with_names_cut_at_three() {
        let answer: IpGroupsAnswer = serde_json::from_value(serde_json::json!({
            "max_in_flight_per_ip": 2, "ip_delay_ms": 100,
            "ip_groups": [
                {"ip": "127.0.0.2", "hosts": ["x.test"], "host_count": 1, "in_flight": 0,
                 "waiting": 0, "next_allowed": "", "next_allowed_in_ms": 0},
                {"ip": "127.0.0.1", "hosts": ["a.test", "b.test", "c.test", "d.test"],
                 "host_count": 4, "in_flight": 1, "waiting": 2, "next_allowed": "",
                 "next_allowed_in_ms": 40},
            ]
        }))
        .unwrap();
        let text = ip_groups(answer, 10);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "max_in_flight_per_ip 2, ip_delay 100 ms");
        assert!(lines[2].starts_with("127.0.0.1"), "{text}");
        assert!(
            lines[2].ends_with("a.test,b.test,c.test,... (+1)"),
            "{text}"
        );
        assert!(lines[3].starts_with("127.0.0.2"), "{text}");
    }

    #[test]
    fn submit_totals_say_what_went_in() {
        let t = SubmitTotals {
            lines: 10,
            accepted: 7,
            duplicate: 2,
            rejected: 1,
        };
        assert_eq!(t.summary(), "accepted 7  duplicate 2  rejected 1");
        assert_eq!(
            t.progress(2.0),
            "10 lines sent, 7 accepted, 2 duplicate, 1 rejected, 5 lines/s"
        );
    }
}
