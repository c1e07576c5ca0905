//! sitemaps.org sitemaps: the parser ([`parse_sitemap`]), which URLs a sitemap may list
//! ([`judge`]) and what its `lastmod`/`changefreq` mean for a revisit ([`revisit_interval`]).
//!
//! The parser reads `urlset` and `sitemapindex` documents, plain or gzip-compressed, with
//! quick-xml as a stream: the body is inflated and parsed piece by piece, and it stops at
//! [`SitemapLimits::max_bytes`] of uncompressed XML, so a gzip bomb costs the cap, not its
//! inflated size. One XML event (a text run such as whitespace between entries, a tag with
//! its attributes, a comment, a CDATA section) is held whole while it is read, so no event
//! may be longer than [`MAX_EVENT_BYTES`]: a longer one ends the parse ([`Cut::EventTooLarge`]).
//! The parse holds at most the 64 KiB read buffer, the gzip window, one event and the
//! entries kept (their text is part of the bytes read, so at most `max_bytes` of it);
//! measured in docs/benchmarks.md ("Hostile input"). Past [`SitemapLimits::max_urls`]
//! entries it keeps reading only to count what it cut. Malformed XML ends the parse with its position; the entries read before it
//! are kept. Nothing here panics on any input (tests/sitemap_props.rs, fuzz/).

use std::cell::Cell;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::rc::Rc;
use std::time::Duration;

use flate2::read::MultiGzDecoder;
use frontier::{ChangeFreq, SitemapHints};
use quick_xml::events::{BytesRef, Event};
use quick_xml::Reader;

mod judge;
mod queue;
mod w3c;

pub use judge::{judge_sitemap, listed_in_scope, Dropped, SitemapReport, SitemapVerdict};
pub use queue::{
    apply_priority, apply_refetch_interval, listed_in_config, named_by_robots, Lastmods,
    NamedSitemaps,
};
pub use w3c::parse_w3c_datetime;

/// sitemaps.org: at most 50,000 URLs per file.
pub const PROTOCOL_MAX_URLS: usize = 50_000;
/// sitemaps.org: at most 50 MB (52,428,800 bytes) uncompressed per file.
pub const PROTOCOL_MAX_BYTES: u64 = 50 * 1024 * 1024;
/// A `loc` (or other field) longer than this is not a URL a sitemap may give
/// (sitemaps.org: under 2,048 characters); its entry is invalid. Bounds what one field
/// holds in memory.
pub const MAX_FIELD_BYTES: usize = 4096;
/// The longest XML event read (text between two tags, one tag with its attributes, a
/// comment, a CDATA section). A real sitemap's longest is its root tag with a few
/// namespace declarations (about a kilobyte); the parser holds one whole event in memory,
/// so without a bound 50 MiB of whitespace between two entries cost 50 MiB.
pub const MAX_EVENT_BYTES: u64 = 256 * 1024;

/// What one sitemap may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SitemapLimits {
    /// Entries (`url` or `sitemap`) kept; more are counted and cut.
    pub max_urls: usize,
    /// Uncompressed XML bytes read; the rest is cut.
    pub max_bytes: u64,
}

impl Default for SitemapLimits {
    fn default() -> Self {
        SitemapLimits {
            max_urls: PROTOCOL_MAX_URLS,
            max_bytes: PROTOCOL_MAX_BYTES,
        }
    }
}

/// The document's root element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapType {
    /// `<urlset>`: page URLs.
    UrlSet,
    /// `<sitemapindex>`: sitemap URLs.
    Index,
}

impl SitemapType {
    pub fn as_str(self) -> &'static str {
        match self {
            SitemapType::UrlSet => "urlset",
            SitemapType::Index => "sitemapindex",
        }
    }
}

/// One `url` (or `sitemap`) entry with a `loc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapEntry {
    /// The `loc`, trimmed (not yet parsed as a URL).
    pub loc: String,
    /// `lastmod`, `changefreq`, `priority` (index entries have only `lastmod`); a value
    /// that does not parse is left out.
    pub hints: SitemapHints,
}

