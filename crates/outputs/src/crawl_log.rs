//! The crawl log file (one JSON line a record, docs/crawl-log.md), the last records kept
//! for `GET /v1/recent`, and the reopen after logrotate moved the file away.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, LineWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use crawl::LogLine;
use frontierd_admin::answers::{RecentFetch, RECENT_FETCHES};

use crate::Episode;

/// The crawl log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("opening crawl log {}", path.display())]
pub struct OpenError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// The crawl log file, line-buffered, with its last records.
pub struct CrawlLog {
    file: Mutex<LineWriter<File>>,
    recent: Mutex<VecDeque<RecentFetch>>,
    failing: Episode,
}

/// What writing one line did.
pub struct Written {
    /// The line (without its newline), for whoever else publishes it.
    pub json: String,
    /// `Ok(resumed)`: written, and whether that ended a failing episode; `Err`: not
    /// written, and whether it is the first failure of its episode.
    pub result: Result<bool, (io::Error, bool)>,
}

/// What a reopen did with the old file.
pub struct Reopened {
    /// The old file could not be flushed or synced (its lines may be incomplete).
    pub old_not_finished: Option<io::Error>,
}

/// Open the crawl log for appending (created if missing, its directory too).
pub fn open(path: &Path) -> Result<File, OpenError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).ok();
    }
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| OpenError {
            path: path.to_path_buf(),
            source,
        })
}

fn rfc3339_ms(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

impl CrawlLog {
    /// The crawl log at `path`, opened for appending.
    pub fn open(path: &Path) -> Result<CrawlLog, OpenError> {
        Ok(CrawlLog::new(open(path)?))
    }

    /// Lines go to `file`.
    pub fn new(file: File) -> CrawlLog {
        CrawlLog {
            file: Mutex::new(LineWriter::new(file)),
            recent: Mutex::default(),
            failing: Episode::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LineWriter<File>> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one line stamped `at_ms` (Unix ms), keeping it among the last
    /// [`RECENT_FETCHES`] records.
    pub fn write(&self, line: &LogLine<'_>, at_ms: u64) -> Written {
        let at = rfc3339_ms(at_ms);
        let json = line.to_json_line(&at);
        self.remember(line, at);
        let result = match writeln!(self.lock(), "{json}") {
            Ok(()) => Ok(self.failing.succeeded()),
            Err(e) => Err((e, self.failing.failed())),
        };
        Written { json, result }
    }

    fn remember(&self, line: &LogLine<'_>, at: String) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() >= RECENT_FETCHES {
            recent.pop_front();
        }
        recent.push_back(RecentFetch {
            at,
            url: line.url.to_string(),
            outcome: line.outcome.as_str().to_string(),
            status: line.status,
            bytes: line.bytes,
            duration_ms: line.duration_ms,
            reason: line.reason.to_string(),
        });
    }

    /// The last records, newest first.
    pub fn recent(&self) -> Vec<RecentFetch> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.iter().rev().cloned().collect()
    }

    /// Finish the current file and continue in a new one at `path` (logrotate moved the
    /// old one away). If `path` cannot be opened, lines keep going to the old file.
    pub fn reopen(&self, path: &Path) -> Result<Reopened, OpenError> {
        let file = open(path)?;
        let old = std::mem::replace(&mut *self.lock(), LineWriter::new(file));
        let finished = old.into_inner().map_err(|e| e.into_error()).and_then(|f| {
            f.sync_all()?;
            Ok(f)
        });
        Ok(Reopened {
            old_not_finished: finished.err(),
        })
    }

    /// Flush and sync the file (at the stop); errors are ignored, as nothing is left to do.
    pub fn sync(&self) {
        let mut log = self.lock();
        log.flush().ok();
        log.get_ref().sync_all().ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawl::{Found, Outcome};

    fn line(url: &str) -> LogLine<'_> {
        LogLine::unfetched(url, Outcome::Rejected, "bad", Found::SUBMITTED)
    }

    #[test]
    fn lines_are_appended_and_the_last_ones_kept_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/crawl.log");
        let log = CrawlLog::open(&path).unwrap();
        for i in 0..RECENT_FETCHES + 2 {
            let w = log.write(&line(&format!("http://a.test/{i}")), 1_714_564_800_000);
            assert!(matches!(w.result, Ok(false)));
            assert!(w.json.contains("2024-05-01T12:00:00.000Z"), "{}", w.json);
        }
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), RECENT_FETCHES + 2);
        let recent = log.recent();
        assert_eq!(recent.len(), RECENT_FETCHES);
        assert_eq!(
            recent[0].url,
            format!("http://a.test/{}", RECENT_FETCHES + 1)
        );
        assert_eq!(recent[0].at, "2024-05-01T12:00:00.000Z");
    }

    #[test]
    fn a_failing_episode_is_reported_once_and_its_end_once() {
        let log = CrawlLog::new(File::options().write(true).open("/dev/full").unwrap());
        let first = log.write(&line("http://a.test/1"), 0).result.unwrap_err();
        assert!(first.1, "first of its episode");
        let second = log.write(&line("http://a.test/2"), 0).result.unwrap_err();
        assert!(!second.1);
        assert_eq!(log.recent().len(), 2, "kept even when not written");
        let dir = tempfile::tempdir().unwrap();
        log.reopen(&dir.path().join("crawl.log")).unwrap();
        assert!(matches!(
            log.write(&line("http://a.test/3"), 0).result,
            Ok(true)
        ));
        assert!(matches!(
            log.write(&line("http://a.test/4"), 0).result,
            Ok(false)
        ));
    }

    #[test]
    fn a_reopen_moves_later_lines_to_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crawl.log");
        let log = CrawlLog::open(&path).unwrap();
        log.write(&line("http://a.test/old"), 0);
        fs::rename(&path, dir.path().join("crawl.log.1")).unwrap();
        assert!(log.reopen(&path).unwrap().old_not_finished.is_none());
        log.write(&line("http://a.test/new"), 0);
        log.sync();
        let old = fs::read_to_string(dir.path().join("crawl.log.1")).unwrap();
        let new = fs::read_to_string(&path).unwrap();
        assert!(old.contains("/old") && !old.contains("/new"));
        assert!(new.contains("/new") && !new.contains("/old"));
        // a path under a file: not reopened, lines keep going to the current file
        let err = log.reopen(&path.join("x")).err().unwrap();
        assert!(err.to_string().starts_with("opening crawl log "), "{err}");
        log.write(&line("http://a.test/still"), 0);
        log.sync();
        assert!(fs::read_to_string(&path).unwrap().contains("/still"));
    }
}
