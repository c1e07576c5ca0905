//! A URL list of any size to a running daemon, in parts: each goes through the API's body
//! limit, and the list is never held in memory whole. Two parts are posted at a time, on
//! two connections: the daemon reads and parses one while it commits the other, and its
//! answers are taken in the list's order. When a part is refused, the parts after it are
//! still answered (one may be in the daemon already), so the error says which lines went
//! in.

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{chain, request, ClientError, Target};
use crate::answers::{ErrorAnswer, RejectedLine, SubmitAnswer};
use crate::url_list::{classify, Line, LineReader, MAX_LINE_BYTES};
use crate::MAX_BODY;

/// Lines per POST.
pub const BATCH_LINES: usize = 10_000;
/// Bytes per POST, at most (plus one line): well under [`MAX_BODY`].
pub const BATCH_BYTES: usize = 4 << 20;
const _: () = assert!(BATCH_BYTES + MAX_LINE_BYTES < MAX_BODY);

/// Parts posted and not answered yet, at most (the daemon parses one while it commits
/// the other; each holds up to [`BATCH_BYTES`]).
const PARTS_IN_FLIGHT: usize = 2;

/// Why a submission stopped.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// A part was refused, or got no answer; `went_in_after` are the parts after it that
    /// the daemon took all the same.
    #[error(
        "POST /v1/urls, lines {first}-{last}: {why}{}",
        went_in(*.first, .went_in_after)
    )]
    Refused {
        first: usize,
        last: usize,
        why: String,
        went_in_after: Vec<(usize, usize)>,
    },
    /// The list could not be read on; lines 1 to `submitted` went in.
    #[error("lines 1-{submitted} were submitted")]
    Read { submitted: usize, source: ReadError },
    /// The daemon took a part but its answer is not a [`SubmitAnswer`].
    #[error("answer to POST /v1/urls not understood: {answer}")]
    NotUnderstood {
        answer: String,
        source: serde_json::Error,
    },
}

/// Reading the list failed.
#[derive(Debug, thiserror::Error)]
#[error("reading {name} after line {after}")]
pub struct ReadError {
    /// The list, as the caller named it.
    pub name: String,
    /// Lines read before the error.
    pub after: usize,
    pub source: std::io::Error,
}

/// Which lines went in all the same, for [`SubmitError::Refused`]'s message.
fn went_in(first: usize, went_in_after: &[(usize, usize)]) -> String {
    let mut done = Vec::new();
    if first > 1 {
        done.push(format!("lines 1-{} were submitted", first - 1));
    }
    for (a, b) in went_in_after {
        done.push(format!("lines {a}-{b} were submitted too"));
    }
    match done.is_empty() {
        true => String::new(),
        false => format!(" ({})", done.join("; ")),
    }
}

/// One part the daemon took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartAnswered {
    /// Its first and last line in the list.
    pub first: usize,
    pub last: usize,
    /// The daemon's answer, its line numbers in the whole list; its `rejections` also hold
    /// the lines refused before sending (too long to send), all in line order, and
    /// `rejected` counts them all.
    pub answer: SubmitAnswer,
}

impl PartAnswered {
    /// Lines of the list in this part (blank lines and comments included).
    pub fn lines(&self) -> usize {
        self.last + 1 - self.first
    }
}

/// One POST's worth of the list: line k of `body` is line `first + k - 1` of the list.
struct Part {
    first: usize,
    /// lines in it (a line refused here still counts, sent as an empty line)
    lines: usize,
    body: Bytes,
    /// lines refused here, numbered in the list
    refused_here: Vec<RejectedLine>,
}

/// A part posted, its answer pending.
struct Posted {
    first: usize,
    last: usize,
    refused_here: Vec<RejectedLine>,
    answer: tokio::task::JoinHandle<Result<(u16, String), ClientError>>,
}

/// A list being submitted: [`Submission::next`] gives each part's answer in the list's
/// order, then the end or why it stopped.
pub struct Submission {
    target: Arc<Target>,
    parts: Option<mpsc::Receiver<Result<Part, ReadError>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    posted: VecDeque<Posted>,
    /// the first part that failed, and why
    failed: Option<(usize, usize, String)>,
    went_in_after: Vec<(usize, usize)>,
    read_error: Option<ReadError>,
    submitted: usize,
}

impl Submission {
    /// Start reading `input` (named `name` in errors) in parts on a thread of its own, so
    /// reading the next part overlaps the daemon's work on the last one. Call within a
    /// tokio runtime.
    pub fn start(target: Target, input: Box<dyn BufRead + Send>, name: String) -> Submission {
        let (tx, rx) = mpsc::channel(1);
        Submission {
            target: Arc::new(target),
            parts: Some(rx),
            reader: Some(read_parts(input, name, tx)),
            posted: VecDeque::new(),
            failed: None,
            went_in_after: Vec::new(),
            read_error: None,
            submitted: 0,
        }
    }

