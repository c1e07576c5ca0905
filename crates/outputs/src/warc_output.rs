//! WARC appends: an exchange encoded (compressed, digested) on the caller's thread, only
//! the append under the writer's lock, and where its response record went. An async
//! appender that finds the writer busy hands its exchange to the holder, which appends it
//! before letting go: a worker's runtime thread never sleeps on the lock (nor waits there
//! for a slow disk), and the other thread's tasks run meanwhile.

use std::io;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, TryLockError};

use crawl::Archived;
use tokio::sync::oneshot;
use warc::{Deflate, EncodedExchange, Exchange, Revisit, WarcError, WarcWriter, WrittenExchange};

use crate::Episode;

/// What appending one exchange came to: `None` when there is no writer.
type Written = Result<Option<WrittenExchange>, WarcError>;

/// An exchange handed to the writer's holder, and where its outcome goes.
struct Handed {
    encoded: EncodedExchange,
    reply: oneshot::Sender<Written>,
}

/// The daemon's WARC writer (none once closed), shared by the workers.
pub struct WarcOutput {
    writer: Mutex<Option<WarcWriter>>,
    /// Exchanges handed over while the writer was held: its holder appends them before it
    /// lets go (`WriterGuard`'s drop).
    handed: Mutex<Vec<Handed>>,
    /// How the writer deflates (its own settings), for encoding outside its lock.
    deflate: Deflate,
    failing: Episode,
}

/// The writer, held; on drop it appends what was handed over meanwhile, then lets go.
pub struct WriterGuard<'a> {
    out: &'a WarcOutput,
    held: Option<MutexGuard<'a, Option<WarcWriter>>>,
}

impl Deref for WriterGuard<'_> {
    type Target = Option<WarcWriter>;
    fn deref(&self) -> &Option<WarcWriter> {
        // (`held` is taken only in drop)
        self.held.as_deref().expect("held until drop")
    }
}

