//! `frontierd submit FILE`: stream a URL list to a running daemon in batches, so a file of
//! any size goes through the API's body limit in parts and is never held in memory whole.
//! Two parts are posted at a time, on two connections: the daemon reads and parses one
//! while it commits the other, and its answers are taken in the file's order.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use tokio::sync::mpsc;

use frontierd_admin::answers::SubmitAnswer;

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

/// One POST's worth of the file: line k of `body` is line `first + k - 1` of the file.
struct Part {
    first: usize,
    /// lines in it (a line refused here still counts, sent as an empty line)
    lines: usize,
    body: Bytes,
    /// lines refused here, by their number in the file
    local_rejects: Vec<(u64, String)>,
}

impl Part {
    fn last(&self) -> usize {
        self.first + self.lines - 1
    }
}

/// Read the file into parts on a thread of its own, so reading the next part overlaps
/// the daemon's work on the last one.
fn read_parts(
    input: Box<dyn BufRead + Send>,
    file: String,
    tx: mpsc::Sender<Result<Part>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = LineReader::new(input);
        loop {
            match next_part(&mut reader, &file) {
                Ok(None) => break,
                // an error sending: the receiver stopped (a part was refused)
                Ok(Some(p)) => {
                    if tx.blocking_send(Ok(p)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    break;
                }
            }
        }
    })
}