/// Why a parse stopped before the end of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// More entries than `max_urls`: `over` of them were counted and not kept.
    TooManyUrls { limit: usize, over: u64 },
    /// More uncompressed bytes than `max_bytes` (a huge file, an endless one or a gzip
    /// bomb): entries read before the cap are kept.
    TooLarge { limit: u64 },
    /// Not well-formed XML at `position` (byte offset in the uncompressed XML).
    Malformed { position: u64, error: String },
    /// The gzip stream is damaged after `position` uncompressed bytes.
    Gzip { position: u64, error: String },
    /// The document does not start with `urlset` or `sitemapindex`: `start` is what it
    /// starts with (`<html>`, or `text`).
    NotASitemap { start: String },
    /// One XML event (a text run, a tag, a comment) starting at `position` is longer than
    /// `limit` bytes ([`MAX_EVENT_BYTES`]): hostile or broken, not read further.
    EventTooLarge { position: u64, limit: u64 },
}

impl Cut {
    /// Stable name: the `result` label of `frontierd_sitemaps_total`.
    pub fn code(&self) -> &'static str {
        match self {
            Cut::TooManyUrls { .. } => "too-many-urls",
            Cut::TooLarge { .. } => "too-large",
            Cut::Malformed { .. } => "malformed",
            Cut::Gzip { .. } => "bad-gzip",
            Cut::NotASitemap { .. } => "not-a-sitemap",
            Cut::EventTooLarge { .. } => "event-too-large",
        }
    }
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cut::TooManyUrls { limit, over } => write!(
                f,
                "more than {limit} entries: {over} more were cut (sitemaps.max_urls_per_file)"
            ),
            Cut::TooLarge { limit } => write!(
                f,
                "more than {limit} uncompressed bytes: the rest was cut (sitemaps.max_uncompressed_bytes)"
            ),
            Cut::Malformed { position, error } => {
                write!(f, "malformed XML at byte {position}: {error}")
            }
            Cut::Gzip { position, error } => {
                write!(f, "damaged gzip after {position} uncompressed bytes: {error}")
            }
            Cut::NotASitemap { start } => {
                write!(f, "the document starts with {start}, not <urlset> or <sitemapindex>")
            }
            Cut::EventTooLarge { position, limit } => write!(
                f,
                "an XML text run, tag or comment at byte {position} is longer than {limit} bytes: not read further"
            ),
        }
    }
}

/// What a sitemap body held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedSitemap {
    /// None when no root element was read.
    pub kind: Option<SitemapType>,
    /// The entries kept, in document order.
    pub entries: Vec<SitemapEntry>,
    /// Entries without a usable `loc` (missing, empty, over [`MAX_FIELD_BYTES`]).
    pub invalid: u64,
    /// Set when the parse stopped early or entries were cut.
    pub cut: Option<Cut>,
    /// The body was gzip-compressed.
    pub gzip: bool,
    /// Uncompressed XML bytes read.
    pub bytes: u64,
}

/// Reads at most `left` bytes from `inner`, then ends; remembers whether more was there
/// and whether the inner reader (the gzip decoder) failed. Never hands out a byte past
/// `event_limit` (set by the event loop to the current event's start plus
/// [`MAX_EVENT_BYTES`]): the event being read can hold no more.
struct CappedReader<R> {
    inner: R,
    left: u64,
    read: u64,
    over_cap: bool,
    inner_error: Option<String>,
    event_limit: Rc<Cell<u64>>,
    event_over_limit: bool,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let event_room = self.event_limit.get().saturating_sub(self.read);
        if event_room == 0 && self.left > 0 {
            self.event_over_limit = true;
            return Err(io::Error::other("XML event over its size limit"));
        }
        let room = buf
            .len()
            .min(usize::try_from(event_room).unwrap_or(usize::MAX));
        let buf = &mut buf[..room];
        if self.left == 0 {
            if !self.over_cap {
                // one byte more tells a body of exactly the cap from a longer one
                let mut probe = [0u8; 1];
                match self.inner.read(&mut probe) {
                    Ok(0) => {}
                    Ok(_) => self.over_cap = true,
                    // a damaged tail past the cap: it is cut either way
                    Err(_) => self.over_cap = true,
                }
            }
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        match self.inner.read(&mut buf[..want]) {
            Ok(n) => {
                self.left -= n as u64;
                self.read += n as u64;
                Ok(n)
            }
            Err(e) => {
                self.inner_error = Some(e.to_string());
                Err(e)
            }
        }
    }
}

/// Which field of an entry is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Loc,
    Lastmod,
    ChangeFreq,
    Priority,
}