impl DerefMut for WriterGuard<'_> {
    fn deref_mut(&mut self) -> &mut Option<WarcWriter> {
        self.held.as_deref_mut().expect("held until drop")
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            self.out.let_go(held);
        }
    }
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
    /// Appends go to `writer`, encoded as `deflate` says (the writer's own settings).
    pub fn new(writer: Option<WarcWriter>, deflate: Deflate) -> WarcOutput {
        WarcOutput {
            writer: Mutex::new(writer),
            handed: Mutex::new(Vec::new()),
            deflate,
            failing: Episode::default(),
        }
    }

    /// The writer, for the free-space watch's and the stop's own uses.
    pub fn lock(&self) -> WriterGuard<'_> {
        WriterGuard {
            out: self,
            held: Some(self.lock_writer()),
        }
    }

    fn lock_writer(&self) -> MutexGuard<'_, Option<WarcWriter>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer if nobody holds it.
    fn try_lock_writer(&self) -> Option<MutexGuard<'_, Option<WarcWriter>>> {
        match self.writer.try_lock() {
            Ok(held) => Some(held),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn try_lock(&self) -> Option<WriterGuard<'_>> {
        self.try_lock_writer().map(|held| WriterGuard {
            out: self,
            held: Some(held),
        })
    }

    fn handed(&self) -> MutexGuard<'_, Vec<Handed>> {
        self.handed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append what was handed over, let go, and look again: an exchange handed over after
    /// the last look but before the release finds nobody holding the writer to see it.
    fn let_go<'a>(&'a self, mut held: MutexGuard<'a, Option<WarcWriter>>) {
        loop {
            loop {
                let handed = std::mem::take(&mut *self.handed());
                if handed.is_empty() {
                    break;
                }
                for h in handed {
                    let _ = h.reply.send(append_to(&mut held, h.encoded));
                }
            }
            drop(held);
            if self.handed().is_empty() {
                return;
            }
            // held again by someone else: its holder appends them
            let Some(again) = self.try_lock_writer() else {
                return;
            };
            held = again;
        }
    }

    fn encode(
        &self,
        ex: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> Result<EncodedExchange, WarcError> {
        match revisit {
            None => WarcWriter::encode_exchange(ex, self.deflate),
            Some(r) => WarcWriter::encode_revisit(ex, r, self.deflate),
        }
    }

    /// Archive one exchange, its answer as a `revisit` record when `revisit` is given
    /// (else as a full response), waiting for the writer if it is held. `Ok(None)`: no
    /// writer.
    pub fn append(
        &self,
        ex: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> Result<Option<Appended>, AppendFailed> {
        // compress and digest on the caller's thread; the lock covers only the append, so
        // workers on both cores are not queued behind one another's deflate
        let written = self
            .encode(ex, revisit)
            .and_then(|encoded| append_to(&mut self.lock(), encoded));
        self.outcome(written)
    }

    /// [`WarcOutput::append`] for async callers: when the writer is held, the exchange is
    /// handed to its holder and this waits for its outcome without blocking the thread.
    pub async fn append_async(
        &self,
        ex: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> Result<Option<Appended>, AppendFailed> {
        let encoded = match self.encode(ex, revisit) {
            Ok(encoded) => encoded,
            Err(e) => return self.outcome(Err(e)),
        };
        if let Some(mut held) = self.try_lock() {
            let written = append_to(&mut held, encoded);
            return self.outcome(written);
        }
        let (reply, outcome) = oneshot::channel();
        self.handed().push(Handed { encoded, reply });
        // the holder may have let go before the push: take the writer then (appending
        // everything handed over, this one too)
        drop(self.try_lock());
        let written = outcome.await.unwrap_or_else(|_| {
            Err(WarcError::Io {
                action: "handing an exchange to the WARC writer's holder",
                path: PathBuf::new(),
                source: io::Error::other("the holder stopped before appending it"),
            })
        });
        self.outcome(written)
    }

    fn outcome(&self, written: Written) -> Result<Option<Appended>, AppendFailed> {
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

fn append_to(writer: &mut Option<WarcWriter>, encoded: EncodedExchange) -> Written {
    match writer.as_mut() {
        Some(w) => w.append_exchange(encoded).map(Some),
        None => Ok(None),
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
        let out = WarcOutput::new(Some(writer), Deflate::default());
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

    /// An exchange handed over while the writer is held is appended when its holder lets
    /// go, after what the holder appended, and its caller learns where it went.
    #[tokio::test(flavor = "current_thread")]
    async fn an_exchange_handed_over_is_appended_when_the_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let writer = WarcWriter::new(warc::WarcConfig::new(dir.path())).unwrap();
        let out = WarcOutput::new(Some(writer), Deflate::default());
        let held = out.lock();
        let handed = exchange(b"handed over");
        let appending = out.append_async(&handed, None);
        tokio::pin!(appending);
        let first_poll = tokio::time::timeout(Duration::ZERO, &mut appending).await;
        assert!(first_poll.is_err(), "it waits while the writer is held");
        // the holder appends its own exchange, then lets go
        let mut held = held;
        let own =
            WarcWriter::encode_exchange(&exchange(b"the holder's"), Deflate::default()).unwrap();
        let own = held.as_mut().unwrap().append_exchange(own).unwrap();
        drop(held);
        let appended = tokio::time::timeout(Duration::from_secs(10), appending)
            .await
            .expect("appended once the holder let go")
            .unwrap()
            .unwrap();
        assert!(appended.archived.offset > own.response_offset);
        assert_eq!(
            appended.archived.payload_digest,
            warc::payload_digest(b"handed over")
        );
        // and it is in the file: the next append goes after it
        let next = out.append(&exchange(b"next"), None).unwrap().unwrap();
        assert!(next.archived.offset > appended.archived.offset);
    }

    #[test]
    fn without_a_writer_nothing_is_appended() {
        let out = WarcOutput::new(None, Deflate::default());
        assert!(out.append(&exchange(b"x"), None).unwrap().is_none());
    }
}
