//! URL lists into the frontier: `POST /v1/urls` batches, `run --seeds`, and the spool
//! directory (`spool/incoming` -> `done` or `rejected`). The list format is url_list.rs's.
//! See docs/operations.md ("Feed seeds").

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{Context, Result};

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

/// What a name in `spool/incoming` is, judged without opening it (a FIFO would block).
#[derive(Debug, PartialEq)]
enum SpoolEntry {
    /// A regular file, or a symbolic link to one (`link` is its target).
    File { link: Option<PathBuf> },
    /// Anything else: moved to `spool/rejected/` with this reason.
    Reject {
        kind: SpoolEntryKind,
        reason: String,
    },
}

fn kind_of(ft: fs::FileType) -> (SpoolEntryKind, &'static str) {
    if ft.is_dir() {
        (SpoolEntryKind::Directory, "a directory")
    } else if ft.is_fifo() {
        (SpoolEntryKind::Fifo, "a FIFO (named pipe)")
    } else if ft.is_socket() {
        (SpoolEntryKind::Socket, "a socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        (SpoolEntryKind::Device, "a device")
    } else {
        (SpoolEntryKind::Other, "not a regular file")
    }
}

fn spool_entry(path: &Path) -> io::Result<SpoolEntry> {
    let ft = fs::symlink_metadata(path)?.file_type();
    if ft.is_file() {
        return Ok(SpoolEntry::File { link: None });
    }
    if !ft.is_symlink() {
        let (kind, what) = kind_of(ft);
        return Ok(SpoolEntry::Reject {
            kind,
            reason: format!("{what}, not a file of URLs"),
        });
    }
    let target = fs::read_link(path)?;
    Ok(match fs::metadata(path) {
        Ok(m) if m.is_file() => SpoolEntry::File { link: Some(target) },
        Ok(m) => SpoolEntry::Reject {
            kind: SpoolEntryKind::LinkToNonFile,
            reason: format!(
                "symbolic link to {}, which is {}, not a file of URLs",
                target.display(),
                kind_of(m.file_type()).1
            ),
        },
        Err(e) => SpoolEntry::Reject {
            kind: SpoolEntryKind::DanglingLink,
            reason: format!(
                "symbolic link to {}, which cannot be read: {e}",
                target.display()
            ),
        },
    })
}

async fn spool_once(sh: &Arc<Shared>) -> Result<()> {
    let spool = sh.settings.spool_dir.clone();
    let incoming = spool.join("incoming");
    let mut names: Vec<OsString> = Vec::new();
    for e in fs::read_dir(&incoming).with_context(|| format!("listing {}", incoming.display()))? {
        let name = e?.file_name();
        // dot-files are being written (docs/operations.md)
        if !name.as_encoded_bytes().starts_with(b".") {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        if sh.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let path = incoming.join(&name);
        match spool_entry(&path) {
            Ok(SpoolEntry::File { link }) => ingest_file(sh, &spool, &name, link).await?,
            Ok(SpoolEntry::Reject { kind, reason }) => {
                reject_entry(sh, &spool, &name, kind, &reason)?
            }
            // gone since the listing
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("inspecting {}", path.display())),
        }
    }
    Ok(())
}

/// `name` in `dir`, or `name.1`, `name.2`… when taken (with its `.reason` file).
fn free_name(dir: &Path, name: &OsStr) -> OsString {
    let taken = |n: &OsStr| {
        let mut reason = n.to_os_string();
        reason.push(".reason");
        fs::symlink_metadata(dir.join(n)).is_ok() || fs::symlink_metadata(dir.join(reason)).is_ok()
    };
    if !taken(name) {
        return name.to_os_string();
    }
    (1u64..)
        .map(|i| {
            let mut n = name.to_os_string();
            n.push(format!(".{i}"));
            n
        })
        .find(|n| !taken(n))
        .unwrap_or_else(|| name.to_os_string())
}

/// Move an entry that is not a file of URLs to `spool/rejected/`, with `NAME.reason` next
/// to it; log and count it.
fn reject_entry(
    sh: &Shared,
    spool: &Path,
    name: &OsStr,
    kind: SpoolEntryKind,
    reason: &str,
) -> Result<()> {
    let from = spool.join("incoming").join(name);
    let rejected = spool.join("rejected");
    let dest = free_name(&rejected, name);
    let mut reason_name = dest.clone();
    reason_name.push(".reason");
    let tmp = spool.join("tmp").join({
        let mut n = OsString::from(".reason-");
        n.push(&dest);
        n
    });
    let mut f = fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    writeln!(f, "{}: {reason}", name.to_string_lossy())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    if let Err(e) = fs::rename(&from, rejected.join(&dest)) {
        fs::remove_file(&tmp).ok();
        return Err(e)
            .with_context(|| format!("moving {} to {}", from.display(), rejected.display()));
    }
    fs::rename(&tmp, rejected.join(&reason_name))
        .with_context(|| format!("moving {} into {}", tmp.display(), rejected.display()))?;
    SpoolEntryRejected {
        file: &name.to_string_lossy(),
        kind,
        reason,
        moved_to: &rejected.join(&dest),
    }
    .emit(&sh.metrics);
    Ok(())
}

async fn ingest_file(
    sh: &Arc<Shared>,
    spool: &Path,
    name: &OsStr,
    link: Option<PathBuf>,
) -> Result<()> {
    let path = spool.join("incoming").join(name);
    let file = match fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            let reason = format!("cannot be opened: {e}");
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
    let display_name = name.to_string_lossy();
    if !tally.rejected.is_empty() {
        let mut tmp_name = OsString::from(".rejected-");
        tmp_name.push(name);
        let tmp = spool.join("tmp").join(tmp_name);
        let mut body = String::from("# line\treason\turl\n");
        for r in &tally.rejected {
            body.push_str(&format!("{}\t{}\t{}\n", r.line, r.reason, r.input));
        }
        fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, spool.join("rejected").join(name))
            .context("moving the rejected-lines file")?;
    }
    let done = spool.join("done").join(name);
    // a symbolic link itself is moved, never its target
    fs::rename(&path, &done).with_context(|| format!("moving {} to done", path.display()))?;
    SpoolFileIngested {
        file: &display_name,
        link_to: link.as_deref(),
        lines: reader.lines_read(),
        accepted: tally.accepted,
        duplicate: tally.duplicate,
        rejected: tally.rejected.len(),
    }
    .emit(&sh.metrics);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_events::intake::SpoolResult;

    #[test]
    fn spool_entries_are_judged_without_opening_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("file"), "http://a/\n").unwrap();
        fs::create_dir(d.join("dir")).unwrap();
        std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        std::os::unix::fs::symlink(d.join("dir"), d.join("dirlink")).unwrap();
        let mkfifo = std::process::Command::new("mkfifo")
            .arg(d.join("fifo"))
            .status()
            .unwrap();
        assert!(mkfifo.success());
        assert_eq!(
            spool_entry(&d.join("file")).unwrap(),
            SpoolEntry::File { link: None }
        );
        assert_eq!(
            spool_entry(&d.join("link")).unwrap(),
            SpoolEntry::File {
                link: Some(d.join("file"))
            }
        );
        let label = |n: &str| match spool_entry(&d.join(n)).unwrap() {
            SpoolEntry::Reject { kind, .. } => SpoolResult::Rejected(kind).as_str(),
            other => panic!("{n}: {other:?}"),
        };
        assert_eq!(label("dir"), "rejected-directory");
        assert_eq!(label("dangling"), "rejected-dangling-link");
        assert_eq!(label("dirlink"), "rejected-link-to-non-file");
        assert_eq!(label("fifo"), "rejected-fifo");
    }

    #[test]
    fn free_name_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(free_name(d, OsStr::new("x")), "x");
        fs::write(d.join("x"), "").unwrap();
        assert_eq!(free_name(d, OsStr::new("x")), "x.1");
        fs::write(d.join("x.1.reason"), "").unwrap();
        assert_eq!(free_name(d, OsStr::new("x")), "x.2");
    }
}
