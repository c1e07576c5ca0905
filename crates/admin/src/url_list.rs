//! The URL list format, one rule for every path in (`POST /v1/urls`, the spool,
//! `run --seeds`, and `frontierd submit`, which posts through the API): lines are read
//! incrementally, a line that is not UTF-8 (or longer than [`MAX_LINE_BYTES`]) is rejected
//! by its line number with a reason, the other lines go in. Nothing is rewritten into
//! another URL. Echoed input is cut to [`ECHO_CHARS`] characters by [`echo`].
//! See docs/operations.md ("Feed seeds").

use std::io::{self, BufRead};

/// Characters of an input line echoed back (crawl log, spool rejected file, API answer).
pub const ECHO_CHARS: usize = 200;

/// Longest line read from a URL list. Longer lines are rejected `too-long` without being
/// held in memory: the frontier refuses URLs over 8 KiB anyway (docs/urls.md).
pub const MAX_LINE_BYTES: usize = 64 << 10;

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
    pub code: &'static str,
    /// The code, and for intake rejections what is wrong.
    pub reason: String,
    /// The line as echoed back ([`echo`]).
    pub input: String,
}

/// What became of URLs offered to a frontier.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offered {
    pub accepted: u64,
    pub duplicate: u64,
    /// Every rejection, lines refused before the frontier saw them and the frontier's, in
    /// line order.
    pub rejected: Vec<Rejection>,
    /// Indices in the offered items of the URLs already known.
    pub duplicate_at: Vec<usize>,
    /// Indices in the offered items of the URLs queued.
    pub queued_at: Vec<usize>,
}

/// The frontier's `results` for `items` (item i on line `lines[i]`, or i + 1 when `lines`
/// has none for it) tallied, its rejections merged with the lines `refused` before it into
/// line order; a rejected URL is echoed cut ([`echo`]: it may be a 1 MB line).
pub fn tally_offer(
    items: &[frontier::EnqueueItem],
    lines: &[usize],
    results: Vec<frontier::EnqueueResult>,
    refused: Vec<Rejection>,
) -> Offered {
    use frontier::EnqueueResult;
    let mut offered = Offered {
        rejected: refused,
        ..Offered::default()
    };
    for (i, (item, r)) in items.iter().zip(results).enumerate() {
        match r {
            EnqueueResult::Queued => {
                offered.accepted += 1;
                offered.queued_at.push(i);
            }
            EnqueueResult::Duplicate => {
                offered.duplicate += 1;
                offered.duplicate_at.push(i);
            }
            EnqueueResult::Rejected(rej) => offered.rejected.push(Rejection {
                line: lines.get(i).copied().unwrap_or(i + 1),
                code: rej.code(),
                reason: rej.code().to_string(),
                input: echo(&item.url),
            }),
        }
    }
    offered.rejected.sort_by_key(|r| r.line);
    offered
}

/// A submitted URL's own recrawl fields (`docs/recrawl.md`; JSON submissions only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UrlRecrawl {
    /// Its own revisit interval in ms (`Some(0)`: never revisit).
    pub revisit_interval_ms: Option<u64>,
    /// Not to be fetched before this instant (unix ms).
    pub refetch_at_ms: Option<u64>,
}

/// URLs (with their line numbers) and the lines already refused.
#[derive(Debug, Default)]
pub struct Batch {
    pub urls: Vec<(usize, String)>,
    pub rejected: Vec<Rejection>,
    /// Recrawl fields of the URLs that carry some, by index in `urls`.
    pub recrawl: std::collections::BTreeMap<usize, UrlRecrawl>,
    /// What the URLs that are not pages are fetched as (a sitemap), by index in `urls`
    /// (JSON submissions only).
    pub kinds: std::collections::BTreeMap<usize, frontier::EntryKind>,
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
            recrawl: Default::default(),
            kinds: Default::default(),
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
                code,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_tallied_with_every_rejection_in_line_order() {
        use frontier::{EnqueueItem, EnqueueResult};
        let long = format!("http://a.test/{}", "x".repeat(2000));
        let items: Vec<_> = ["http://a.test/", "http://a.test/", "ftp://a.test/", &long]
            .map(EnqueueItem::seed)
            .to_vec();
        let results = vec![
            EnqueueResult::Queued,
            EnqueueResult::Duplicate,
            EnqueueResult::Rejected(frontier::Rejection::UnsupportedScheme("ftp".into())),
            EnqueueResult::Rejected(frontier::Rejection::NoHost),
        ];
        let refused = vec![Rejection {
            line: 4,
            code: "not_a_url",
            reason: "not_a_url".into(),
            input: "x".into(),
        }];
        let offered = tally_offer(&items, &[1, 3, 5, 7], results, refused);
        assert_eq!((offered.accepted, offered.duplicate), (1, 1));
        assert_eq!(offered.duplicate_at, [1]);
        let lines: Vec<_> = offered.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, [4, 5, 7]);
        assert_eq!(offered.rejected[1].reason, offered.rejected[1].code);
        assert_eq!(offered.rejected[2].input, echo(&long));
        // without line numbers, item i is line i + 1
        let plain = tally_offer(
            &items[2..3],
            &[],
            vec![EnqueueResult::Rejected(frontier::Rejection::NoHost)],
            Vec::new(),
        );
        assert_eq!(plain.rejected[0].line, 1);
    }

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
                code: "not-utf8",
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
        assert_eq!((r.line, r.code), (1, "too-long"));
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
}
