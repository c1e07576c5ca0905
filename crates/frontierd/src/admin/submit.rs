//! `frontierd submit FILE`: stream a URL list to a running daemon in batches, so a file of
//! any size goes through the API's body limit in parts and is never held in memory whole.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::admin::client::{self, Target};
use crate::admin::MAX_BODY;
use crate::url_list::{classify, Line, LineReader};

/// Lines per POST.
const BATCH_LINES: usize = 10_000;
/// Bytes per POST, at most (plus one line): well under [`MAX_BODY`].
const BATCH_BYTES: usize = 4 << 20;
const _: () = assert!(BATCH_BYTES + crate::url_list::MAX_LINE_BYTES < MAX_BODY);

/// Exit status when some lines were rejected (0: every line accepted or already known;
/// 2: an error, see main.rs).
pub const EXIT_REJECTED: u8 = 1;

/// Counts so far, and the progress line on a terminal.
struct Progress {
    on_terminal: bool,
    started: Instant,
    shown_at: Option<Instant>,
    lines: usize,
    accepted: u64,
    duplicate: u64,
    rejected: u64,
}

impl Progress {
    fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        format!(
            "{} lines sent, {} accepted, {} duplicate, {} rejected, {:.0} lines/s",
            self.lines,
            self.accepted,
            self.duplicate,
            self.rejected,
            self.lines as f64 / secs
        )
    }

    /// Redraw in place, at most 5 times a second.
    fn show(&mut self) {
        if !self.on_terminal
            || self
                .shown_at
                .is_some_and(|t| t.elapsed() < Duration::from_millis(200))
        {
            return;
        }
        eprint!("\r\x1b[K{}", self.line());
        self.shown_at = Some(Instant::now());
    }

    /// Clear the progress line (before other output).
    fn clear(&mut self) {
        if self.on_terminal && self.shown_at.is_some() {
            eprint!("\r\x1b[K");
            self.shown_at = None;
        }
    }

    fn finish(&mut self) {
        if self.on_terminal && self.shown_at.is_some() {
            eprintln!("\r\x1b[K{}", self.line());
        }
    }
}

pub async fn submit(t: Target, file: String) -> Result<ExitCode> {
    let input: Box<dyn BufRead> = if file == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
        Box::new(BufReader::new(f))
    };
    let mut reader = LineReader::new(input);
    let mut progress = Progress {
        on_terminal: std::io::stderr().is_terminal(),
        started: Instant::now(),
        shown_at: None,
        lines: 0,
        accepted: 0,
        duplicate: 0,
        rejected: 0,
    };
    let mut stdout = std::io::stdout().lock();
    let mut body: Vec<u8> = Vec::new();
    let mut local_rejects: Vec<(u64, String)> = Vec::new();
    let mut eof = false;
    while !eof {
        // one batch: line k of the body is line `first + k - 1` of the file
        let first = reader.lines_read() + 1;
        body.clear();
        local_rejects.clear();
        while reader.lines_read() + 1 - first < BATCH_LINES && body.len() < BATCH_BYTES {
            let read_so_far = reader.lines_read();
            let Some(line) = reader
                .next_line()
                .with_context(|| format!("reading {file} after line {read_so_far}"))?
            else {
                eof = true;
                break;
            };
            match classify(line.bytes, line.total_len) {
                Line::Skip => {}
                // too long to send whole: refused here, by the daemon's own rule
                Line::Rejected { reason, input, .. } if line.total_len > line.bytes.len() => {
                    local_rejects.push((
                        line.number as u64,
                        format!("  line {}: {input} ({reason})", line.number),
                    ));
                }
                // sent as is: the daemon decides (a line that is not UTF-8 included)
                _ => body.extend_from_slice(line.bytes),
            }
            body.push(b'\n');
        }
        let sent = reader.lines_read() + 1 - first;
        if sent == 0 {
            break;
        }
        let (status, resp) = client::request(&t, "POST", "/v1/urls", &body).await?;
        if status != 200 {
            progress.clear();
            let msg = serde_json::from_str::<serde_json::Value>(&resp)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| resp.trim().to_string());
            let done = if first > 1 {
                format!(" (lines 1-{} were submitted)", first - 1)
            } else {
                String::new()
            };
            bail!(
                "POST /v1/urls, lines {first}-{}: HTTP {status}: {msg}{done}",
                first + sent - 1
            );
        }
        let v: serde_json::Value = serde_json::from_str(&resp)
            .with_context(|| format!("answer to POST /v1/urls not JSON: {resp}"))?;
        progress.lines += sent;
        progress.accepted += v["accepted"].as_u64().unwrap_or(0);
        progress.duplicate += v["duplicate"].as_u64().unwrap_or(0);
        let rejections = v["rejections"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        progress.rejected += (rejections.len() + local_rejects.len()) as u64;
        if !rejections.is_empty() || !local_rejects.is_empty() {
            progress.clear();
            let mut out: Vec<(u64, String)> = rejections
                .iter()
                .map(|r| {
                    let n = r["line"].as_u64().unwrap_or(0) + first as u64 - 1;
                    let line = format!(
                        "  line {n}: {} ({})",
                        r["url"].as_str().unwrap_or(""),
                        r["reason"].as_str().unwrap_or("")
                    );
                    (n, line)
                })
                .collect();
            out.append(&mut local_rejects);
            out.sort_by_key(|(n, _)| *n);
            for (_, l) in out {
                writeln!(stdout, "{l}").context("writing to stdout")?;
            }
        }
        progress.show();
    }
    progress.finish();
    writeln!(
        stdout,
        "accepted {}  duplicate {}  rejected {}",
        progress.accepted, progress.duplicate, progress.rejected
    )
    .context("writing to stdout")?;
    Ok(if progress.rejected > 0 {
        ExitCode::from(EXIT_REJECTED)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::Full;
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper::{Response, StatusCode};
    use hyper_util::rt::TokioIo;

    use crate::admin::client::{request, Target};
    use crate::admin::MAX_BODY;

    /// The old raw-TCP client died with "Broken pipe" here: the answer to a body over the
    /// limit comes before the body is sent, and the client must return it.
    #[tokio::test]
    async fn the_client_returns_an_early_413_to_a_body_over_the_limit() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            // like the admin API: answered on Content-Length, the body never read
            let svc = service_fn(|_req| async {
                let mut r =
                    Response::new(Full::new(Bytes::from_static(b"{\"error\":\"too large\"}")));
                *r.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
                Ok::<_, Infallible>(r)
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
        let t = Target { addr, token: None };
        let body = vec![b'a'; MAX_BODY + (8 << 20)];
        let (status, answer) = request(&t, "POST", "/v1/urls", &body).await.unwrap();
        assert_eq!(status, 413, "{answer}");
        assert!(answer.contains("too large"), "{answer}");
    }
}
