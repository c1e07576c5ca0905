//! Recrawl: when a fetched URL is due again (the rules and their reasons:
//! `docs/recrawl.md`). Pure: every function takes `now_ms` and the URL's record, and
//! returns what to do; `recrawl.rs` at the crate root persists it.
//!
//! The interval of a URL is, first match wins: its own (`EnqueueItem::revisit_interval_ms`),
//! the first `[recrawl]` pattern that matches it, its host's, the default. In adaptive mode
//! (Nutch's AdaptiveFetchSchedule) the interval in force is halved after a visit that found
//! the content changed and doubled after one that found it unchanged (a 304, or the same
//! payload digest), within `min_interval_ms..=max_interval_ms`. A URL answering 404 or 410
//! `gone_after` times in a row leaves the schedule.

/// Recrawl settings (`[recrawl]` in the daemon's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecrawlConfig {
    /// Revisit interval of every fetched URL; `None`: one pass (no revisits), the default.
    pub default_interval_ms: Option<u64>,
    /// Per-host intervals (exact host name), `None` meaning no revisits for that host.
    pub hosts: Vec<(String, Option<u64>)>,
    /// Per-URL-pattern intervals, the first match wins; `None`: no revisits.
    pub patterns: Vec<(UrlPattern, Option<u64>)>,
    /// Halve the interval after a change, double it after no change.
    pub adaptive: bool,
    /// Lower bound of an adapted interval (and of every interval: a shorter one is raised).
    pub min_interval_ms: u64,
    /// Upper bound of an adapted interval.
    pub max_interval_ms: u64,
    /// 404/410 answers in a row after which a URL leaves the schedule; 0: never.
    pub gone_after: u32,
    /// Due URLs moved back to their host queues per dispatch call, at most.
    pub due_per_dispatch: usize,
    /// Keep a locator per scheduled URL (one small key each), so that a sitemap's
    /// `lastmod` can move a known URL's due time ([`crate::Frontier::apply_lastmod`]).
    /// Off by default: it costs a key per scheduled URL.
    pub locate_for_lastmod: bool,
}

impl Default for RecrawlConfig {
    fn default() -> Self {
        RecrawlConfig {
            default_interval_ms: None,
            hosts: Vec::new(),
            patterns: Vec::new(),
            adaptive: false,
            min_interval_ms: 60_000,
            max_interval_ms: 30 * 86_400_000,
            gone_after: 3,
            due_per_dispatch: 256,
            locate_for_lastmod: false,
        }
    }
}

impl RecrawlConfig {
    /// Whether the configuration alone schedules any URL (per-URL intervals aside).
    pub fn schedules_any(&self) -> bool {
        self.default_interval_ms.is_some()
            || self.hosts.iter().any(|(_, i)| i.is_some())
            || self.patterns.iter().any(|(_, i)| i.is_some())
    }
}

/// A URL pattern: with a `*` a glob over the whole URL (`*` matches any run of
/// characters), without one a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlPattern(String);

impl UrlPattern {
    /// The pattern as written.
    pub fn new(pattern: impl Into<String>) -> UrlPattern {
        UrlPattern(pattern.into())
    }
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Whether `url` (canonical) matches.
    pub fn matches(&self, url: &str) -> bool {
        if self.0.contains('*') {
            glob_match(self.0.as_bytes(), url.as_bytes())
        } else {
            url.starts_with(&self.0)
        }
    }
}

/// `*`-only glob, linear time (the last star is the only backtracking point).
fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, i));
            p += 1;
        } else if p < pat.len() && pat[p] == s[i] {
            p += 1;
            i += 1;
        } else if let Some((sp, si)) = star {
            p = sp + 1;
            i = si + 1;
            star = Some((sp, si + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// What a revisit found, compared with the visit before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VisitOutcome {
    /// No earlier visit is known.
    First,
    /// The payload differs from the last one (or the status changed to one with a body).
    Changed,
    /// The server answered 304 to the conditional request.
    NotModified,
    /// A full answer whose payload digest equals the last one.
    IdenticalDigest,
}

impl VisitOutcome {
    /// Stable name (crawl log, metrics).
    pub fn as_str(self) -> &'static str {
        match self {
            VisitOutcome::First => "first",
            VisitOutcome::Changed => "changed",
            VisitOutcome::NotModified => "not-modified",
            VisitOutcome::IdenticalDigest => "identical-digest",
        }
    }
}

/// What a conditional revisit needs of the last answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// `ETag` of the last full answer (sent back as `If-None-Match`).
    pub etag: Option<String>,
    /// `Last-Modified` of the last full answer (sent back as `If-Modified-Since`).
    pub last_modified: Option<String>,
    /// `WARC-Payload-Digest` of the last archived payload.
    pub payload_digest: Option<String>,
}

