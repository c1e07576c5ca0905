//! The free-space watch: space went low (fetching paused, intake refused), came back, a
//! watched directory could not be measured, a submission refused while low.

use super::{label, InternalEvent};
use crate::metrics::Metrics;

/// A watched filesystem fell below the pause threshold. Logged once per episode.
pub struct DiskSpaceLow<'a> {
    pub low: &'a disk_watch::Low,
}

impl InternalEvent for DiskSpaceLow<'_> {
    fn emit(self, m: &Metrics) {
        tracing::error!(
            path = %self.low.path.display(),
            available_bytes = self.low.available_bytes,
            needed_bytes = self.low.needed_bytes,
            "{}: fetching paused and new URLs refused until space is freed ([disk] resume thresholds)",
            self.low
        );
        m.disk.low.set(1);
        m.disk.low_episodes.inc();
    }
}

/// Every watched filesystem is back above the resume threshold.
pub struct DiskSpaceRecovered;

impl InternalEvent for DiskSpaceRecovered {
    fn emit(self, m: &Metrics) {
        tracing::info!(
            "disk space back above the [disk] resume thresholds: fetching and intake resumed"
        );
        m.disk.low.set(0);
    }
}

/// One watched directory measured.
pub struct DiskMeasured<'a> {
    pub dir: &'static str,
    pub free: &'a disk_watch::Free,
}

impl InternalEvent for DiskMeasured<'_> {
    fn emit(self, m: &Metrics) {
        m.disk
            .available_bytes
            .get_or_create(&label("dir", self.dir))
            .set(self.free.available_bytes.min(i64::MAX as u64) as i64);
    }
}

/// A watched directory could not be measured (once per episode).
pub struct DiskUnmeasurable<'a> {
    pub dir: &'static str,
    pub error: &'a str,
}

impl InternalEvent for DiskUnmeasurable<'_> {
    fn emit(self, m: &Metrics) {
        tracing::warn!(dir = self.dir, error = %self.error, "free space of a watched directory cannot be measured");
        m.disk
            .unmeasurable
            .get_or_create(&label("dir", self.dir))
            .inc();
    }
}

/// A submission refused because space is low (nothing of it was stored).
pub struct IntakeRefusedDiskLow {
    pub door: &'static str,
}

impl InternalEvent for IntakeRefusedDiskLow {
    fn emit(self, m: &Metrics) {
        tracing::debug!(door = self.door, "URLs refused: disk space low");
        m.disk
            .intake_refused
            .get_or_create(&label("door", self.door))
            .inc();
    }
}

/// The store failed a write: nothing more can be made durable until it is opened again.
/// Logged once; the daemon pauses and stops once the store's directory takes writes.
pub struct StoreWriteFailed<'a> {
    pub error: &'a str,
}

impl InternalEvent for StoreWriteFailed<'_> {
    fn emit(self, m: &Metrics) {
        tracing::error!(
            error = %self.error,
            "the store failed a write: fetching paused and new URLs refused; frontierd stops (to be started again on what was made durable) once its directory takes writes again"
        );
        m.disk.store_write_failed.set(1);
    }
}

/// The open WARC file was removed while running (its directory or itself): let go, the
/// next exchange starts a new file. What was written to it is gone with it.
pub struct WarcFileRemoved<'a> {
    pub path: &'a std::path::Path,
    pub exchanges: u64,
}

impl InternalEvent for WarcFileRemoved<'_> {
    fn emit(self, m: &Metrics) {
        tracing::error!(
            file = %self.path.display(),
            exchanges = self.exchanges,
            "the open WARC file was removed while running: the exchanges written to it are lost with it; archiving goes on in a new file"
        );
        m.disk.warc_files_lost.inc();
    }
}
