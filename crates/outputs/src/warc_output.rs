//! WARC appends: an exchange encoded (compressed, digested) on the caller's thread, only
//! the append under the writer's lock, and where its response record went.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use crawl::Archived;
use warc::{Exchange, Revisit, WarcError, WarcWriter};

use crate::Episode;

/// The daemon's WARC writer (none once closed), shared by the workers.
pub struct WarcOutput {
    writer: Mutex<Option<WarcWriter>>,
    /// The writer's `gzip_level`, for encoding outside its lock.
    gzip_level: u32,
    failing: Episode,
}

/// An exchange appended.
#[derive(Debug)]
pub struct Appended {
    /// Where its response record went, for the crawl log.
    pub archived: Archived,
    /// Compressed bytes written.
    pub bytes: u64,
    /// This append ended a failing episode.
    pub resumed: bool,
}

/// An exchange not appended (the file is cut back to its last whole exchange).
#[derive(Debug)]
pub struct AppendFailed {
    pub error: WarcError,
    /// The first failure of its episode.
    pub first_in_episode: bool,
}

impl WarcOutput {
    /// Appends go to `writer`, encoded at `gzip_level` (the writer's own).
    pub fn new(writer: Option<WarcWriter>, gzip_level: u32) -> WarcOutput {
        WarcOutput {
            writer: Mutex::new(writer),
            gzip_level,
            failing: Episode::default(),
        }
    }

    /// The writer, for the free-space watch's and the stop's own uses.
    pub fn lock(&self) -> MutexGuard<'_, Option<WarcWriter>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Archive one exchange, its answer as a `revisit` record when `revisit` is given
    /// (else as a full response). `Ok(None)`: no writer.
    pub fn append(
        &self,
        ex: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> Result<Option<Appended>, AppendFailed> {
        // compress and digest on the caller's thread; the lock covers only the append, so
        // workers on both cores are not queued behind one another's deflate
        let encoded = match revisit {
            None => WarcWriter::encode_exchange(ex, self.gzip_level),
            Some(r) => WarcWriter::encode_revisit(ex, r, self.gzip_level),
        };
        let written = encoded.and_then(|encoded| match self.lock().as_mut() {
            Some(w) => w.append_exchange(encoded).map(Some),
            None => Ok(None),
        });
        match written {
            Ok(None) => Ok(None),
            Ok(Some(written)) => Ok(Some(Appended {
                resumed: self.failing.succeeded(),
                bytes: written.bytes,
                archived: Archived {
                    file: file_name(written.file),
                    offset: written.response_offset,
                    payload_digest: written.payload_digest,
                },
            })),
            Err(error) => Err(AppendFailed {
                error,
                first_in_episode: self.failing.failed(),
            }),
        }
    }
}

fn file_name(file: PathBuf) -> String {
    file.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn exchange(body: &[u8]) -> Exchange<'_> {
        Exchange {
            target_uri: "http://a.test/",
            ip: None,
            date: UNIX_EPOCH + Duration::from_secs(1_714_564_800),
            request_head: b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
            response_head: b"HTTP/1.1 200 OK\r\n\r\n",
            response_body: body,
            truncated: None,
            payload_digest: None,
        }
    }

    #[test]
    fn an_exchange_is_appended_with_where_its_response_went() {
        let dir = tempfile::tempdir().unwrap();
        let writer = WarcWriter::new(warc::WarcConfig::new(dir.path())).unwrap();
        let out = WarcOutput::new(Some(writer), 1);
        let first = out.append(&exchange(b"hello"), None).unwrap().unwrap();
        assert!(first.archived.file.ends_with(".warc.gz"), "{first:?}");
        assert!(!first.resumed);
        assert!(first.bytes > 0);
        assert_eq!(
            first.archived.payload_digest,
            warc::payload_digest(b"hello")
        );
        let second = out.append(&exchange(b"again"), None).unwrap().unwrap();
        assert_eq!(second.archived.file, first.archived.file);
        assert!(second.archived.offset > first.archived.offset);
    }

    #[test]
    fn without_a_writer_nothing_is_appended() {
        let out = WarcOutput::new(None, 1);
        assert!(out.append(&exchange(b"x"), None).unwrap().is_none());
    }
}