/// The next part of the file, `None` at its end.
fn next_part(reader: &mut LineReader<Box<dyn BufRead + Send>>, file: &str) -> Result<Option<Part>> {
    let first = reader.lines_read() + 1;
    // room for the largest part up front: grown by doubling, each of the parts held at
    // once (posted, queued, being read) could keep twice what it uses
    let mut body = Vec::with_capacity(BATCH_BYTES + crate::url_list::MAX_LINE_BYTES + 1);
    let mut local_rejects = Vec::new();
    while reader.lines_read() + 1 - first < BATCH_LINES && body.len() < BATCH_BYTES {
        let read_so_far = reader.lines_read();
        let Some(line) = reader
            .next_line()
            .with_context(|| format!("reading {file} after line {read_so_far}"))?
        else {
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
    let lines = reader.lines_read() + 1 - first;
    Ok((lines > 0).then(|| Part {
        first,
        lines,
        body: Bytes::from(body),
        local_rejects,
    }))
}

/// Parts posted and not answered yet, at most (the daemon parses one while it commits
/// the other; each holds up to `BATCH_BYTES`).
const PARTS_IN_FLIGHT: usize = 2;

/// A part posted, its answer pending.
struct Posted {
    first: usize,
    last: usize,
    local_rejects: Vec<(u64, String)>,
    answer: tokio::task::JoinHandle<Result<(u16, String)>>,
}

/// What the daemon said about a part that it did not take.
fn refusal(status: u16, resp: &str) -> String {
    let msg = serde_json::from_str::<serde_json::Value>(resp)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| resp.trim().to_string());
    format!("HTTP {status}: {msg}")
}

/// Count one part's answer and print its rejected lines (the daemon's and those refused
/// before sending), numbered in the whole file.
fn report_answer(
    stdout: &mut impl Write,
    progress: &mut Progress,
    first: usize,
    local_rejects: Vec<(u64, String)>,
    resp: &str,
) -> Result<()> {
    let answer: SubmitAnswer = serde_json::from_str(resp)
        .with_context(|| format!("answer to POST /v1/urls not understood: {resp}"))?;
    progress.accepted += answer.accepted;
    progress.duplicate += answer.duplicate;
    progress.rejected += (answer.rejections.len() + local_rejects.len()) as u64;
    if answer.rejections.is_empty() && local_rejects.is_empty() {
        return Ok(());
    }
    progress.clear();
    let mut out: Vec<(u64, String)> = answer
        .rejections
        .iter()
        .map(|r| {
            let n = (r.line + first) as u64 - 1;
            (n, format!("  line {n}: {} ({})", r.url, r.reason))
        })
        .collect();
    out.extend(local_rejects);
    out.sort_by_key(|(n, _)| *n);
    for (_, l) in out {
        writeln!(stdout, "{l}").context("writing to stdout")?;
    }
    Ok(())
}

/// Why a submission stopped, and which lines went in all the same.
fn failure(first: usize, last: usize, why: &str, went_in_after: &[(usize, usize)]) -> String {
    let mut done = Vec::new();
    if first > 1 {
        done.push(format!("lines 1-{} were submitted", first - 1));
    }
    for (a, b) in went_in_after {
        done.push(format!("lines {a}-{b} were submitted too"));
    }
    let done = match done.is_empty() {
        true => String::new(),
        false => format!(" ({})", done.join("; ")),
    };
    format!("POST /v1/urls, lines {first}-{last}: {why}{done}")
}

pub async fn submit(t: Target, file: String) -> Result<ExitCode> {
    let input: Box<dyn BufRead + Send> = if file == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
        Box::new(BufReader::new(f))
    };
    let mut progress = Progress {
        on_terminal: std::io::stderr().is_terminal(),
        started: Instant::now(),
        shown_at: None,
        lines: 0,
        accepted: 0,
        duplicate: 0,
        rejected: 0,
    };
    let t = Arc::new(t);
    let (tx, mut parts) = mpsc::channel(1);
    let reader = read_parts(input, file, tx);
    let mut posted: VecDeque<Posted> = VecDeque::new();
    // the first part that failed, and why; the parts after it still get their answers
    // (one may be in the daemon already), so the error can say which lines went in
    let mut failed: Option<(usize, usize, String)> = None;
    let mut went_in_after: Vec<(usize, usize)> = Vec::new();
    let mut read_error = None;
    let mut stdout = std::io::stdout().lock();
    loop {
        // keep PARTS_IN_FLIGHT posted while the file lasts and nothing failed
        while failed.is_none() && read_error.is_none() && posted.len() < PARTS_IN_FLIGHT {
            match parts.recv().await {
                Some(Ok(part)) => {
                    let t = t.clone();
                    let body = part.body.clone();
                    posted.push_back(Posted {
                        first: part.first,
                        last: part.last(),
                        local_rejects: part.local_rejects,
                        answer: tokio::spawn(async move {
                            client::request(&t, "POST", "/v1/urls", body).await
                        }),
                    });
                }
                Some(Err(e)) => read_error = Some(e),
                None => break,
            }
        }
        let Some(p) = posted.pop_front() else {
            break;
        };
        let answer = match p.answer.await {
            Ok(a) => a.map_err(|e| format!("{e:#}")),
            Err(e) => Err(format!("the request task failed: {e}")),
        };
        let resp = match answer {
            Ok((200, resp)) => resp,
            Ok((status, resp)) => {
                if failed.is_none() {
                    failed = Some((p.first, p.last, refusal(status, &resp)));
                }
                continue;
            }
            Err(e) => {
                if failed.is_none() {
                    failed = Some((p.first, p.last, e));
                }
                continue;
            }
        };
        if failed.is_some() {
            went_in_after.push((p.first, p.last));
        }
        progress.lines += p.last + 1 - p.first;
        report_answer(&mut stdout, &mut progress, p.first, p.local_rejects, &resp)?;
        progress.show();
    }
    // the reader stops at the end of the file, at a read error, or once nothing receives
    drop(parts);
    let _ = reader.join();
    if let Some((first, last, why)) = failed {
        progress.clear();
        bail!("{}", failure(first, last, &why, &went_in_after));
    }
    if let Some(e) = read_error {
        progress.clear();
        return Err(e.context(format!("lines 1-{} were submitted", progress.lines)));
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
        let (status, answer) = request(&t, "POST", "/v1/urls", Bytes::from(body))
            .await
            .unwrap();
        assert_eq!(status, 413, "{answer}");
        assert!(answer.contains("too large"), "{answer}");
    }

    /// Parts go two at a time, so when one is refused the next may already be in: the
    /// error names the refused lines, and every range that went in, before and after.
    #[tokio::test]
    async fn a_refused_part_is_named_with_the_parts_that_went_in_around_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let posted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = posted.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let body = http_body_util::BodyExt::collect(req.into_body())
                                .await
                                .unwrap()
                                .to_bytes();
                            let text = String::from_utf8_lossy(&body).into_owned();
                            let first = text.lines().next().unwrap_or("").to_string();
                            let lines = text.lines().count();
                            seen.lock().unwrap().push(first.clone());
                            // the second part (from line 10 001) is refused
                            let (status, answer) = match first.ends_with("/p10001") {
                                true => (
                                    StatusCode::SERVICE_UNAVAILABLE,
                                    "{\"error\":\"the daemon is stopping\"}".to_string(),
                                ),
                                false => (
                                    StatusCode::OK,
                                    format!("{{\"accepted\":{lines},\"duplicate\":0,\"rejections\":[]}}"),
                                ),
                            };
                            let mut r = Response::new(Full::new(Bytes::from(answer)));
                            *r.status_mut() = status;
                            Ok::<_, Infallible>(r)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("urls.txt");
        let list: String = (1..=25_000)
            .map(|i| format!("http://a.test/p{i}\n"))
            .collect();
        std::fs::write(&file, list).unwrap();
        let t = Target { addr, token: None };
        let err = super::submit(t, file.display().to_string())
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "POST /v1/urls, lines 10001-20000: HTTP 503: the daemon is stopping \
             (lines 1-10000 were submitted; lines 20001-25000 were submitted too)"
        );
        let mut posted = posted.lock().unwrap().clone();
        posted.sort();
        assert_eq!(
            posted,
            [
                "http://a.test/p1",
                "http://a.test/p10001",
                "http://a.test/p20001"
            ]
        );
    }
}
