//! The crawl log file (one JSON line a record, docs/crawl-log.md), the last records kept
//! for `GET /v1/recent`, and the reopen after logrotate moved the file away.
//!
//! Lines are gathered in memory and written together by [`CrawlLog::flush`]: one system
//! call a batch instead of one a line, and no runtime thread waits on another's write.
//! The daemon flushes before each batch of completions is applied (a URL's line is in
//! the file before its outcome is stored), before drops are acknowledged, on a short
//! tick, at a reopen and at the stop.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use crawl::{LogLine, Outcome};
use frontierd_admin::answers::{RecentFetch, RECENT_FETCHES};

use crate::Episode;

/// Bytes of gathered lines past which [`CrawlLog::write`] asks for a flush at once, so
/// a burst (many URLs refused at submission) does not wait for the tick.
pub const FLUSH_AT_BYTES: usize = 64 * 1024;

/// The crawl log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("opening crawl log {}", path.display())]
pub struct OpenError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// The crawl log file, the lines not yet written to it, and its last records.
pub struct CrawlLog {
    /// Held while a batch is written, so batches reach the file in the order taken.
    file: Mutex<Sink>,
    /// Held only to add a line or take them all: writers never wait on the disk.
    gathered: Mutex<Gathered>,
    recent: Mutex<VecDeque<Recent>>,
    failing: Episode,
}

/// One of the last records, as kept (a [`RecentFetch`] when asked for).
struct Recent {
    at_ms: u64,
    url: String,
    outcome: Outcome,
    status: Option<u16>,
    bytes: u64,
    duration_ms: u64,
    reason: String,
}

/// The file and the buffer of the batch written last, emptied, for the next batch to
/// gather into: a batch costs no new allocation of its size.
struct Sink {
    file: File,
    spare: Vec<u8>,
}

/// A written batch's buffer is kept for the next one up to this capacity (a burst's is
/// let go).
const SPARE_KEEP_BYTES: usize = 4 * FLUSH_AT_BYTES;

/// Lines handed in since the last flush.
#[derive(Default)]
struct Gathered {
    bytes: Vec<u8>,
    outcomes: Vec<Outcome>,
    first_url: String,
}

/// What handing in one line did.
pub struct Written {
    /// The line (without its newline), for whoever else publishes it.
    pub json: String,
    /// Enough lines are gathered ([`FLUSH_AT_BYTES`]): flush now.
    pub flush_due: bool,
}

/// What one flush did with the lines gathered since the one before.
pub struct Flushed {
    /// Each line's outcome, in the order written.
    pub outcomes: Vec<Outcome>,
    /// The URL of the first line (named when they could not be written).
    pub first_url: String,
    /// `Ok(resumed)`: written, and whether that ended a failing episode; `Err`: not
    /// (all) written, and whether it is the first failure of its episode.
    pub result: Result<bool, (io::Error, bool)>,
}