    /// The next part the daemon took; `None` when the whole list went in; an error when
    /// a part was refused (after the parts posted with it were answered) or the list could
    /// not be read.
    pub async fn next(&mut self) -> Result<Option<PartAnswered>, SubmitError> {
        loop {
            self.post_more().await;
            let Some(p) = self.posted.pop_front() else {
                return self.finish();
            };
            let answer = match p.answer.await {
                Ok(a) => a.map_err(|e| chain(&e)),
                Err(e) => Err(format!("the request task failed: {e}")),
            };
            let resp = match answer {
                Ok((200, resp)) => resp,
                Ok((status, resp)) => {
                    self.failed
                        .get_or_insert_with(|| (p.first, p.last, refusal(status, &resp)));
                    continue;
                }
                Err(e) => {
                    self.failed.get_or_insert((p.first, p.last, e));
                    continue;
                }
            };
            if self.failed.is_some() {
                self.went_in_after.push((p.first, p.last));
            }
            self.submitted += p.last + 1 - p.first;
            return answered(p.first, p.last, p.refused_here, resp).map(Some);
        }
    }

    /// Keep [`PARTS_IN_FLIGHT`] posted while the list lasts and nothing failed.
    async fn post_more(&mut self) {
        let Some(parts) = self.parts.as_mut() else {
            return;
        };
        while self.failed.is_none() && self.read_error.is_none() {
            if self.posted.len() >= PARTS_IN_FLIGHT {
                return;
            }
            match parts.recv().await {
                Some(Ok(part)) => {
                    let t = self.target.clone();
                    let body = part.body;
                    self.posted.push_back(Posted {
                        first: part.first,
                        last: part.first + part.lines - 1,
                        refused_here: part.refused_here,
                        answer: tokio::spawn(
                            async move { request(&t, "POST", "/v1/urls", body).await },
                        ),
                    });
                }
                Some(Err(e)) => self.read_error = Some(e),
                None => return,
            }
        }
    }

    /// Every posted part answered: the end, or why it stopped.
    fn finish(&mut self) -> Result<Option<PartAnswered>, SubmitError> {
        // the reader stops at the end of the list, at a read error, or once nothing
        // receives
        self.parts = None;
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        if let Some((first, last, why)) = self.failed.take() {
            return Err(SubmitError::Refused {
                first,
                last,
                why,
                went_in_after: std::mem::take(&mut self.went_in_after),
            });
        }
        if let Some(source) = self.read_error.take() {
            return Err(SubmitError::Read {
                submitted: self.submitted,
                source,
            });
        }
        Ok(None)
    }
}

/// What the daemon said about a part that it did not take.
fn refusal(status: u16, resp: &str) -> String {
    let msg = serde_json::from_str::<ErrorAnswer>(resp)
        .map(|a| a.error)
        .unwrap_or_else(|_| resp.trim().to_string());
    format!("HTTP {status}: {msg}")
}

/// A part's answer with its lines numbered in the whole list, the lines refused before
/// sending among them.
pub(super) fn answered(
    first: usize,
    last: usize,
    refused_here: Vec<RejectedLine>,
    resp: String,
) -> Result<PartAnswered, SubmitError> {
    let mut answer: SubmitAnswer = match serde_json::from_str(&resp) {
        Ok(a) => a,
        Err(source) => {
            return Err(SubmitError::NotUnderstood {
                answer: resp,
                source,
            })
        }
    };
    for r in &mut answer.rejections {
        r.line = r.line + first - 1;
    }
    answer.rejections.extend(refused_here);
    answer.rejections.sort_by_key(|r| r.line);
    answer.rejected = answer.rejections.len();
    Ok(PartAnswered {
        first,
        last,
        answer,
    })
}

/// Read the list into parts on a thread of its own.
fn read_parts(
    input: Box<dyn BufRead + Send>,
    name: String,
    tx: mpsc::Sender<Result<Part, ReadError>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = LineReader::new(input);
        loop {
            match next_part(&mut reader, &name) {
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

/// The next part of the list, `None` at its end.
fn next_part<R: BufRead>(
    reader: &mut LineReader<R>,
    name: &str,
) -> Result<Option<Part>, ReadError> {
    let first = reader.lines_read() + 1;
    // room for the largest part up front: grown by doubling, each of the parts held at
    // once (posted, queued, being read) could keep twice what it uses
    let mut body = Vec::with_capacity(BATCH_BYTES + MAX_LINE_BYTES + 1);
    let mut refused_here = Vec::new();
    while reader.lines_read() + 1 - first < BATCH_LINES && body.len() < BATCH_BYTES {
        let after = reader.lines_read();
        let line = match reader.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(source) => {
                return Err(ReadError {
                    name: name.to_string(),
                    after,
                    source,
                })
            }
        };
        match classify(line.bytes, line.total_len) {
            Line::Skip => {}
            // too long to send whole: refused here, by the daemon's own rule
            Line::Rejected { reason, input, .. } if line.total_len > line.bytes.len() => {
                refused_here.push(RejectedLine {
                    line: line.number,
                    url: input,
                    reason,
                });
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
        refused_here,
    }))
}
