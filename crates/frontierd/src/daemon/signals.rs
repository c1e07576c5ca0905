//! Signals of `frontierd run`: SIGTERM and SIGINT stop the daemon, SIGHUP reopens the crawl
//! log. logrotate moves the log away, then sends SIGHUP: later lines go to a new file at
//! the configured path, and the moved file is complete (flushed and synced) once the
//! reopen has been logged.

use std::fs;
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
    Ok(frontierd_outputs::crawl_log::open(path)?)
}

impl Shared {
    /// SIGHUP: finish the current crawl log file and continue in a new one at the
    /// configured path. If the path cannot be opened, lines keep going to the old file.
    pub fn reopen_crawl_log(&self) {
        let path = &self.settings.crawl_log;
        // the lines handed in so far belong to the old file
        self.flush_crawl_log();
        match self.crawl_log.reopen(path) {
            Err(e) => {
                let error = anyhow::Error::from(e);
                CrawlLogReopenFailed::NotReopened { error: &error }.emit(&self.metrics);
                return;
            }
            Ok(reopened) => {
                if let Some(e) = &reopened.old_not_finished {
                    CrawlLogReopenFailed::OldNotFinished { error: e }.emit(&self.metrics);
                }
            }
        }
        CrawlLogReopened { path }.emit(&self.metrics);
    }
}