/// A fetch that ended with an HTTP answer, as the schedule needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visit {
    /// The status code.
    pub status: u16,
    /// Compared with the last visit.
    pub outcome: VisitOutcome,
    /// The validators of this answer (for a 304: the ones it repeated, if any).
    pub validators: Validators,
    /// When the fetch started (unix ms): the `WARC-Date` of its records.
    pub fetched_at_ms: u64,
    /// The fetcher's own next-visit time (unix ms), in place of the interval rules: an
    /// external fetcher's url-frontier `refetchable_from_date`. Scheduled even when
    /// `[recrawl]` is off.
    pub refetch_at_ms: Option<u64>,
}

/// One URL's recrawl record (kept in its queue entry, version 4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevisitRecord {
    /// When it is due (its key in the due index); 0: not in the index.
    pub due_ms: u64,
    /// The interval in force (adapted); 0 before the first scheduled visit.
    pub interval_ms: u64,
    /// Its own interval, from its enqueue (`Some(0)`: never revisit).
    pub url_interval_ms: Option<u64>,
    /// 404/410 answers in a row.
    pub gone_count: u32,
    /// Visits with an answer so far.
    pub visits: u32,
    /// When the payload its validators describe was archived in full (the `WARC-Date` of
    /// that response record, unix ms; 0: never): the `WARC-Refers-To-Date` of a revisit.
    pub captured_ms: u64,
    /// What the last answer said.
    pub validators: Validators,
}

/// What to do with a URL after a visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Due again at `due_ms`, with `interval_ms` in force.
    At {
        /// Due time (unix ms).
        due_ms: u64,
        /// Interval in force from now on.
        interval_ms: u64,
    },
    /// No revisit configured for it.
    Unscheduled,
    /// Gone: `gone_after` 404/410 answers in a row.
    Gone,
}

impl RecrawlConfig {
    /// The configured revisit interval of `url` on `host` before adaptation, given its own
    /// (`own`, from its submission); `None`: not revisited.
    pub fn base_interval(&self, url: &str, host: &str, own: Option<u64>) -> Option<u64> {
        base_interval(self, url, host, own)
    }
}

/// The configured interval of a URL before adaptation (see the module doc for the order);
/// `None`: not revisited.
pub fn base_interval(
    cfg: &RecrawlConfig,
    url: &str,
    host: &str,
    url_interval_ms: Option<u64>,
) -> Option<u64> {
    let chosen = match url_interval_ms {
        Some(ms) => Some(ms),
        None => match cfg.patterns.iter().find(|(p, _)| p.matches(url)) {
            Some((_, ms)) => *ms,
            None => match cfg.hosts.iter().find(|(h, _)| h.eq_ignore_ascii_case(host)) {
                Some((_, ms)) => *ms,
                None => cfg.default_interval_ms,
            },
        },
    };
    chosen
        .filter(|&ms| ms > 0)
        .map(|ms| ms.max(cfg.min_interval_ms))
}

/// Whether an answer says the URL is gone.
pub fn is_gone_status(status: u16) -> bool {
    matches!(status, 404 | 410)
}

