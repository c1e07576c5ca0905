//! Intake of URL lists, one rule for every path in (`POST /v1/urls`, the spool,
//! `run --seeds`, and `frontierd submit`, which posts through the API): lines are read
//! incrementally, a line that is not UTF-8 (or longer than [`MAX_LINE_BYTES`]) is rejected
//! by its line number with a reason, the other lines go in. Nothing is rewritten into
//! another URL. Echoed input is cut to [`ECHO_CHARS`] characters by [`echo`].
//! See docs/operations.md ("Feed seeds").

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::daemon::Shared;

/// Characters of an input line echoed back (crawl log, spool rejected file, API answer).
pub const ECHO_CHARS: usize = 200;

/// Longest line read from a URL list. Longer lines are rejected `too-long` without being
/// held in memory: the frontier refuses URLs over 8 KiB anyway (docs/urls.md).
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Rejected `--seeds` lines logged one by one (WARN), at most; the crawl log has them all.
const SEED_REJECTS_LOGGED: usize = 20;

/// `input` as it is echoed back: whole when at most [`ECHO_CHARS`] characters, else its first
/// [`ECHO_CHARS`] characters and its length, e.g. `http://a/aaaa… (1048576 bytes)`.
pub fn echo(input: &str) -> String {
    echo_bytes(input.as_bytes(), input.len())
}

/// [`echo`] for raw bytes, of which `total_len` is the length of the whole input (more than
/// `bytes.len()` when only a prefix was kept). Bytes that are not UTF-8 are shown as `\xNN`.
pub fn echo_bytes(bytes: &[u8], total_len: usize) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut cut = total_len > bytes.len();
    'chunks: for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if chars == ECHO_CHARS {
                cut = true;
                break 'chunks;
            }
            out.push(c);
            chars += 1;
        }
        for b in chunk.invalid() {
            if chars == ECHO_CHARS {
                cut = true;
                break 'chunks;
            }
            out.push_str(&format!("\\x{b:02X}"));
            chars += 1;
        }
    }
    if cut {
        out.push_str(&format!("… ({total_len} bytes)"));
    }
    out
}

/// One line of a URL list, classified.
#[derive(Debug, PartialEq)]
pub enum Line<'a> {
    /// Blank, or a `#` comment.
    Skip,
    /// A candidate URL (trimmed), for the frontier to accept or reject.
    Url(&'a str),
    /// Refused before the frontier sees it.
    Rejected {
        /// Reason code (metric label): `not-utf8` or `too-long`.
        code: &'static str,
        /// The code and what is wrong, e.g. `not-utf8: byte 0xE9 at offset 3`.
        reason: String,
        /// The line as echoed back ([`echo_bytes`]).
        input: String,
    },
}

/// Classify one line: `bytes` without its line end, `total_len` the whole line's length
/// (more than `bytes.len()` when the reader kept only [`MAX_LINE_BYTES`] of it).
pub fn classify(bytes: &[u8], total_len: usize) -> Line<'_> {
    let trimmed = bytes.trim_ascii();
    if trimmed.is_empty() || trimmed.starts_with(b"#") {
        // a comment is a comment whatever its bytes or length
        return Line::Skip;
    }
    if total_len > bytes.len() {
        let lead = bytes.len() - bytes.trim_ascii_start().len();
        return Line::Rejected {
            code: "too-long",
            reason: format!("too-long: lines over {MAX_LINE_BYTES} bytes are not read"),
            input: echo_bytes(&bytes[lead..], total_len - lead),
        };
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Line::Url(text.trim()),
        Err(e) => {
            let at = e.valid_up_to();
            let byte = bytes.get(at).copied().unwrap_or(0);
            Line::Rejected {
                code: "not-utf8",
                reason: format!("not-utf8: byte 0x{byte:02X} at offset {at} of the line"),
                input: echo_bytes(trimmed, trimmed.len()),
            }
        }
    }
}

/// Reads a URL list line by line, keeping at most [`MAX_LINE_BYTES`] of any line in memory.
pub struct LineReader<R> {
    inner: R,
    line_no: usize,
    buf: Vec<u8>,
}

