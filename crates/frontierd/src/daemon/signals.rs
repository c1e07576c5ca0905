//! Signals of `frontierd run`: SIGTERM and SIGINT stop the daemon, SIGHUP reopens the crawl
//! log. logrotate moves the log away, then sends SIGHUP: later lines go to a new file at
//! the configured path, and the moved file is complete (flushed and synced) once the
//! reopen has been logged.

use std::fs;
use std::io::LineWriter;
use std::path::Path;

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::daemon::shared::Shared;
use crate::internal_events::output::{CrawlLogReopenFailed, CrawlLogReopened, StopSignal};
use crate::internal_events::InternalEvent;

/// Handlers installed at start, before the store is opened: from then on SIGHUP no longer
/// has its default action (ending the process).
pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    pub fn install() -> Result<Signals> {
        let install = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("installing the {name} handler"))
        };
        Ok(Signals {
            term: install(SignalKind::terminate(), "SIGTERM")?,
            int: install(SignalKind::interrupt(), "SIGINT")?,
            hup: install(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// Serve SIGHUPs until SIGTERM or SIGINT arrives.
    pub async fn wait_for_stop(&mut self, sh: &Shared) {
        loop {
            tokio::select! {
                _ = self.term.recv() => {
                    StopSignal { name: "SIGTERM" }.emit(&sh.metrics);
                    return;
                }
                _ = self.int.recv() => {
                    StopSignal { name: "SIGINT" }.emit(&sh.metrics);
                    return;
                }
                _ = self.hup.recv() => sh.reopen_crawl_log(),
            }
        }
    }
}

/// The crawl log, opened for appending (created if missing).
pub fn open_crawl_log(path: &Path) -> Result<fs::File> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).ok();
    }
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening crawl log {}", path.display()))
}

impl Shared {
    /// SIGHUP: finish the current crawl log file and continue in a new one at the
    /// configured path. If the path cannot be opened, lines keep going to the old file.
    pub fn reopen_crawl_log(&self) {
        let path = &self.settings.crawl_log;
        let file = match open_crawl_log(path) {
            Ok(f) => f,
            Err(e) => {
                CrawlLogReopenFailed::NotReopened { error: &e }.emit(&self.metrics);
                return;
            }
        };
        let mut log = self.crawl_log.lock().unwrap_or_else(|e| e.into_inner());
        let old = std::mem::replace(&mut *log, LineWriter::new(file));
        drop(log);
        let finished = old.into_inner().map_err(|e| e.into_error()).and_then(|f| {
            f.sync_all()?;
            Ok(f)
        });
        if let Err(e) = finished {
            CrawlLogReopenFailed::OldNotFinished { error: &e }.emit(&self.metrics);
        }
        CrawlLogReopened { path }.emit(&self.metrics);
    }
}
