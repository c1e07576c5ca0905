//! Bytes to directives, with the leniency of Google's robotstxt library.
//!
//! The line splitter and key/value extraction reproduce that library's behaviour byte for
//! byte (BOM prefix skipped, CR/LF/CRLF, lines cut at 16 663 bytes, a NUL ends a line,
//! `#` starts a comment, a missing colon accepted when the line has exactly two words,
//! keys recognised by prefix and common typos), because a verdict that differs from
//! Google's is a bug for us. Everything ignored or repaired is reported as a [`Diagnostic`].

use std::fmt;

/// Google's robots.txt fetch limit: content past it is ignored.
pub const DEFAULT_MAX_BYTES: usize = 500 * 1024;

/// Longest line content kept (Google: a 2083*8 byte buffer including its terminator).
pub const MAX_LINE_BYTES: usize = 2083 * 8 - 1;

/// The largest size limit honoured, whatever `ParseOptions::max_bytes` says: offsets inside
/// a parsed file are 32-bit, and escaping can triple a pattern's size.
pub const HARD_MAX_BYTES: usize = 256 * 1024 * 1024;

/// At most this many diagnostics are kept; the rest are only counted, so a 500 KiB HTML
/// page served as robots.txt cannot make the report larger than the file.
pub const MAX_DIAGNOSTICS: usize = 1000;

/// How to parse a robots.txt body.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Bytes past this offset are ignored (default 500 KiB, as Google does; at most
    /// [`HARD_MAX_BYTES`]).
    pub max_bytes: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// The recognised fields. Anything else is [`Field::Unknown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    UserAgent,
    Allow,
    Disallow,
    Sitemap,
    /// Not a Google field; this project honours it (spec section 9).
    CrawlDelay,
    Unknown,
}

impl Field {
    pub fn as_str(self) -> &'static str {
        match self {
            Field::UserAgent => "user-agent",
            Field::Allow => "allow",
            Field::Disallow => "disallow",
            Field::Sitemap => "sitemap",
            Field::CrawlDelay => "crawl-delay",
            Field::Unknown => "unknown",
        }
    }
}

/// Why a line was ignored or repaired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// The line has no `:` and is not exactly `key value`.
    NoSeparator,
    /// A `:` with nothing before it.
    EmptyKey,
    /// A field this parser does not know; the line is ignored.
    UnknownField(String),
    /// An allow/disallow line before any user-agent line: it belongs to no group.
    RuleWithoutUserAgent,
    /// An allow/disallow with an empty path: it restricts nothing.
    RuleWithoutPath,
    /// A misspelt or prefixed key read as a known field (e.g. `dissallow`, `useragent`).
    KeyRepaired { written: String, read_as: Field },
    /// `key value` read as `key: value`.
    MissingColonAccepted,
    /// The line was longer than [`MAX_LINE_BYTES`]; the rest was dropped.
    LineCut { original_len: usize },
    /// The body was larger than the size limit; this many bytes were ignored.
    PastSizeLimit { ignored_bytes: usize, limit: usize },
    /// A crawl-delay whose value is not a non-negative number of seconds.
    BadCrawlDelay(String),
    /// A sitemap line with no URL.
    EmptySitemap,
    /// A NUL byte ended the line early (as in Google's C string handling).
    NulByte,
}

impl fmt::Display for DiagnosticKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiagnosticKind::NoSeparator => write!(f, "ignored: not a `field: value` line"),
            DiagnosticKind::EmptyKey => write!(f, "ignored: no field name before ':'"),
            DiagnosticKind::UnknownField(k) => write!(f, "ignored: unknown field `{k}`"),
            DiagnosticKind::RuleWithoutUserAgent => {
                write!(f, "ignored: rule before any user-agent line")
            }
            DiagnosticKind::RuleWithoutPath => write!(f, "ignored: rule without a path"),
            DiagnosticKind::KeyRepaired { written, read_as } => {
                write!(f, "repaired: `{written}` read as `{}`", read_as.as_str())
            }
            DiagnosticKind::MissingColonAccepted => {
                write!(f, "repaired: missing ':' after the field name accepted")
            }
            DiagnosticKind::LineCut { original_len } => write!(
                f,
                "repaired: line of {original_len} bytes cut to {MAX_LINE_BYTES} bytes"
            ),
            DiagnosticKind::PastSizeLimit {
                ignored_bytes,
                limit,
            } => write!(
                f,
                "ignored: {ignored_bytes} bytes past the {limit}-byte size limit"
            ),
            DiagnosticKind::BadCrawlDelay(v) => {
                write!(f, "ignored: crawl-delay `{v}` is not a number of seconds")
            }
            DiagnosticKind::EmptySitemap => write!(f, "ignored: sitemap without a URL"),
            DiagnosticKind::NulByte => write!(f, "repaired: NUL byte ends the line"),
        }
    }
}

