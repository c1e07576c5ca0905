//! The admin API's client: one request at a time, and the `stats` and `hosts` commands
//! (`submit` is submit.rs).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

use crate::stdout::out;

/// Where a running daemon listens, and its token.
pub struct Target {
    pub addr: String,
    pub token: Option<String>,
}

/// One HTTP/1.1 request to the admin API (a new connection each time); returns (status,
/// body). Any answer is returned, a 413 included, even one sent before the body was read.
pub async fn request(
    t: &Target,
    method: &str,
    path: &str,
    body: impl Into<Bytes>,
) -> Result<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(&t.addr)
        .await
        .with_context(|| {
            format!(
                "connecting to the admin API at {} (is frontierd running?)",
                t.addr
            )
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .with_context(|| format!("HTTP handshake with {}", t.addr))?;
    let conn = tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, &t.addr)
        .header(hyper::header::CONTENT_TYPE, "text/plain");
    if let Some(tok) = &t.token {
        req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {tok}"));
    }
    let req = req
        .body(Full::new(body.into()))
        .with_context(|| format!("building {method} {path}"))?;
    let resp = sender
        .send_request(req)
        .await
        .with_context(|| format!("{method} {path} to {}", t.addr))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .with_context(|| format!("reading the answer to {method} {path}"))?
        .to_bytes();
    conn.abort();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

pub(crate) async fn get_json(t: &Target, path: &str) -> Result<serde_json::Value> {
    let (status, body) = request(t, "GET", path, Bytes::new()).await?;
    if status != 200 {
        bail!("GET {path}: HTTP {status}: {}", body.trim());
    }
    serde_json::from_str(&body).with_context(|| format!("GET {path}: not JSON"))
}

pub async fn stats(t: Target, watch: bool) -> Result<ExitCode> {
    loop {
        let v = get_json(&t, "/v1/stats").await?;
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
            let segment =
                percent_encoding::utf8_percent_encode(&h, percent_encoding::NON_ALPHANUMERIC);
            let v = get_json(&t, &format!("/v1/hosts/{segment}")).await?;
            if let Some(key) = v["key"].as_str().filter(|k| *k != h) {
                eprintln!("frontierd: {h} is politeness key {key}");
            }
            out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        }
        None => {
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            query.append_pair("limit", &limit.to_string());
            if let Some(state) = &state {
                query.append_pair("state", state);
            }
            let v = get_json(&t, &format!("/v1/hosts?{}", query.finish())).await?;
            let rows: Vec<Vec<String>> = v["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    [
                        "host",
                        "queued",
                        "in_flight",
                        "robots_state",
                        "robots",
                        "backoff_level",
                        "paused",
                    ]
                    .iter()
                    .map(|k| cell(&h[*k]))
                    .collect()
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
