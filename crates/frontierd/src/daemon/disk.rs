//! The free-space watch's shell: measures the store, WARC and crawl-log directories every
//! `[disk] check_every` (on the blocking pool: a hung filesystem must not stall the
//! runtime), hands the figures to `disk_watch::DiskWatch`, which decides, and applies its
//! verdict: the dispatcher pauses, the intake doors refuse, /healthz says why. It also
//! watches the store: after a failed write (sled fails every later one) it pauses the same
//! way, and once the store's directory takes writes again it asks the daemon to stop, to be
//! started again on what was made durable.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use disk_watch::{Change, DiskWatch};

use crate::daemon::shared::Shared;
use crate::internal_events::disk::{
    DiskMeasured, DiskSpaceLow, DiskSpaceRecovered, DiskUnmeasurable, IntakeRefusedDiskLow,
    StoreWriteFailed, WarcFileRemoved,
};
use crate::internal_events::InternalEvent;

/// Refuse a submission at `door` if space is low: the reason, counted.
pub fn refuse_intake(sh: &Shared, door: &'static str) -> Option<String> {
    let reason = sh.disk.refusal()?;
    IntakeRefusedDiskLow { door }.emit(&sh.metrics);
    Some(reason)
}

/// One round: measure, decide, apply. Run once before the daemon starts fetching (a
/// restart on a full disk starts paused) and then by [`watch`].
pub fn check(sh: &Shared, watch: &mut DiskWatch) {
    let dirs = sh.settings.watched_dirs();
    let measured: Vec<_> = dirs
        .iter()
        .map(|(label, path)| {
            let m = disk_watch::measure(path);
            if let Ok(free) = &m {
                DiskMeasured { dir: label, free }.emit(&sh.metrics);
            }
            (path.clone(), m)
        })
        .collect();
    // the open WARC file removed under us (rm -r of the directory): a new one
    let lost = sh.warc.lock().as_mut().and_then(|w| w.let_go_if_removed());
    if let Some((path, exchanges)) = lost {
        WarcFileRemoved {
            path: &path,
            exchanges,
        }
        .emit(&sh.metrics);
    }
    let store_failure = sh.frontier.store_write_failure();
    if let Some(error) = &store_failure {
        if !sh.disk.store_failed.swap(true, Ordering::SeqCst) {
            StoreWriteFailed { error }.emit(&sh.metrics);
            sh.pipeline.set_paused(true);
        }
    }
    for change in watch.check(&measured) {
        match change {
            Change::WentLow(low) => {
                DiskSpaceLow { low: &low }.emit(&sh.metrics);
                sh.pipeline.set_paused(true);
            }
            Change::Recovered => {
                DiskSpaceRecovered.emit(&sh.metrics);
                sh.pipeline.set_paused(store_failure.is_some());
            }
            Change::Unmeasurable { path, error } => {
                let dir = dirs
                    .iter()
                    .find(|(_, p)| *p == path)
                    .map_or("unknown", |(l, _)| l);
                DiskUnmeasurable { dir, error: &error }.emit(&sh.metrics);
            }
        }
    }
    // once space is back and the store's directory takes a write, stop so that the store
    // is opened again (sled fails every write after a failed one)
    let store_path = &sh.settings.store_path;
    let verdict = disk_watch::verdict(watch.low(), store_failure.as_deref(), || {
        probe_write(store_path)
    });
    if verdict.restart {
        sh.disk.restart.notify_one();
    }
    sh.disk.set(verdict.refusal);
}

/// Write, sync and remove a small file in `dir`: whether it takes writes again.
fn probe_write(dir: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let path = dir.join(".frontierd-write-probe");
    let result = std::fs::File::create(&path).and_then(|mut f| {
        f.write_all(&[0u8; 4096])?;
        f.sync_all()
    });
    let _ = std::fs::remove_file(&path);
    result
}

/// Check every `[disk] check_every` until the daemon stops.
pub async fn watch(sh: Arc<Shared>, watch: DiskWatch) {
    let every = sh.settings.raw.disk.check_every.0;
    let watch = Arc::new(Mutex::new(watch));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if sh.stopping.load(Ordering::SeqCst) {
            return;
        }
        let (sh2, w) = (sh.clone(), watch.clone());
        // a statvfs that hangs (a dead network filesystem) holds one blocking thread and
        // this loop, nothing else
        let _ = tokio::task::spawn_blocking(move || {
            let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
            check(&sh2, &mut w);
        })
        .await;
    }
}