impl Field {
    fn of(local_name: &[u8]) -> Option<Field> {
        match local_name {
            b"loc" => Some(Field::Loc),
            b"lastmod" => Some(Field::Lastmod),
            b"changefreq" => Some(Field::ChangeFreq),
            b"priority" => Some(Field::Priority),
            _ => None,
        }
    }
}

/// The entry being read.
#[derive(Default)]
struct EntryText {
    loc: String,
    lastmod: String,
    changefreq: String,
    priority: String,
    /// A field was longer than [`MAX_FIELD_BYTES`].
    too_long: bool,
}

impl EntryText {
    fn push(&mut self, field: Field, text: &str) {
        let target = match field {
            Field::Loc => &mut self.loc,
            Field::Lastmod => &mut self.lastmod,
            Field::ChangeFreq => &mut self.changefreq,
            Field::Priority => &mut self.priority,
        };
        if target.len() + text.len() > MAX_FIELD_BYTES {
            self.too_long = true;
            return;
        }
        target.push_str(text);
    }

    fn finish(self, kind: SitemapType) -> Option<SitemapEntry> {
        let loc = self.loc.trim();
        if loc.is_empty() || self.too_long {
            return None;
        }
        let mut hints = SitemapHints {
            lastmod_ms: parse_w3c_datetime(&self.lastmod),
            ..SitemapHints::default()
        };
        // an index entry has only loc and lastmod
        if kind == SitemapType::UrlSet {
            hints.changefreq = ChangeFreq::parse(&self.changefreq);
            hints.priority_permille = parse_priority(&self.priority);
        }
        Some(SitemapEntry {
            loc: loc.to_string(),
            hints,
        })
    }
}

/// `priority`: a number from 0.0 to 1.0, in thousandths; None otherwise.
fn parse_priority(s: &str) -> Option<u16> {
    let v: f64 = s.trim().parse().ok()?;
    (0.0..=1.0)
        .contains(&v)
        .then(|| (v * 1000.0).round() as u16)
}

/// Parse a sitemap body (plain XML, or gzip by its magic bytes) within `limits`. Never
/// fails: what could not be read is in [`ParsedSitemap::cut`], what was read before it
/// is kept.
pub fn parse_sitemap(body: &[u8], limits: &SitemapLimits) -> ParsedSitemap {
    let gzip = body.starts_with(&[0x1f, 0x8b]);
    let source: Box<dyn Read + '_> = if gzip {
        Box::new(MultiGzDecoder::new(body))
    } else {
        Box::new(body)
    };
    let event_limit = Rc::new(Cell::new(MAX_EVENT_BYTES));
    let capped = CappedReader {
        inner: source,
        left: limits.max_bytes,
        read: 0,
        over_cap: false,
        inner_error: None,
        event_limit: event_limit.clone(),
        event_over_limit: false,
    };
    let mut reader = Reader::from_reader(BufReader::with_capacity(64 * 1024, capped));
    let mut out = ParsedSitemap {
        gzip,
        ..ParsedSitemap::default()
    };
    let mut over: u64 = 0;
    let mut event_start = 0;
    let error = read_entries(
        &mut reader,
        limits,
        &mut out,
        &mut over,
        &event_limit,
        &mut event_start,
    );
    let capped = reader.get_ref().get_ref();
    out.bytes = capped.read;
    out.cut = if capped.event_over_limit {
        Some(Cut::EventTooLarge {
            position: event_start,
            limit: MAX_EVENT_BYTES,
        })
    } else if capped.over_cap {
        Some(Cut::TooLarge {
            limit: limits.max_bytes,
        })
    } else if let Some(e) = &capped.inner_error {
        Some(Cut::Gzip {
            position: capped.read,
            error: e.clone(),
        })
    } else {
        error
    };
    if out.cut.is_none() && over > 0 {
        out.cut = Some(Cut::TooManyUrls {
            limit: limits.max_urls,
            over,
        });
    }
    out
}