/// One ignored or repaired line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line number, counted as Google counts them.
    pub line: u32,
    pub kind: DiagnosticKind,
}

/// A recognised `field: value` line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawDirective<'a> {
    pub field: Field,
    /// The key was misspelt or had extra text after a known field name.
    pub repaired: bool,
    pub key: &'a [u8],
    /// Trimmed value, not yet escaped.
    pub value: &'a [u8],
    pub missing_colon: bool,
}

/// Google's `ascii_isspace`.
#[inline]
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

#[inline]
pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_space(*first) {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if is_space(*last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

#[inline]
fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Classify a key the way Google does: by case-insensitive prefix, with typos.
/// Returns the field and whether the key was repaired (not exactly the canonical name).
pub(crate) fn classify_key(key: &[u8]) -> (Field, bool) {
    let exact = |name: &[u8]| key.eq_ignore_ascii_case(name);
    if starts_with_ignore_case(key, b"user-agent") {
        return (Field::UserAgent, !exact(b"user-agent"));
    }
    if starts_with_ignore_case(key, b"useragent") || starts_with_ignore_case(key, b"user agent") {
        return (Field::UserAgent, true);
    }
    if starts_with_ignore_case(key, b"allow") {
        return (Field::Allow, !exact(b"allow"));
    }
    if starts_with_ignore_case(key, b"disallow") {
        return (Field::Disallow, !exact(b"disallow"));
    }
    for typo in [
        &b"dissallow"[..],
        b"dissalow",
        b"disalow",
        b"diasllow",
        b"disallaw",
    ] {
        if starts_with_ignore_case(key, typo) {
            return (Field::Disallow, true);
        }
    }
    if starts_with_ignore_case(key, b"sitemap") {
        return (Field::Sitemap, !exact(b"sitemap"));
    }
    if starts_with_ignore_case(key, b"site-map") {
        return (Field::Sitemap, true);
    }
    if exact(b"crawl-delay") {
        return (Field::CrawlDelay, false);
    }
    if exact(b"crawldelay") || exact(b"crawl delay") || exact(b"crawl_delay") {
        return (Field::CrawlDelay, true);
    }
    (Field::Unknown, false)
}

/// What one physical line turned out to be.
pub(crate) enum LineContent<'a> {
    /// Blank or comment-only.
    Blank,
    Invalid(DiagnosticKind),
    Directive(RawDirective<'a>),
}

/// One line as seen by the parser, with the repairs applied to it.
pub(crate) struct ParsedLine<'a> {
    pub number: u32,
    pub content: LineContent<'a>,
    pub cut_from: Option<usize>,
    pub had_nul: bool,
}

/// Splits a body into lines exactly as Google's parser does and extracts key and value.
pub(crate) struct Lines<'a> {
    body: &'a [u8],
    pos: usize,
    number: u32,
    last_was_cr: bool,
    finished: bool,
}

impl<'a> Lines<'a> {
    /// `body` must already be cut to the size limit.
    pub fn new(body: &'a [u8]) -> Self {
        // Skip a full or partial UTF-8 BOM at the very start.
        const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
        let mut pos = 0;
        while pos < 3 && pos < body.len() && body[pos] == BOM[pos] {
            pos += 1;
        }
        Lines {
            body,
            pos,
            number: 0,
            last_was_cr: false,
            finished: false,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = ParsedLine<'a>;

    fn next(&mut self) -> Option<ParsedLine<'a>> {
        loop {
            if self.finished {
                return None;
            }
            let rest = &self.body[self.pos..];
            let (raw, ending) = match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => (&rest[..i], Some(rest[i])),
                None => (rest, None),
            };
            match ending {
                Some(ch) => {
                    self.pos += raw.len() + 1;
                    // The LF of a CRLF pair does not make an empty line of its own.
                    let crlf_continuation = raw.is_empty() && self.last_was_cr && ch == b'\n';
                    self.last_was_cr = ch == b'\r';
                    if crlf_continuation {
                        continue;
                    }
                }
                None => {
                    self.pos = self.body.len();
                    self.finished = true;
                }
            }
            self.number += 1;
            return Some(parse_line(self.number, raw));
        }
    }
}