/// The schedule after `visit` (None: the fetch ended without an answer the schedule can
/// judge, e.g. given up after retries: the interval in force is kept), and the URL's
/// 404/410 count from now on. `base` is [`base_interval`] of the URL.
pub fn next_visit(
    cfg: &RecrawlConfig,
    base: Option<u64>,
    rec: &RevisitRecord,
    visit: Option<&Visit>,
    now_ms: u64,
) -> (Next, u32) {
    let Some(base) = base else {
        return (Next::Unscheduled, 0);
    };
    let gone_count = match visit {
        Some(v) if is_gone_status(v.status) => rec.gone_count.saturating_add(1),
        Some(_) => 0,
        None => rec.gone_count,
    };
    if cfg.gone_after > 0 && gone_count >= cfg.gone_after {
        return (Next::Gone, gone_count);
    }
    let in_force = if cfg.adaptive && rec.interval_ms > 0 {
        rec.interval_ms
    } else {
        base
    };
    let interval = match visit.map(|v| (v.status, v.outcome)) {
        Some((200..=299 | 304, outcome)) if cfg.adaptive => match outcome {
            VisitOutcome::First => base,
            VisitOutcome::Changed => in_force / 2,
            VisitOutcome::NotModified | VisitOutcome::IdenticalDigest => in_force.saturating_mul(2),
        },
        _ => in_force,
    };
    let interval = if cfg.adaptive {
        interval.clamp(
            cfg.min_interval_ms,
            cfg.max_interval_ms.max(cfg.min_interval_ms),
        )
    } else {
        interval
    };
    (
        Next::At {
            due_ms: now_ms.saturating_add(interval),
            interval_ms: interval,
        },
        gone_count,
    )
}