/// The event loop: fills `out.entries`, counts entries past the limit in `over`; returns
/// the XML error (or the wrong root) that stopped it.
fn read_entries<R: io::BufRead>(
    reader: &mut Reader<R>,
    limits: &SitemapLimits,
    out: &mut ParsedSitemap,
    over: &mut u64,
    event_limit: &Cell<u64>,
    event_start: &mut u64,
) -> Option<Cut> {
    let mut buf = Vec::new();
    let mut cursor = Cursor::default();
    loop {
        buf.clear();
        // a buffer that once held a long event does not stay that long
        buf.shrink_to(4096);
        *event_start = reader.buffer_position();
        event_limit.set(event_start.saturating_add(MAX_EVENT_BYTES));
        let event = match reader.read_event_into(&mut buf) {
            Ok(e) => e,
            Err(e) => {
                return Some(Cut::Malformed {
                    position: reader.error_position(),
                    error: e.to_string(),
                })
            }
        };
        let (start, end, name) = match &event {
            Event::Start(e) => (true, false, e.local_name().as_ref().to_vec()),
            Event::Empty(e) => (true, true, e.local_name().as_ref().to_vec()),
            Event::End(e) => (false, true, e.local_name().as_ref().to_vec()),
            Event::Text(t) => {
                // text before the root: not XML of any sitemap (an endless "aaaa..." body,
                // a plain text file); said at once, not after reading up to the cap
                if cursor.depth == 0 && t.iter().any(|b| !b.is_ascii_whitespace()) {
                    return Some(Cut::NotASitemap {
                        start: "text".into(),
                    });
                }
                cursor.push_text(|| t.decode().ok());
                continue;
            }
            Event::CData(t) => {
                cursor.push_text(|| t.decode().ok());
                continue;
            }
            Event::GeneralRef(r) => {
                cursor.push_text(|| resolve_reference(r));
                continue;
            }
            Event::Eof => {
                let error = if cursor.depth > 0 {
                    format!("the document ends inside {} open element(s)", cursor.depth)
                } else {
                    // empty, or only a declaration or comments (a body cut short)
                    "no root element".to_string()
                };
                return Some(Cut::Malformed {
                    position: reader.buffer_position(),
                    error,
                });
            }
            _ => continue,
        };
        if start {
            if let Some(cut) = cursor.open(&name, out) {
                return Some(cut);
            }
        }
        if end && cursor.close(limits, out, over) {
            // the root closed: whatever follows (comments, space) is not read
            return None;
        }
    }
}

/// Where the event loop is in the document.
#[derive(Default)]
struct Cursor {
    /// Element depth: 1 = the root, 2 = an entry, 3 = an entry's field.
    depth: usize,
    /// The entry being read, when the element at depth 2 is one.
    entry: Option<EntryText>,
    /// The field being read, when the element at depth 3 is one of an entry.
    field: Option<Field>,
}

impl Cursor {
    /// Adds text to the field being read, if any. `text` is only worked out then; None
    /// (text that does not decode, an entity that does not resolve) makes the field not
    /// what it says, so its entry is invalid.
    fn push_text<S: AsRef<str>>(&mut self, text: impl FnOnce() -> Option<S>) {
        if let (Some(f), Some(en)) = (self.field, self.entry.as_mut()) {
            match text() {
                Some(s) => en.push(f, s.as_ref()),
                None => en.too_long = true,
            }
        }
    }

    /// An element opens: the root sets the document's kind (or ends the parse when it
    /// is no sitemap's), an entry of that kind starts, a known field of it starts.
    fn open(&mut self, name: &[u8], out: &mut ParsedSitemap) -> Option<Cut> {
        self.depth += 1;
        match self.depth {
            1 => {
                out.kind = match name {
                    b"urlset" => Some(SitemapType::UrlSet),
                    b"sitemapindex" => Some(SitemapType::Index),
                    other => {
                        let name: String =
                            String::from_utf8_lossy(other).chars().take(64).collect();
                        return Some(Cut::NotASitemap {
                            start: format!("<{name}>"),
                        });
                    }
                };
            }
            2 => {
                let want: &[u8] = match out.kind {
                    Some(SitemapType::Index) => b"sitemap",
                    _ => b"url",
                };
                if name == want {
                    self.entry = Some(EntryText::default());
                }
            }
            3 => self.field = self.entry.as_ref().and_then(|_| Field::of(name)),
            _ => {}
        }
        None
    }

    /// An element closes: a field ends, an entry is kept (or counted as invalid, or as
    /// over `max_urls`). True when it was the root.
    fn close(&mut self, limits: &SitemapLimits, out: &mut ParsedSitemap, over: &mut u64) -> bool {
        match self.depth {
            3 => self.field = None,
            2 => {
                if let (Some(en), Some(kind)) = (self.entry.take(), out.kind) {
                    match en.finish(kind) {
                        None => out.invalid += 1,
                        Some(_) if out.entries.len() >= limits.max_urls => *over += 1,
                        Some(e) => out.entries.push(e),
                    }
                }
            }
            1 => return true,
            _ => {}
        }
        self.depth = self.depth.saturating_sub(1);
        false
    }
}