/// One line as read: its 1-based number, its bytes without the line end (cut at
/// [`MAX_LINE_BYTES`]) and its whole length.
pub struct RawLine<'a> {
    pub number: usize,
    pub bytes: &'a [u8],
    pub total_len: usize,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> LineReader<R> {
        LineReader {
            inner,
            line_no: 0,
            buf: Vec::new(),
        }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> usize {
        self.line_no
    }

    /// The next line (`\n` or `\r\n` ended, or the last one without an end); None at EOF.
    pub fn next_line(&mut self) -> io::Result<Option<RawLine<'_>>> {
        self.buf.clear();
        let mut total = 0usize;
        let mut last_byte = None;
        let mut any = false;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let (part, used, ended) = match avail.iter().position(|b| *b == b'\n') {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&part[..part.len().min(room)]);
            total += part.len();
            if let Some(b) = part.last() {
                last_byte = Some(*b);
            }
            self.inner.consume(used);
            if ended {
                break;
            }
        }
        if last_byte == Some(b'\r') {
            total -= 1;
            if self.buf.len() > total {
                self.buf.truncate(total);
            }
        }
        self.line_no += 1;
        Ok(Some(RawLine {
            number: self.line_no,
            bytes: &self.buf,
            total_len: total,
        }))
    }
}

/// A line refused, with its number in the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub line: usize,
    /// Reason code (the `reason` label of `frontierd_urls_rejected_total`).
    pub code: String,
    /// The code, and for intake rejections what is wrong.
    pub reason: String,
    /// The line as echoed back ([`echo`]).
    pub input: String,
}

/// URLs (with their line numbers) and the lines already refused.
#[derive(Debug, Default)]
pub struct Batch {
    pub urls: Vec<(usize, String)>,
    pub rejected: Vec<Rejection>,
}

impl Batch {
    /// A JSON array's strings: element i is line i + 1.
    pub fn from_urls(urls: Vec<String>) -> Batch {
        Batch {
            urls: urls
                .into_iter()
                .enumerate()
                .map(|(i, u)| (i + 1, u))
                .collect(),
            rejected: Vec::new(),
        }
    }

    fn push(&mut self, line: RawLine<'_>) {
        match classify(line.bytes, line.total_len) {
            Line::Skip => {}
            Line::Url(u) => self.urls.push((line.number, u.to_string())),
            Line::Rejected {
                code,
                reason,
                input,
            } => self.rejected.push(Rejection {
                line: line.number,
                code: code.to_string(),
                reason,
                input,
            }),
        }
    }
}

/// Read lines until `max_urls` URLs are collected or the input ends; None when no line was
/// left to read.
pub fn read_batch<R: BufRead>(
    reader: &mut LineReader<R>,
    max_urls: usize,
) -> io::Result<Option<Batch>> {
    let mut batch = Batch::default();
    let mut any = false;
    while batch.urls.len() < max_urls.max(1) {
        let Some(line) = reader.next_line()? else {
            break;
        };
        any = true;
        batch.push(line);
    }
    Ok(any.then_some(batch))
}

/// A whole URL list held in memory (an API body).
pub fn parse_list(bytes: &[u8]) -> Batch {
    let mut reader = LineReader::new(bytes);
    // reading from a slice cannot fail
    read_batch(&mut reader, usize::MAX)
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// What became of a batch.
#[derive(Debug, Default)]
pub struct Tally {
    pub accepted: u64,
    pub duplicate: u64,
    /// In line order.
    pub rejected: Vec<Rejection>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.accepted += other.accepted;
        self.duplicate += other.duplicate;
        self.rejected.extend(other.rejected);
    }
}

/// Offer a batch of seeds (depth 0) to the frontier, durably. Every rejected line, refused
/// here or by the frontier, is counted and written to the crawl log.
pub async fn submit_batch(sh: &Arc<Shared>, batch: Batch) -> Result<Tally> {
    for r in &batch.rejected {
        sh.metrics.rejected(&r.code);
        sh.log_outcome(&r.input, crawl::Outcome::Rejected, None, 0, 0, &r.reason);
    }
    let urls: Vec<String> = batch.urls.iter().map(|(_, u)| u.clone()).collect();
    let summary = sh.submit(urls, 0, true).await?;
    let mut rejected = batch.rejected;
    for (i, url, code) in summary.rejected {
        rejected.push(Rejection {
            line: batch.urls.get(i).map(|(n, _)| *n).unwrap_or(0),
            reason: code.clone(),
            code,
            input: echo(&url),
        });
    }
    rejected.sort_by_key(|r| r.line);
    Ok(Tally {
        accepted: summary.accepted,
        duplicate: summary.duplicate,
        rejected,
    })
}

