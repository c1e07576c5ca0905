//! URL lists into the frontier: `POST /v1/urls` batches, `run --seeds`, and the spool
//! directory (`spool/incoming` -> `done` or `rejected`: the protocol is `frontierd_spool`'s).
//! The list format is url_list.rs's.
//! See docs/operations.md ("Feed seeds").

use std::ffi::OsStr;
use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{Context, Result};
use frontierd_spool::{Entry, Opened, RejectedLine, Spool};

use crate::daemon::offer::Offer;
use crate::daemon::shared::Shared;
use crate::internal_events::intake::{
    SeedLineRejected, SeedsSubmitted, SpoolEntryKind, SpoolEntryRejected, SpoolFileIngested,
    SpoolRoundFailed,
};
use crate::internal_events::InternalEvent;
use crate::url_list::{read_batch, Batch, LineReader};

/// Rejected `--seeds` lines logged one by one (WARN), at most; the crawl log has them all.
const SEED_REJECTS_LOGGED: usize = 20;

pub use frontierd_admin::Tally;

/// Offer a batch of seeds (depth 0) to the frontier, durably. Every rejected line, refused
/// here or by the frontier, is counted and written to the crawl log.
pub async fn submit_batch(sh: &Arc<Shared>, batch: Batch) -> Result<Tally> {
    let (lines, items) = batch
        .urls
        .iter()
        .enumerate()
        .map(|(i, (line, u))| {
            let r = batch.recrawl.get(&i).copied().unwrap_or_default();
            let item = frontier::EnqueueItem {
                revisit_interval_ms: r.revisit_interval_ms,
                refetch_at_ms: r.refetch_at_ms,
                kind: batch.kinds.get(&i).copied().unwrap_or_default(),
                ..frontier::EnqueueItem::seed(u.clone())
            };
            (*line, item)
        })
        .unzip();
    let offered = sh
        .offer(Offer {
            items,
            lines,
            refused: batch.rejected,
            log_rejects: true,
            again: false,
        })
        .await?;
    Ok(Tally {
        accepted: offered.accepted,
        duplicate: offered.duplicate,
        rejected: offered.rejected,
    })
}

/// `run --seeds FILE`: read and submit it in batches; rejected lines are logged by number.
pub async fn submit_seed_file(sh: &Arc<Shared>, path: &Path) -> Result<()> {
    let file = fs::File::open(path).with_context(|| format!("opening seeds {}", path.display()))?;
    let mut reader = LineReader::new(BufReader::new(file));
    let chunk = sh.settings.raw.intake.batch_size as usize;
    let (mut accepted, mut duplicate, mut rejected) = (0u64, 0u64, 0usize);
    while let Some(batch) = read_batch(&mut reader, chunk)
        .with_context(|| format!("reading seeds {}", path.display()))?
    {
        let t = submit_batch(sh, batch).await?;
        for r in &t.rejected {
            if rejected < SEED_REJECTS_LOGGED {
                SeedLineRejected {
                    file: path,
                    rejection: r,
                }
                .emit(&sh.metrics);
            }
            rejected += 1;
        }
        accepted += t.accepted;
        duplicate += t.duplicate;
    }
    SeedsSubmitted {
        file: path,
        lines: reader.lines_read() as u64,
        accepted,
        duplicate,
        rejected,
    }
    .emit(&sh.metrics);
    Ok(())
}

// ------------------------------------------------------------------------- spool

/// Poll `spool/incoming`: ingest each file durably, then move it to `spool/done`.
pub async fn spool_loop(sh: Arc<Shared>) {
    let every = sh.settings.raw.intake.poll_interval.0;
    loop {
        // while free space is low the files stay in spool/incoming, taken once it is back
        if sh.disk.refusal().is_some() {
            tokio::select! {
                _ = tokio::time::sleep(every) => continue,
                _ = sh.shutdown.notified() => return,
            }
        }
        if let Err(e) = spool_once(&sh).await {
            SpoolRoundFailed { error: &e }.emit(&sh.metrics);
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = sh.shutdown.notified() => return,
        }
    }
}

/// One round over `spool/incoming`, in the spool's order, until the daemon stops.
async fn spool_once(sh: &Arc<Shared>) -> Result<()> {
    let spool = Spool::new(&sh.settings.spool_dir);
    for name in spool.waiting()? {
        if sh.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        match spool.entry(&name)? {
            Some(Entry::File { link }) => ingest_file(sh, &spool, &name, link).await?,
            Some(Entry::Reject { kind, reason }) => reject_entry(sh, &spool, &name, kind, &reason)?,
            // gone since the listing
            None => {}
        }
    }
    Ok(())
}

/// Move an entry that is not a file of URLs to `spool/rejected/` (the spool's protocol);
/// log and count it.
fn reject_entry(
    sh: &Shared,
    spool: &Spool,
    name: &OsStr,
    kind: SpoolEntryKind,
    reason: &str,
) -> Result<()> {
    let moved_to = spool.reject(name, reason)?;
    SpoolEntryRejected {
        file: &name.to_string_lossy(),
        kind,
        reason,
        moved_to: &moved_to,
    }
    .emit(&sh.metrics);
    Ok(())
}

async fn ingest_file(
    sh: &Arc<Shared>,
    spool: &Spool,
    name: &OsStr,
    link: Option<PathBuf>,
) -> Result<()> {
    let file = match spool.open(name) {
        Opened::File(f) => f,
        Opened::Gone => return Ok(()),
        Opened::Unreadable(reason) => {
            return reject_entry(sh, spool, name, SpoolEntryKind::Unreadable, &reason);
        }
    };
    let chunk = sh.settings.raw.intake.batch_size as usize;
    let mut reader = LineReader::new(BufReader::new(file));
    let mut tally = Tally::default();
    loop {
        let batch = match read_batch(&mut reader, chunk) {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                // lines before it are queued; a re-read would only find duplicates
                let reason = format!("read error after line {}: {e}", reader.lines_read());
                return reject_entry(sh, spool, name, SpoolEntryKind::Unreadable, &reason);
            }
        };
        tally.add(submit_batch(sh, batch).await?);
    }
    let rejected = tally.rejected.iter().map(|r| RejectedLine {
        line: r.line,
        reason: &r.reason,
        input: &r.input,
    });
    spool.done(name, rejected)?;
    SpoolFileIngested {
        file: &name.to_string_lossy(),
        link_to: link.as_deref(),
        lines: reader.lines_read(),
        accepted: tally.accepted,
        duplicate: tally.duplicate,
        rejected: tally.rejected.len(),
    }
    .emit(&sh.metrics);
    Ok(())
}