/// The text of a character reference (`&#233;`) or of a predefined entity (`&amp;`);
/// None for any other entity, which a sitemap cannot declare.
fn resolve_reference(r: &BytesRef<'_>) -> Option<String> {
    match r.resolve_char_ref() {
        Ok(Some(c)) => Some(c.to_string()),
        Ok(None) => r
            .decode()
            .ok()
            .and_then(|n| quick_xml::escape::resolve_predefined_entity(&n))
            .map(str::to_string),
        Err(_) => None,
    }
}

/// How often a URL is revisited for what its sitemap says it changes: `always` is read as
/// hourly (a crawler does not refetch on every access), `never` (an archived page) as no
/// revisit. Once the revisit schedule exists this is the per-URL interval a sitemap gives.
pub fn revisit_interval(changefreq: ChangeFreq) -> Option<Duration> {
    const HOUR: u64 = 3600;
    const DAY: u64 = 24 * HOUR;
    let secs = match changefreq {
        ChangeFreq::Always | ChangeFreq::Hourly => HOUR,
        ChangeFreq::Daily => DAY,
        ChangeFreq::Weekly => 7 * DAY,
        ChangeFreq::Monthly => 30 * DAY,
        ChangeFreq::Yearly => 365 * DAY,
        ChangeFreq::Never => return None,
    };
    Some(Duration::from_secs(secs))
}

/// A listed URL's own revisit interval in ms as the revisit schedule takes it: its
/// `changefreq` read by [`revisit_interval`], `Some(0)` for `never` (never revisit), None
/// without a `changefreq` (the `[recrawl]` configuration decides).
pub fn revisit_interval_ms(hints: &SitemapHints) -> Option<u64> {
    hints.changefreq.map(|c| {
        revisit_interval(c).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// The `priority` every listed URL has when it gives none (sitemaps.org: 0.5).
pub const DEFAULT_PRIORITY_PERMILLE: u16 = 500;

/// The mean `priority` of a sitemap's entries (a missing one counts as 0.5): the reference
/// [`priority_scaled_interval`] judges each entry against.
pub fn mean_priority_permille<'a>(hints: impl Iterator<Item = Option<&'a SitemapHints>>) -> u16 {
    let (mut sum, mut n) = (0u64, 0u64);
    for h in hints {
        let p = h
            .and_then(|h| h.priority_permille)
            .unwrap_or(DEFAULT_PRIORITY_PERMILLE)
            .min(1000);
        sum += u64::from(p);
        n += 1;
    }
    if n == 0 {
        return DEFAULT_PRIORITY_PERMILLE;
    }
    u16::try_from(sum / n).unwrap_or(DEFAULT_PRIORITY_PERMILLE)
}

/// A listed URL's revisit interval after its `priority`: sitemaps.org defines priority
/// as relative to the site's other URLs, so it is judged against the mean of its sitemap
/// (`mean_permille`): `interval x 2^(mean - priority)`, i.e. between half and twice the
/// interval, then kept within `min_ms..=max_ms`. A sitemap saying 1.0 for every URL has a
/// mean of 1.0 and gains nothing; one URL at 1.0 among 0.5s is revisited about 1.4 times
/// as often, one at 0.0 about 1.4 times less.
pub fn priority_scaled_interval(
    interval_ms: u64,
    priority_permille: u16,
    mean_permille: u16,
    min_ms: u64,
    max_ms: u64,
) -> u64 {
    let p = f64::from(priority_permille.min(1000)) / 1000.0;
    let mean = f64::from(mean_permille.min(1000)) / 1000.0;
    let factor = (mean - p).exp2();
    let scaled = (interval_ms as f64 * factor).round();
    // (a float past u64::MAX saturates in `as`)
    (scaled as u64).clamp(min_ms, max_ms.max(min_ms))
}

/// Whether a URL's `lastmod` says it changed after it was last fetched (at
/// `fetched_at_ms`, unix ms): then it is due at once, whatever its interval. A URL
/// without `lastmod` keeps its schedule.
pub fn changed_since_fetch(hints: &SitemapHints, fetched_at_ms: i64) -> bool {
    hints.lastmod_ms.is_some_and(|m| m > fetched_at_ms)
}

#[cfg(test)]
mod tests;