/// `run --seeds FILE`: read and submit it in batches; rejected lines are logged by number.
pub async fn submit_seed_file(sh: &Arc<Shared>, path: &Path) -> Result<()> {
    let file = fs::File::open(path).with_context(|| format!("opening seeds {}", path.display()))?;
    let mut reader = LineReader::new(BufReader::new(file));
    let chunk = sh.settings.raw.intake.batch_size as usize;
    let (mut accepted, mut duplicate, mut rejected) = (0u64, 0u64, 0usize);
    while let Some(batch) = read_batch(&mut reader, chunk)
        .with_context(|| format!("reading seeds {}", path.display()))?
    {
        let t = submit_batch(sh, batch).await?;
        for r in &t.rejected {
            if rejected < SEED_REJECTS_LOGGED {
                tracing::warn!(
                    file = %path.display(), line = r.line, reason = %r.reason, input = %r.input,
                    "seed line rejected"
                );
            }
            rejected += 1;
        }
        accepted += t.accepted;
        duplicate += t.duplicate;
    }
    tracing::info!(
        file = %path.display(), lines = reader.lines_read(), accepted, duplicate, rejected,
        "seeds submitted (rejected lines are in the crawl log)"
    );
    Ok(())
}

// ------------------------------------------------------------------------- spool

/// Poll `spool/incoming`: ingest each file durably, then move it to `spool/done`.
pub async fn spool_loop(sh: Arc<Shared>) {
    let every = sh.settings.raw.intake.poll_interval.0;
    loop {
        if let Err(e) = spool_once(&sh).await {
            tracing::error!(error = format!("{e:#}"), "spool intake failed");
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = sh.shutdown.notified() => return,
        }
    }
}