fn parse_line(number: u32, raw: &[u8]) -> ParsedLine<'_> {
    let mut line = raw;
    let mut cut_from = None;
    if line.len() > MAX_LINE_BYTES {
        cut_from = Some(line.len());
        line = &line[..MAX_LINE_BYTES];
    }
    let mut had_nul = false;
    if let Some(nul) = memchr::memchr(0, line) {
        had_nul = true;
        line = &line[..nul];
    }
    if let Some(hash) = memchr::memchr(b'#', line) {
        line = &line[..hash];
    }
    let line = trim(line);
    let content = if line.is_empty() {
        LineContent::Blank
    } else {
        split_key_value(line)
    };
    ParsedLine {
        number,
        content,
        cut_from,
        had_nul,
    }
}

fn split_key_value(line: &[u8]) -> LineContent<'_> {
    let (sep, missing_colon) = match memchr::memchr(b':', line) {
        Some(i) => (i, false),
        None => {
            // Accept whitespace instead of the colon, but only for exactly two words.
            let Some(ws) = line.iter().position(|&b| b == b' ' || b == b'\t') else {
                return LineContent::Invalid(DiagnosticKind::NoSeparator);
            };
            let after = &line[ws..];
            let val_start = after
                .iter()
                .position(|&b| b != b' ' && b != b'\t')
                .unwrap_or(after.len());
            if after[val_start..].iter().any(|&b| b == b' ' || b == b'\t') {
                return LineContent::Invalid(DiagnosticKind::NoSeparator);
            }
            (ws, true)
        }
    };
    let key = trim(&line[..sep]);
    if key.is_empty() {
        return LineContent::Invalid(DiagnosticKind::EmptyKey);
    }
    let value = trim(&line[sep + 1..]);
    let (field, repaired) = classify_key(key);
    LineContent::Directive(RawDirective {
        field,
        repaired,
        key,
        value,
        missing_colon,
    })
}

/// Percent-encode a rule pattern as Google does: bytes >= 0x80 become `%XX`, and the hex
/// digits of an existing `%xx` escape are upper-cased. Appends to `out`.
pub(crate) fn escape_pattern_into(src: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        if b == b'%'
            && i + 2 < src.len()
            && src[i + 1].is_ascii_hexdigit()
            && src[i + 2].is_ascii_hexdigit()
        {
            out.push(b'%');
            out.push(src[i + 1].to_ascii_uppercase());
            out.push(src[i + 2].to_ascii_uppercase());
            i += 3;
        } else if b & 0x80 != 0 {
            out.push(b'%');
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xF) as usize]);
            i += 1;
        } else {
            out.push(b);
            i += 1;
        }
    }
}

/// Google's `ExtractUserAgent`: the leading run of `[A-Za-z_-]`.
pub(crate) fn product_token(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .position(|&b| !(b.is_ascii_alphabetic() || b == b'-' || b == b'_'))
        .unwrap_or(value.len());
    &value[..end]
}

/// Google: `*` alone, or `*` followed by white space, names every crawler.
pub(crate) fn is_global_agent(value: &[u8]) -> bool {
    match value {
        [b'*'] => true,
        [b'*', next, ..] => is_space(*next),
        _ => false,
    }
}