/// The validators to keep after `visit`: a 304 keeps the last ones (updated by any it
/// repeated), any other answer replaces them.
pub fn merge_validators(old: &Validators, visit: &Visit) -> Validators {
    if visit.status == 304 {
        Validators {
            etag: visit.validators.etag.clone().or_else(|| old.etag.clone()),
            last_modified: visit
                .validators
                .last_modified
                .clone()
                .or_else(|| old.last_modified.clone()),
            payload_digest: old.payload_digest.clone(),
        }
    } else {
        visit.validators.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000;

    fn cfg() -> RecrawlConfig {
        RecrawlConfig {
            default_interval_ms: Some(8 * H),
            adaptive: true,
            min_interval_ms: H,
            max_interval_ms: 64 * H,
            ..RecrawlConfig::default()
        }
    }

    fn visit(status: u16, outcome: VisitOutcome) -> Visit {
        Visit {
            refetch_at_ms: None,
            status,
            outcome,
            validators: Validators::default(),
            fetched_at_ms: 0,
        }
    }

    fn rec(interval_ms: u64, gone_count: u32) -> RevisitRecord {
        RevisitRecord {
            interval_ms,
            gone_count,
            ..RevisitRecord::default()
        }
    }

    #[test]
    fn adaptive_halves_on_change_doubles_on_no_change_within_bounds() {
        let c = cfg();
        let base = Some(8 * H);
        let now = 1_000;
        let at = |interval_ms| Next::At {
            due_ms: now + interval_ms,
            interval_ms,
        };
        // first visit: the configured interval
        let first = visit(200, VisitOutcome::First);
        assert_eq!(
            next_visit(&c, base, &rec(0, 0), Some(&first), now).0,
            at(8 * H)
        );
        let changed = visit(200, VisitOutcome::Changed);
        assert_eq!(
            next_visit(&c, base, &rec(8 * H, 0), Some(&changed), now).0,
            at(4 * H)
        );
        let same = visit(304, VisitOutcome::NotModified);
        assert_eq!(
            next_visit(&c, base, &rec(8 * H, 0), Some(&same), now).0,
            at(16 * H)
        );
        let digest = visit(200, VisitOutcome::IdenticalDigest);
        assert_eq!(
            next_visit(&c, base, &rec(8 * H, 0), Some(&digest), now).0,
            at(16 * H)
        );
        // bounds
        assert_eq!(
            next_visit(&c, base, &rec(H, 0), Some(&changed), now).0,
            at(H)
        );
        assert_eq!(
            next_visit(&c, base, &rec(64 * H, 0), Some(&same), now).0,
            at(64 * H)
        );
        // a status that says nothing about the content keeps the interval in force
        let redirect = visit(301, VisitOutcome::Changed);
        assert_eq!(
            next_visit(&c, base, &rec(16 * H, 0), Some(&redirect), now).0,
            at(16 * H)
        );
        // not adaptive: always the configured interval
        let fixed = RecrawlConfig {
            adaptive: false,
            ..cfg()
        };
        assert_eq!(
            next_visit(&fixed, base, &rec(16 * H, 0), Some(&changed), now).0,
            at(8 * H)
        );
    }

    #[test]
    fn gone_after_n_404_or_410_in_a_row_leaves_the_schedule() {
        let c = cfg(); // gone_after 3
        let base = Some(8 * H);
        let nf = visit(404, VisitOutcome::Changed);
        let (n, g) = next_visit(&c, base, &rec(8 * H, 0), Some(&nf), 0);
        assert!(matches!(n, Next::At { .. }) && g == 1);
        let (n, g) = next_visit(
            &c,
            base,
            &rec(8 * H, 1),
            Some(&visit(410, VisitOutcome::Changed)),
            0,
        );
        assert!(matches!(n, Next::At { .. }) && g == 2);
        assert_eq!(
            next_visit(&c, base, &rec(8 * H, 2), Some(&nf), 0),
            (Next::Gone, 3)
        );
        // an answer in between resets the count
        let ok = visit(200, VisitOutcome::Changed);
        assert_eq!(next_visit(&c, base, &rec(8 * H, 2), Some(&ok), 0).1, 0);
        // a fetch without an answer neither counts nor resets
        assert_eq!(next_visit(&c, base, &rec(8 * H, 2), None, 0).1, 2);
        // 0: never gone
        let never = RecrawlConfig {
            gone_after: 0,
            ..cfg()
        };
        assert!(matches!(
            next_visit(&never, base, &rec(8 * H, 99), Some(&nf), 0).0,
            Next::At { .. }
        ));
    }

    #[test]
    fn interval_order_url_then_pattern_then_host_then_default() {
        let c = RecrawlConfig {
            default_interval_ms: Some(8 * H),
            hosts: vec![
                ("news.test".into(), Some(2 * H)),
                ("static.test".into(), None),
            ],
            patterns: vec![
                (UrlPattern::new("https://news.test/archive/"), Some(48 * H)),
                (UrlPattern::new("*.pdf"), None),
            ],
            min_interval_ms: H,
            ..RecrawlConfig::default()
        };
        let b = |url: &str, host: &str, own| base_interval(&c, url, host, own);
        assert_eq!(b("https://a.test/", "a.test", None), Some(8 * H));
        assert_eq!(b("https://news.test/", "news.test", None), Some(2 * H));
        assert_eq!(
            b("https://news.test/archive/1", "news.test", None),
            Some(48 * H)
        );
        assert_eq!(b("https://a.test/x.pdf", "a.test", None), None);
        assert_eq!(b("https://static.test/x", "static.test", None), None);
        assert_eq!(
            b("https://static.test/x", "static.test", Some(5 * H)),
            Some(5 * H)
        );
        assert_eq!(b("https://a.test/", "a.test", Some(0)), None);
        // below the minimum: raised to it
        assert_eq!(b("https://a.test/", "a.test", Some(1)), Some(H));
        assert!(c.schedules_any() && !RecrawlConfig::default().schedules_any());
        assert!(next_visit(&c, None, &rec(0, 0), None, 0).0 == Next::Unscheduled);
    }

    #[test]
    fn globs_match_the_whole_url_prefixes_the_start() {
        let m = |p: &str, u: &str| UrlPattern::new(p).matches(u);
        assert!(m("https://a.test/*/feed", "https://a.test/x/y/feed"));
        assert!(!m("https://a.test/*/feed", "https://a.test/x/feed/2"));
        assert!(m("*://*.test/*", "http://b.test/"));
        assert!(m("https://a.test/news", "https://a.test/news/1"));
        assert!(!m("https://a.test/news", "https://b.test/news"));
        assert!(m("*", ""));
        assert!(!m("a*b", "a"));
    }

    #[test]
    fn not_modified_keeps_the_last_validators_a_full_answer_replaces_them() {
        let old = Validators {
            etag: Some("\"v1\"".into()),
            last_modified: Some("Mon, 23 Nov 2026 10:00:00 GMT".into()),
            payload_digest: Some("sha1:AAAA".into()),
        };
        let mut nm = visit(304, VisitOutcome::NotModified);
        assert_eq!(merge_validators(&old, &nm), old);
        nm.validators.etag = Some("\"v2\"".into());
        assert_eq!(merge_validators(&old, &nm).etag.as_deref(), Some("\"v2\""));
        assert_eq!(
            merge_validators(&old, &nm).payload_digest,
            old.payload_digest
        );
        let full = visit(200, VisitOutcome::Changed);
        assert_eq!(merge_validators(&old, &full), Validators::default());
    }
}
