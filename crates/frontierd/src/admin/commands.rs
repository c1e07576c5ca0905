//! `frontierd stats` and `frontierd hosts`: the admin API's typed answers
//! ([`frontierd_admin::client`]) printed as tables (`hosts --ip` is ip_groups.rs, `submit`
//! submit.rs).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use frontierd_admin::client::{self, Target};

use crate::stdout::out;

pub async fn stats(t: Target, watch: bool) -> Result<ExitCode> {
    loop {
        let v = client::stats(&t).await?;
        if let Some(obj) = v.as_object() {
            let mut text = String::new();
            if watch {
                text.push_str("\x1b[2J\x1b[H");
            }
            let w = obj.keys().map(|k| k.len()).max().unwrap_or(0);
            for (k, val) in obj {
                text.push_str(&format!("{k:<w$}  {}\n", cell(val)));
            }
            out(&text)?;
        }
        if !watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// A JSON value as table text: strings without quotes (`serde_json::Value`'s `Display`
/// ignores width and alignment, so cells are made strings first).
pub(crate) fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// Rows under a header, every column as wide as its widest cell; `right[i]` right-aligns
/// column i (numbers).
pub(crate) fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
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

pub async fn hosts(
    t: Target,
    host: Option<String>,
    state: Option<String>,
    limit: usize,
) -> Result<ExitCode> {
    match host {
        Some(h) => {
            let v = client::host(&t, &h).await?;
            if let Some(key) = v.key.as_deref().filter(|k| *k != h) {
                eprintln!("frontierd: {h} is politeness key {key}");
            }
            // as a JSON value: its keys in order, as the daemon's answer had them printed
            let v = serde_json::to_value(&v)?;
            out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        }
        None => {
            let v = client::hosts(&t, state.as_deref(), limit).await?;
            let rows: Vec<Vec<String>> = v
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
            out(&table(
                &[
                    "HOST", "QUEUED", "FLIGHT", "ROBOTS", "ORIGINS", "BACKOFF", "PAUSED",
                ],
                &rows,
                &[false, true, true, false, false, true, false],
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
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
}