/// Parse a crawl-delay value: a non-negative, finite number of seconds.
pub(crate) fn parse_crawl_delay(value: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let text = text.strip_suffix('s').unwrap_or(text).trim_end();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let secs: f64 = text.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line number and, for a directive, its field and value.
    type SeenLine = (u32, Option<(Field, Vec<u8>)>);

    fn lines(body: &[u8]) -> Vec<SeenLine> {
        Lines::new(body)
            .map(|l| {
                let d = match l.content {
                    LineContent::Directive(d) => Some((d.field, d.value.to_vec())),
                    _ => None,
                };
                (l.number, d)
            })
            .collect()
    }

    #[test]
    fn line_endings_cr_lf_crlf_count_like_google() {
        let got = lines(b"allow: /a\r\nallow: /b\rallow: /c\nallow: /d");
        let numbers: Vec<u32> = got.iter().filter(|l| l.1.is_some()).map(|l| l.0).collect();
        assert_eq!(numbers, vec![1, 2, 3, 4]);
        // "\r\r\n": the second CR makes an empty line, its LF does not make another.
        let got = lines(b"allow: /a\r\r\nallow: /b");
        assert_eq!(got.last().map(|l| l.0), Some(3));
    }

    #[test]
    fn bom_and_partial_bom_skipped() {
        for body in [
            &b"\xEF\xBB\xBFallow: /x"[..],
            b"\xEF\xBBallow: /x",
            b"\xEFallow: /x",
        ] {
            let got = lines(body);
            assert_eq!(
                got[0].1.as_ref().map(|d| d.0),
                Some(Field::Allow),
                "{body:?}"
            );
        }
        // A BOM later in the file is not skipped.
        let got = lines(b"\n\xEF\xBB\xBFallow: /x");
        assert_eq!(got[1].1.as_ref().map(|d| d.0), Some(Field::Unknown));
    }

    #[test]
    fn missing_colon_only_for_two_words() {
        let got = lines(b"disallow /x\ndisallow /x /y\nuser-agent\tfoo");
        assert_eq!(got[0].1, Some((Field::Disallow, b"/x".to_vec())));
        assert_eq!(got[1].1, None);
        assert_eq!(got[2].1, Some((Field::UserAgent, b"foo".to_vec())));
    }

    #[test]
    fn keys_by_prefix_and_typos() {
        assert_eq!(classify_key(b"DISALLOW"), (Field::Disallow, false));
        assert_eq!(classify_key(b"disalow"), (Field::Disallow, true));
        assert_eq!(classify_key(b"Dissallow"), (Field::Disallow, true));
        assert_eq!(classify_key(b"useragent"), (Field::UserAgent, true));
        assert_eq!(classify_key(b"user agent"), (Field::UserAgent, true));
        assert_eq!(classify_key(b"allowed"), (Field::Allow, true));
        assert_eq!(classify_key(b"site-map"), (Field::Sitemap, true));
        assert_eq!(classify_key(b"crawl-delay"), (Field::CrawlDelay, false));
        assert_eq!(classify_key(b"noindex"), (Field::Unknown, false));
    }

    #[test]
    fn escaping_matches_google() {
        let mut out = Vec::new();
        escape_pattern_into("/SanJoséSellers".as_bytes(), &mut out);
        assert_eq!(out, b"/SanJos%C3%A9Sellers");
        out.clear();
        escape_pattern_into(b"/a%aa%2f%zz%", &mut out);
        assert_eq!(out, b"/a%AA%2F%zz%");
    }

    #[test]
    fn nul_ends_line_and_long_lines_are_cut() {
        let got = lines(b"disallow: /a\0/b");
        assert_eq!(got[0].1, Some((Field::Disallow, b"/a".to_vec())));
        let mut long = b"disallow: /".to_vec();
        long.extend(std::iter::repeat_n(b'x', 20_000));
        let got = lines(&long);
        let value = &got[0].1.as_ref().map(|d| d.1.clone()).unwrap_or_default();
        assert_eq!(value.len(), MAX_LINE_BYTES - "disallow: ".len());
    }

    #[test]
    fn crawl_delay_values() {
        assert_eq!(parse_crawl_delay(b"10"), Some(10.0));
        assert_eq!(parse_crawl_delay(b"0.5"), Some(0.5));
        assert_eq!(parse_crawl_delay(b"2s"), Some(2.0));
        assert_eq!(parse_crawl_delay(b"-1"), None);
        assert_eq!(parse_crawl_delay(b"soon"), None);
        assert_eq!(parse_crawl_delay(b""), None);
    }
}