/// What a name in `spool/incoming` is, judged without opening it (a FIFO would block).
#[derive(Debug, PartialEq)]
enum SpoolEntry {
    /// A regular file, or a symbolic link to one (`link` is its target).
    File { link: Option<PathBuf> },
    /// Anything else: moved to `spool/rejected/` with this reason.
    Reject { label: &'static str, reason: String },
}

fn kind_of(ft: fs::FileType) -> (&'static str, &'static str) {
    if ft.is_dir() {
        ("rejected-directory", "a directory")
    } else if ft.is_fifo() {
        ("rejected-fifo", "a FIFO (named pipe)")
    } else if ft.is_socket() {
        ("rejected-socket", "a socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        ("rejected-device", "a device")
    } else {
        ("rejected-other", "not a regular file")
    }
}

fn spool_entry(path: &Path) -> io::Result<SpoolEntry> {
    let ft = fs::symlink_metadata(path)?.file_type();
    if ft.is_file() {
        return Ok(SpoolEntry::File { link: None });
    }
    if !ft.is_symlink() {
        let (label, what) = kind_of(ft);
        return Ok(SpoolEntry::Reject {
            label,
            reason: format!("{what}, not a file of URLs"),
        });
    }
    let target = fs::read_link(path)?;
    Ok(match fs::metadata(path) {
        Ok(m) if m.is_file() => SpoolEntry::File { link: Some(target) },
        Ok(m) => SpoolEntry::Reject {
            label: "rejected-link-to-non-file",
            reason: format!(
                "symbolic link to {}, which is {}, not a file of URLs",
                target.display(),
                kind_of(m.file_type()).1
            ),
        },
        Err(e) => SpoolEntry::Reject {
            label: "rejected-dangling-link",
            reason: format!(
                "symbolic link to {}, which cannot be read: {e}",
                target.display()
            ),
        },
    })
}

async fn spool_once(sh: &Arc<Shared>) -> Result<()> {
    let spool = sh.settings.spool_dir.clone();
    let incoming = spool.join("incoming");
    let mut names: Vec<OsString> = Vec::new();
    for e in fs::read_dir(&incoming).with_context(|| format!("listing {}", incoming.display()))? {
        let name = e?.file_name();
        // dot-files are being written (docs/operations.md)
        if !name.as_encoded_bytes().starts_with(b".") {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        if sh.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let path = incoming.join(&name);
        match spool_entry(&path) {
            Ok(SpoolEntry::File { link }) => ingest_file(sh, &spool, &name, link).await?,
            Ok(SpoolEntry::Reject { label, reason }) => {
                reject_entry(sh, &spool, &name, label, &reason)?
            }
            // gone since the listing
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("inspecting {}", path.display())),
        }
    }
    Ok(())
}

/// `name` in `dir`, or `name.1`, `name.2`… when taken (with its `.reason` file).
fn free_name(dir: &Path, name: &OsStr) -> OsString {
    let taken = |n: &OsStr| {
        let mut reason = n.to_os_string();
        reason.push(".reason");
        fs::symlink_metadata(dir.join(n)).is_ok() || fs::symlink_metadata(dir.join(reason)).is_ok()
    };
    if !taken(name) {
        return name.to_os_string();
    }
    (1u64..)
        .map(|i| {
            let mut n = name.to_os_string();
            n.push(format!(".{i}"));
            n
        })
        .find(|n| !taken(n))
        .unwrap_or_else(|| name.to_os_string())
}

/// Move an entry that is not a file of URLs to `spool/rejected/`, with `NAME.reason` next
/// to it; log and count it.
fn reject_entry(
    sh: &Shared,
    spool: &Path,
    name: &OsStr,
    label: &'static str,
    reason: &str,
) -> Result<()> {
    let from = spool.join("incoming").join(name);
    let rejected = spool.join("rejected");
    let dest = free_name(&rejected, name);
    let mut reason_name = dest.clone();
    reason_name.push(".reason");
    let tmp = spool.join("tmp").join({
        let mut n = OsString::from(".reason-");
        n.push(&dest);
        n
    });
    let mut f = fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    writeln!(f, "{}: {reason}", name.to_string_lossy())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    if let Err(e) = fs::rename(&from, rejected.join(&dest)) {
        fs::remove_file(&tmp).ok();
        return Err(e)
            .with_context(|| format!("moving {} to {}", from.display(), rejected.display()));
    }
    fs::rename(&tmp, rejected.join(&reason_name))
        .with_context(|| format!("moving {} into {}", tmp.display(), rejected.display()))?;
    sh.metrics.spool_file(label);
    tracing::warn!(
        file = %name.to_string_lossy(), reason, moved_to = %rejected.join(&dest).display(),
        "spool entry rejected"
    );
    Ok(())
}

async fn ingest_file(
    sh: &Arc<Shared>,
    spool: &Path,
    name: &OsStr,
    link: Option<PathBuf>,
) -> Result<()> {
    let path = spool.join("incoming").join(name);
    let file = match fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            let reason = format!("cannot be opened: {e}");
            return reject_entry(sh, spool, name, "rejected-unreadable", &reason);
        }
    };
    let chunk = sh.settings.raw.intake.batch_size as usize;
    let mut reader = LineReader::new(BufReader::new(file));
    let mut tally = Tally::default();
    loop {
        let batch = match read_batch(&mut reader, chunk) {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                // lines before it are queued; a re-read would only find duplicates
                let reason = format!("read error after line {}: {e}", reader.lines_read());
                return reject_entry(sh, spool, name, "rejected-unreadable", &reason);
            }
        };
        tally.add(submit_batch(sh, batch).await?);
    }
    let display_name = name.to_string_lossy();
    if !tally.rejected.is_empty() {
        let mut tmp_name = OsString::from(".rejected-");
        tmp_name.push(name);
        let tmp = spool.join("tmp").join(tmp_name);
        let mut body = String::from("# line\treason\turl\n");
        for r in &tally.rejected {
            body.push_str(&format!("{}\t{}\t{}\n", r.line, r.reason, r.input));
        }
        fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, spool.join("rejected").join(name))
            .context("moving the rejected-lines file")?;
    }
    let done = spool.join("done").join(name);
    // a symbolic link itself is moved, never its target
    fs::rename(&path, &done).with_context(|| format!("moving {} to done", path.display()))?;
    sh.metrics.spool_file(if tally.rejected.is_empty() {
        "ok"
    } else {
        "with-rejects"
    });
    tracing::info!(
        file = %display_name,
        link_to = link.as_ref().map(|l| l.display().to_string()),
        lines = reader.lines_read(),
        accepted = tally.accepted,
        duplicate = tally.duplicate,
        rejected = tally.rejected.len(),
        "spool file ingested"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Batch {
        parse_list(input)
    }

    #[test]
    fn echo_keeps_short_input_and_cuts_long_input_with_its_length() {
        assert_eq!(echo("http://a/b"), "http://a/b");
        let long = format!("http://a/{}", "x".repeat(1 << 20));
        let e = echo(&long);
        assert!(e.starts_with("http://a/xxx"), "{e}");
        assert!(e.ends_with(&format!("… ({} bytes)", long.len())), "{e}");
        assert_eq!(
            e.chars().count(),
            ECHO_CHARS + format!("… ({} bytes)", long.len()).len() - 2
        );
        // exactly ECHO_CHARS characters (multi-byte ones) are not cut
        let wide = "é".repeat(ECHO_CHARS);
        assert_eq!(echo(&wide), wide);
        let wider = "é".repeat(ECHO_CHARS + 1);
        assert_eq!(
            echo(&wider),
            format!("{}… ({} bytes)", "é".repeat(ECHO_CHARS), wider.len())
        );
    }

    #[test]
    fn echo_shows_bytes_that_are_not_utf8_escaped() {
        assert_eq!(echo_bytes(b"http://a/caf\xe9", 13), "http://a/caf\\xE9");
        assert_eq!(echo_bytes(b"abc", 10), "abc… (10 bytes)");
    }

    #[test]
    fn a_latin1_line_is_rejected_by_number_and_the_others_go_in() {
        let b = lines(b"# seeds\nhttp://a/one\nhttp://a/caf\xe9\n\n  http://a/two  \r\n");
        assert_eq!(
            b.urls,
            vec![
                (2, "http://a/one".to_string()),
                (5, "http://a/two".to_string())
            ]
        );
        assert_eq!(
            b.rejected,
            vec![Rejection {
                line: 3,
                code: "not-utf8".into(),
                reason: "not-utf8: byte 0xE9 at offset 12 of the line".into(),
                input: "http://a/caf\\xE9".into(),
            }]
        );
        // never rewritten with U+FFFD
        assert!(!b.urls.iter().any(|(_, u)| u.contains('\u{FFFD}')));
    }

    #[test]
    fn a_comment_with_latin1_bytes_is_still_a_comment() {
        let b = lines(b"# caf\xe9\nhttp://a/\n");
        assert!(b.rejected.is_empty(), "{:?}", b.rejected);
        assert_eq!(b.urls, vec![(2, "http://a/".to_string())]);
    }

    #[test]
    fn an_overlong_line_is_rejected_with_its_length_and_not_kept() {
        let mut input = b"http://a/".to_vec();
        input.resize(1 << 20, b'a');
        input.extend_from_slice(b"\r\nhttp://a/next");
        let mut reader = LineReader::new(&input[..]);
        let first = reader.next_line().unwrap().unwrap();
        assert_eq!(first.bytes.len(), MAX_LINE_BYTES);
        assert_eq!(first.total_len, 1 << 20);
        let b = lines(&input);
        assert_eq!(b.urls, vec![(2, "http://a/next".to_string())]);
        assert_eq!(b.rejected.len(), 1);
        let r = &b.rejected[0];
        assert_eq!((r.line, r.code.as_str()), (1, "too-long"));
        assert!(r.input.ends_with("… (1048576 bytes)"), "{}", r.input);
        assert!(r.input.len() < 300, "{}", r.input.len());
    }

    #[test]
    fn line_numbers_stay_true_across_batches() {
        let input = b"http://a/1\n#\nhttp://a/2\nhttp://a/\xff\nhttp://a/3\n";
        let mut reader = LineReader::new(&input[..]);
        let first = read_batch(&mut reader, 2).unwrap().unwrap();
        assert_eq!(first.urls.iter().map(|u| u.0).collect::<Vec<_>>(), [1, 3]);
        let second = read_batch(&mut reader, 2).unwrap().unwrap();
        assert_eq!(second.urls, vec![(5, "http://a/3".to_string())]);
        assert_eq!(second.rejected[0].line, 4);
        assert!(read_batch(&mut reader, 2).unwrap().is_none());
    }

    #[test]
    fn spool_entries_are_judged_without_opening_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("file"), "http://a/\n").unwrap();
        fs::create_dir(d.join("dir")).unwrap();
        std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        std::os::unix::fs::symlink(d.join("dir"), d.join("dirlink")).unwrap();
        let mkfifo = std::process::Command::new("mkfifo")
            .arg(d.join("fifo"))
            .status()
            .unwrap();
        assert!(mkfifo.success());
        assert_eq!(
            spool_entry(&d.join("file")).unwrap(),
            SpoolEntry::File { link: None }
        );
        assert_eq!(
            spool_entry(&d.join("link")).unwrap(),
            SpoolEntry::File {
                link: Some(d.join("file"))
            }
        );
        let label = |n: &str| match spool_entry(&d.join(n)).unwrap() {
            SpoolEntry::Reject { label, .. } => label,
            other => panic!("{n}: {other:?}"),
        };
        assert_eq!(label("dir"), "rejected-directory");
        assert_eq!(label("dangling"), "rejected-dangling-link");
        assert_eq!(label("dirlink"), "rejected-link-to-non-file");
        assert_eq!(label("fifo"), "rejected-fifo");
    }

    #[test]
    fn free_name_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(free_name(d, OsStr::new("x")), "x");
        fs::write(d.join("x"), "").unwrap();
        assert_eq!(free_name(d, OsStr::new("x")), "x.1");
        fs::write(d.join("x.1.reason"), "").unwrap();
        assert_eq!(free_name(d, OsStr::new("x")), "x.2");
    }
}
