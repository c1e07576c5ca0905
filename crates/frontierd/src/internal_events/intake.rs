//! URLs coming in: offered to the frontier, rejected, and the spool directory's entries.

use std::path::Path;

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// URLs offered to the frontier (one batch): queued, or refused as already seen.
pub struct UrlsEnqueued {
    pub accepted: u64,
    pub duplicate: u64,
}

impl InternalEvent for UrlsEnqueued {
    fn emit(self, m: &Metrics) {
        tracing::trace!(
            accepted = self.accepted,
            duplicate = self.duplicate,
            "URLs offered"
        );
        m.urls_accepted.inc_by(self.accepted);
        m.urls_duplicate.inc_by(self.duplicate);
    }
}

/// A submitted line refused: by the canonicalizer (its [`frontier::Rejection`] code) or by
/// the list reader (`not-utf8`, `too-long`). The crawl log has the line.
pub struct UrlRejected<'a> {
    /// The line as echoed back.
    pub input: &'a str,
    /// The reason code (the `reason` label).
    pub code: &'static str,
}

impl InternalEvent for UrlRejected<'_> {
    fn emit(self, m: &Metrics) {
        tracing::debug!(input = %self.input, reason = self.code, "URL rejected");
        m.urls_rejected
            .get_or_create(&label("reason", self.code))
            .inc();
    }
}

/// What kind of spool entry is not a file of URLs (the spool's judgement).
pub use frontierd_spool::EntryKind as SpoolEntryKind;

/// What became of a spool entry: the `result` label of `spool_files`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolResult {
    /// Every line went in.
    Ok,
    /// Ingested, some lines rejected (listed in `spool/rejected/NAME`).
    WithRejects,
    /// Moved to `spool/rejected/` whole.
    Rejected(SpoolEntryKind),
}

impl SpoolResult {
    pub fn as_str(self) -> &'static str {
        match self {
            SpoolResult::Ok => "ok",
            SpoolResult::WithRejects => "with-rejects",
            SpoolResult::Rejected(kind) => match kind {
                SpoolEntryKind::Directory => "rejected-directory",
                SpoolEntryKind::Fifo => "rejected-fifo",
                SpoolEntryKind::Socket => "rejected-socket",
                SpoolEntryKind::Device => "rejected-device",
                SpoolEntryKind::Other => "rejected-other",
                SpoolEntryKind::DanglingLink => "rejected-dangling-link",
                SpoolEntryKind::LinkToNonFile => "rejected-link-to-non-file",
                SpoolEntryKind::Unreadable => "rejected-unreadable",
            },
        }
    }
}

/// A spool file was read to its end and moved to `spool/done/`.
pub struct SpoolFileIngested<'a> {
    pub file: &'a str,
    /// Where it linked to, when it was a symbolic link.
    pub link_to: Option<&'a Path>,
    pub lines: usize,
    pub accepted: u64,
    pub duplicate: u64,
    pub rejected: usize,
}

impl InternalEvent for SpoolFileIngested<'_> {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            file = %self.file,
            link_to = self.link_to.map(|l| l.display().to_string()),
            lines = self.lines,
            accepted = self.accepted,
            duplicate = self.duplicate,
            rejected = self.rejected,
            "spool file ingested"
        );
        let result = if self.rejected == 0 {
            SpoolResult::Ok
        } else {
            SpoolResult::WithRejects
        };
        m.spool_files
            .get_or_create(&label("result", result.as_str()))
            .inc();
    }
}

/// A spool entry was moved to `spool/rejected/` with a `.reason` file.
pub struct SpoolEntryRejected<'a> {
    pub file: &'a str,
    pub kind: SpoolEntryKind,
    pub reason: &'a str,
    pub moved_to: &'a Path,
}

impl InternalEvent for SpoolEntryRejected<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(
            file = %self.file, reason = self.reason, moved_to = %self.moved_to.display(),
            "spool entry rejected"
        );
        m.spool_files
            .get_or_create(&label("result", SpoolResult::Rejected(self.kind).as_str()))
            .inc();
    }
}

/// A `--seeds` line rejected: the first few each get a WARN line naming the file and the line
/// (the crawl log has them all; `UrlRejected` counts them).
pub struct SeedLineRejected<'a> {
    pub file: &'a std::path::Path,
    pub rejection: &'a crate::url_list::Rejection,
}

impl InternalEvent for SeedLineRejected<'_> {
    fn emit(self, _: &Metrics) {
        let r = self.rejection;
        tracing::warn!(
            file = %self.file.display(), line = r.line, reason = %r.reason, input = %r.input,
            "seed line rejected"
        );
    }
}

/// A `--seeds` file was submitted, with what became of its lines.
pub struct SeedsSubmitted<'a> {
    pub file: &'a std::path::Path,
    pub lines: u64,
    pub accepted: u64,
    pub duplicate: u64,
    pub rejected: usize,
}

impl InternalEvent for SeedsSubmitted<'_> {
    fn emit(self, _: &Metrics) {
        tracing::info!(
            file = %self.file.display(), lines = self.lines, accepted = self.accepted,
            duplicate = self.duplicate, rejected = self.rejected,
            "seeds submitted (rejected lines are in the crawl log)"
        );
    }
}

/// A round of the spool failed (the directory unreadable, the store refused a write): the
/// files stay in `spool/incoming` and the next round tries again.
pub struct SpoolRoundFailed<'a> {
    pub error: &'a anyhow::Error,
}

impl InternalEvent for SpoolRoundFailed<'_> {
    fn emit(self, _: &Metrics) {
        tracing::error!(error = format!("{:#}", self.error), "spool intake failed");
    }
}
