//! What goes in and out of the frontier: URLs offered, leases handed out.

use crate::canon::Rejection;

/// 128-bit hash of a canonical URL: the seen-set key.
pub fn url_hash(canonical: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(canonical.as_bytes())
}

/// Identifies a page lease: host id and queue sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId {
    /// Host id.
    pub host_id: u64,
    /// Sequence in the host's queue.
    pub seq: u64,
}

/// A page handed out for fetching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLease {
    /// Lease id (pass it back to [`Frontier::complete`]).
    pub id: LeaseId,
    /// Canonical URL.
    pub url: String,
    /// Which attempt this is (1 = first).
    pub attempt: u32,
    /// Link depth the URL was queued with (0 for seeds).
    pub depth: u32,
    /// The page it was found on or redirected from, as queued (None for submitted URLs).
    pub via: Option<String>,
    /// Its hop path from the seed, as queued (see [`EnqueueItem::hops`]).
    pub hops: String,
    /// What it is fetched as: a page, or a sitemap to parse (see [`EntryKind`]).
    pub kind: EntryKind,
    /// How long politeness held this URL back once it was at the head of its queue with
    /// a free slot on its host and its robots verdict known: the host's gap, back-off or
    /// robots hold, in ms (0 if it went out as soon as the host was free).
    pub politeness_wait_ms: u64,
    /// The URL's recrawl record when it was visited before (validators for a
    /// conditional GET, the last payload digest, when that payload was archived); None
    /// for a first visit.
    pub revisit: Option<crate::sched::recrawl::RevisitRecord>,
    /// No other URL of its host was queued when it went: the fetch need not keep its
    /// connection open for a next one (an idle kept socket to a host with nothing left
    /// would hold one of the fetcher's capped slots until its idle timeout).
    pub last_queued: bool,
}

/// A robots.txt fetch handed out for an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsLease {
    /// Host id (politeness key) it counts against.
    pub host_id: u64,
    /// Origin, `scheme://host[:port]`.
    pub origin: String,
    /// `origin/robots.txt`.
    pub url: String,
}

/// One unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkItem {
    /// Fetch this page.
    Page(PageLease),
    /// Fetch this origin's robots.txt first.
    Robots(RobotsLease),
}

/// One URL offered to [`Frontier::enqueue_items`], with where it came from: all of it is
/// stored with the queued URL (so it survives restarts) and returned on its [`PageLease`].
///
/// The two recrawl fields (`revisit_interval_ms`, `refetch_at_ms`) are the per-URL part of
/// the revisit schedule (`docs/recrawl.md`): a seed or submit line, a sitemap's
/// `changefreq`/`lastmod`, or url-frontier's `refetchable_from_date` set them; `None`
/// leaves the URL to the `[recrawl]` configuration. They are kept in the URL's recrawl
/// record, inside its queue entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnqueueItem {
    /// The URL as found (canonicalized by the frontier).
    pub url: String,
    /// Link depth: 0 for a submitted URL.
    pub depth: u32,
    /// The page it was found on or redirected from; None for a submitted URL. Stored as
    /// given: it is the costliest part of a queue entry.
    pub via: Option<String>,
    /// Hop path from the seed (Heritrix's discovery path, e.g. `LLR`), empty for a submitted
    /// URL. Stored as given: the caller bounds its length.
    pub hops: String,
    /// This URL's own revisit interval in ms, overriding the `[recrawl]` default, host
    /// and pattern intervals (adaptive mode still halves/doubles it within its bounds).
    /// `Some(0)` means never revisit this URL. `None`: the configuration decides.
    pub revisit_interval_ms: Option<u64>,
    /// Do not fetch before this instant (unix ms). A new URL with a time in the future
    /// waits in the due index instead of its host queue (url-frontier's
    /// `refetchable_from_date`); a time in the past, or `None`, queues it now.
    pub refetch_at_ms: Option<u64>,
    /// What it is fetched as; stored with the queue entry.
    pub kind: EntryKind,
    /// What the sitemap that listed it says (`lastmod`, `changefreq`, `priority`); None
    /// for a URL not found in a sitemap. Not stored with the queue entry: it is for the
    /// revisit schedule, at intake.
    pub hints: Option<SitemapHints>,
}

impl EnqueueItem {
    /// A submitted URL: depth 0, no via, empty hop path.
    pub fn seed(url: impl Into<String>) -> EnqueueItem {
        EnqueueItem {
            url: url.into(),
            depth: 0,
            via: None,
            hops: String::new(),
            revisit_interval_ms: None,
            refetch_at_ms: None,
            kind: EntryKind::Page,
            hints: None,
        }
    }
}

/// What a queued URL is fetched as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EntryKind {
    /// A page: fetched, archived, its links extracted.
    #[default]
    Page,
    /// A sitemap (sitemaps.org): fetched through the same host queue, politeness and
    /// robots gate as a page, then parsed for the URLs it lists.
    Sitemap(SitemapSource),
}

/// Who named a sitemap: it decides which URLs the sitemap may list and whether it may be
/// an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SitemapSource {
    /// Given in the configuration or submitted as a sitemap.
    Listed,
    /// A `Sitemap:` line of the host's robots.txt.
    Robots,
    /// Listed by a sitemap index: an index here is not followed (one level of nesting).
    IndexChild,
}

impl EntryKind {
    /// The byte stored in a queue entry (0 = page).
    pub fn code(self) -> u8 {
        match self {
            EntryKind::Page => 0,
            EntryKind::Sitemap(SitemapSource::Listed) => 1,
            EntryKind::Sitemap(SitemapSource::Robots) => 2,
            EntryKind::Sitemap(SitemapSource::IndexChild) => 3,
        }
    }

    /// The kind stored as `code`; None for a code this version does not know.
    pub fn from_code(code: u8) -> Option<EntryKind> {
        Some(match code {
            0 => EntryKind::Page,
            1 => EntryKind::Sitemap(SitemapSource::Listed),
            2 => EntryKind::Sitemap(SitemapSource::Robots),
            3 => EntryKind::Sitemap(SitemapSource::IndexChild),
            _ => return None,
        })
    }
}

/// sitemaps.org `changefreq`: how often the site says a page changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeFreq {
    Always,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    Never,
}

impl ChangeFreq {
    /// The value as written in a sitemap (case-insensitive, surrounding space ignored).
    pub fn parse(s: &str) -> Option<ChangeFreq> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "always" => ChangeFreq::Always,
            "hourly" => ChangeFreq::Hourly,
            "daily" => ChangeFreq::Daily,
            "weekly" => ChangeFreq::Weekly,
            "monthly" => ChangeFreq::Monthly,
            "yearly" => ChangeFreq::Yearly,
            "never" => ChangeFreq::Never,
            _ => return None,
        })
    }
}

/// What a sitemap says about one URL it lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SitemapHints {
    /// `lastmod` (W3C datetime) as unix milliseconds (UTC).
    pub lastmod_ms: Option<i64>,
    pub changefreq: Option<ChangeFreq>,
    /// `priority` (0.0 to 1.0) in thousandths.
    pub priority_permille: Option<u16>,
}

/// Result of offering one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueResult {
    /// Queued (durably, once `enqueue_batch` returned).
    Queued,
    /// Already seen.
    Duplicate,
    /// Refused, with the reason.
    Rejected(Rejection),
}
/// A new host's name to resolve before its first robots.txt (see `resolve.rs`).
/// The caller is asked to find its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveRequest {
    /// Host id (politeness key) to report the answer for.
    pub host_id: u64,
    /// The name to resolve (or an IP literal), as in the URL, without brackets or port.
    pub host: String,
}
