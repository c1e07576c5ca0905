//! The free-space watch's shell: measures the store, WARC and crawl-log directories every
//! `[disk] check_every` (on the blocking pool: a hung filesystem must not stall the
//! runtime), hands the figures to `disk_watch::DiskWatch`, which decides, and applies its
//! verdict: the dispatcher pauses, the intake doors refuse, /healthz says why.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use disk_watch::{Change, DiskWatch};

use crate::daemon::shared::Shared;
use crate::internal_events::disk::{
    DiskMeasured, DiskSpaceLow, DiskSpaceRecovered, DiskUnmeasurable, IntakeRefusedDiskLow,
};
use crate::internal_events::InternalEvent;

/// The watch's verdict, read by the intake doors, the dispatcher's owner and /healthz.
#[derive(Default)]
pub struct DiskGate {
    low: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl DiskGate {
    /// Why new URLs are refused, while free space is low.
    pub fn refusal(&self) -> Option<String> {
        if !self.low.load(Ordering::SeqCst) {
            return None;
        }
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, reason: Option<String>) {
        self.low.store(reason.is_some(), Ordering::SeqCst);
        *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason;
    }
}

/// Refuse a submission at `door` if space is low: the reason, counted.
pub fn refuse_intake(sh: &Shared, door: &'static str) -> Option<String> {
    let reason = sh.disk.refusal()?;
    IntakeRefusedDiskLow { door }.emit(&sh.metrics);
    Some(reason)
}

/// The directories watched, by their label in metrics.
fn watched(sh: &Shared) -> Vec<(&'static str, PathBuf)> {
    let s = &sh.settings;
    let log_dir = s
        .crawl_log
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    vec![
        ("store", s.store_path.clone()),
        ("warc", s.warc_dir.clone()),
        ("crawl_log", log_dir),
    ]
}

/// One round: measure, decide, apply. Run once before the daemon starts fetching (a
/// restart on a full disk starts paused) and then by [`watch`].
pub fn check(sh: &Shared, watch: &mut DiskWatch) {
    let dirs = watched(sh);
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
    for change in watch.check(&measured) {
        match change {
            Change::None => {}
            Change::WentLow(low) => {
                DiskSpaceLow { low: &low }.emit(&sh.metrics);
                sh.pipeline.set_paused(true);
            }
            Change::Recovered => {
                DiskSpaceRecovered.emit(&sh.metrics);
                sh.pipeline.set_paused(false);
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
    sh.disk.set(watch.low().map(ToString::to_string));
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