/// What a reopen did with the old file.
pub struct Reopened {
    /// The old file could not be synced (its last lines may not be on disk).
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
    warc::rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms))
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CrawlLog {
    /// The crawl log at `path`, opened for appending.
    pub fn open(path: &Path) -> Result<CrawlLog, OpenError> {
        Ok(CrawlLog::new(open(path)?))
    }

    /// Lines go to `file`.
    pub fn new(file: File) -> CrawlLog {
        CrawlLog {
            file: Mutex::new(Sink {
                file,
                spare: Vec::new(),
            }),
            gathered: Mutex::default(),
            recent: Mutex::default(),
            failing: Episode::default(),
        }
    }

    /// Hand in one line stamped `at_ms` (Unix ms), keeping it among the last
    /// [`RECENT_FETCHES`] records. It reaches the file at the next [`CrawlLog::flush`].
    pub fn write(&self, line: &LogLine<'_>, at_ms: u64) -> Written {
        let json = line.to_json_line(&rfc3339_ms(at_ms));
        self.remember(line, at_ms);
        let mut g = relock(&self.gathered);
        if g.outcomes.is_empty() {
            g.first_url = line.url.to_owned();
        }
        g.bytes.extend_from_slice(json.as_bytes());
        g.bytes.push(b'\n');
        g.outcomes.push(line.outcome);
        let flush_due = g.bytes.len() >= FLUSH_AT_BYTES;
        Written { json, flush_due }
    }

    /// Write the lines gathered since the last flush, in one write; `None` if there were
    /// none. A batch that cannot be written whole leaves the file as it was, and is not
    /// tried again, so a full disk does not grow the daemon's memory.
    pub fn flush(&self) -> Option<Flushed> {
        let mut sink = relock(&self.file);
        let g = {
            let mut gathered = relock(&self.gathered);
            if gathered.outcomes.is_empty() {
                return None;
            }
            let next = Gathered {
                bytes: std::mem::take(&mut sink.spare),
                ..Gathered::default()
            };
            std::mem::replace(&mut *gathered, next)
        };
        let Gathered {
            mut bytes,
            outcomes,
            first_url,
        } = g;
        let file = &mut sink.file;
        // a write cut short (the disk filled) is undone, so that no half line is left for
        // the next batch to be appended to
        let len_before = file.metadata().map(|m| m.len()).ok();
        let result = match file.write_all(&bytes) {
            Ok(()) => Ok(self.failing.succeeded()),
            Err(e) => {
                if let Some(len) = len_before {
                    file.set_len(len).ok();
                }
                Err((e, self.failing.failed()))
            }
        };
        if bytes.capacity() <= SPARE_KEEP_BYTES {
            bytes.clear();
            sink.spare = bytes;
        }
        Some(Flushed {
            outcomes,
            first_url,
            result,
        })
    }

    fn remember(&self, line: &LogLine<'_>, at_ms: u64) {
        let mut recent = relock(&self.recent);
        // once the ring is full the oldest record's strings are written over: a line costs
        // no allocation here
        let (mut url, mut reason) = match recent.len() >= RECENT_FETCHES {
            true => recent
                .pop_front()
                .map_or_else(Default::default, |r| (r.url, r.reason)),
            false => Default::default(),
        };
        url.clear();
        url.push_str(line.url);
        reason.clear();
        reason.push_str(line.reason);
        recent.push_back(Recent {
            at_ms,
            url,
            outcome: line.outcome,
            status: line.status,
            bytes: line.bytes,
            duration_ms: line.duration_ms,
            reason,
        });
    }

    /// The last records, newest first.
    pub fn recent(&self) -> Vec<RecentFetch> {
        let recent = relock(&self.recent);
        recent
            .iter()
            .rev()
            .map(|r| RecentFetch {
                at: rfc3339_ms(r.at_ms),
                url: r.url.clone(),
                outcome: r.outcome.as_str().to_owned(),
                status: r.status,
                bytes: r.bytes,
                duration_ms: r.duration_ms,
                reason: r.reason.clone(),
            })
            .collect()
    }

    /// Continue in a new file at `path` (logrotate moved the old one away), the old one
    /// synced. Lines not yet flushed go to the new one: flush first to keep them in the
    /// old. If `path` cannot be opened, lines keep going to the old file.
    pub fn reopen(&self, path: &Path) -> Result<Reopened, OpenError> {
        let file = open(path)?;
        let old = std::mem::replace(&mut relock(&self.file).file, file);
        Ok(Reopened {
            old_not_finished: old.sync_all().err(),
        })
    }

    /// Sync the file (at the stop, after the last flush); errors are ignored, as nothing
    /// is left to do.
    pub fn sync(&self) {
        relock(&self.file).file.sync_all().ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawl::Found;

    fn line(url: &str) -> LogLine<'_> {
        LogLine::unfetched(url, Outcome::Rejected, "bad", Found::SUBMITTED)
    }

    #[test]
    fn lines_reach_the_file_at_the_flush_and_the_last_ones_are_kept_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/crawl.log");
        let log = CrawlLog::open(&path).unwrap();
        assert!(log.flush().is_none(), "nothing gathered");
        for i in 0..RECENT_FETCHES + 2 {
            let w = log.write(&line(&format!("http://a.test/{i}")), 1_714_564_800_000);
            assert!(!w.flush_due);
            assert!(w.json.contains("2024-05-01T12:00:00.000Z"), "{}", w.json);
        }
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "",
            "not before the flush"
        );
        // kept for the status page as soon as handed in
        let recent = log.recent();
        assert_eq!(recent.len(), RECENT_FETCHES);
        assert_eq!(
            recent[0].url,
            format!("http://a.test/{}", RECENT_FETCHES + 1)
        );
        assert_eq!(recent[0].at, "2024-05-01T12:00:00.000Z");
        assert_eq!(
            (recent[0].outcome.as_str(), recent[0].reason.as_str()),
            ("rejected", "bad")
        );
        // the oldest kept, its record written over an older one's
        assert_eq!(recent[RECENT_FETCHES - 1].url, "http://a.test/2");
        let flushed = log.flush().unwrap();
        assert!(matches!(flushed.result, Ok(false)));
        assert_eq!(flushed.outcomes.len(), RECENT_FETCHES + 2);
        assert_eq!(flushed.first_url, "http://a.test/0");
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), RECENT_FETCHES + 2);
        assert!(lines[0].contains("http://a.test/0") && lines[1].contains("http://a.test/1"));
        assert!(log.flush().is_none(), "each line written once");
        log.write(&line("http://a.test/next"), 0);
        assert_eq!(log.flush().unwrap().first_url, "http://a.test/next");
        assert_eq!(
            fs::read_to_string(&path).unwrap().lines().count(),
            RECENT_FETCHES + 3
        );
    }

    #[test]
    fn a_burst_asks_for_a_flush_once_enough_is_gathered() {
        let dir = tempfile::tempdir().unwrap();
        let log = CrawlLog::open(&dir.path().join("crawl.log")).unwrap();
        let long = format!("http://a.test/{}", "x".repeat(1000));
        let (mut lines, mut bytes) = (0, 0);
        loop {
            let w = log.write(&line(&long), 0);
            lines += 1;
            bytes += w.json.len() + 1;
            if w.flush_due {
                // due at the first line that takes the gathered bytes past the mark
                assert!(bytes >= FLUSH_AT_BYTES && bytes - w.json.len() - 1 < FLUSH_AT_BYTES);
                break;
            }
            assert!(bytes < FLUSH_AT_BYTES, "not due at {bytes} bytes");
        }
        assert_eq!(log.flush().unwrap().outcomes.len(), lines);
        assert!(
            !log.write(&line(&long), 0).flush_due,
            "counted again from the flush"
        );
    }

    #[test]
    fn lines_handed_in_while_others_flush_are_written_once_each_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crawl.log");
        let log = CrawlLog::open(&path).unwrap();
        let (writers, per_writer) = (4, 2_000);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let flusher = s.spawn(|| {
                let mut written = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    written += log.flush().map_or(0, |f| f.outcomes.len());
                }
                written
            });
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let log = &log;
                    s.spawn(move || {
                        for i in 0..per_writer {
                            if log
                                .write(&line(&format!("http://w{w}.test/{i}")), 0)
                                .flush_due
                            {
                                log.flush();
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            flusher.join().unwrap();
        });
        log.flush();
        let text = fs::read_to_string(&path).unwrap();
        let mut next = vec![0; writers];
        for l in text.lines() {
            let url = l.split("\"url\":\"http://w").nth(1).unwrap();
            let (w, i) = url.split_once(".test/").unwrap();
            let w: usize = w.parse().unwrap();
            let i: usize = i[..i.find('"').unwrap()].parse().unwrap();
            assert_eq!(i, next[w], "writer {w}: each line once, in order");
            next[w] += 1;
        }
        assert_eq!(next, vec![per_writer; writers]);
    }

    #[test]
    fn a_failing_episode_is_reported_once_and_its_end_once() {
        let log = CrawlLog::new(File::options().write(true).open("/dev/full").unwrap());
        log.write(&line("http://a.test/1"), 0);
        log.write(&line("http://a.test/2"), 0);
        let first = log.flush().unwrap();
        assert_eq!(first.outcomes.len(), 2);
        assert_eq!(first.first_url, "http://a.test/1");
        assert!(first.result.unwrap_err().1, "first of its episode");
        log.write(&line("http://a.test/3"), 0);
        assert!(!log.flush().unwrap().result.unwrap_err().1);
        assert!(log.flush().is_none(), "lost lines are not tried again");
        assert_eq!(log.recent().len(), 3, "kept even when not written");
        let dir = tempfile::tempdir().unwrap();
        log.reopen(&dir.path().join("crawl.log")).unwrap();
        log.write(&line("http://a.test/4"), 0);
        assert!(matches!(log.flush().unwrap().result, Ok(true)));
        log.write(&line("http://a.test/5"), 0);
        assert!(matches!(log.flush().unwrap().result, Ok(false)));
    }

    #[test]
    fn a_reopen_moves_later_lines_to_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crawl.log");
        let log = CrawlLog::open(&path).unwrap();
        log.write(&line("http://a.test/old"), 0);
        log.flush();
        fs::rename(&path, dir.path().join("crawl.log.1")).unwrap();
        assert!(log.reopen(&path).unwrap().old_not_finished.is_none());
        log.write(&line("http://a.test/new"), 0);
        log.flush();
        log.sync();
        let old = fs::read_to_string(dir.path().join("crawl.log.1")).unwrap();
        let new = fs::read_to_string(&path).unwrap();
        assert!(old.contains("/old") && !old.contains("/new"));
        assert!(new.contains("/new") && !new.contains("/old"));
        // a path under a file: not reopened, lines keep going to the current file
        let err = log.reopen(&path.join("x")).err().unwrap();
        assert!(err.to_string().starts_with("opening crawl log "), "{err}");
        log.write(&line("http://a.test/still"), 0);
        log.flush();
        assert!(fs::read_to_string(&path).unwrap().contains("/still"));
    }
}
