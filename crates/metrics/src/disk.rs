//! The free-space watch's metrics (docs/metrics.md, "Disk space").

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Labels;

#[derive(Default)]
pub struct DiskMetrics {
    pub low: Gauge,
    pub low_episodes: Counter,
    pub available_bytes: Family<Labels, Gauge>,
    pub unmeasurable: Family<Labels, Counter>,
    pub intake_refused: Family<Labels, Counter>,
    pub store_write_failed: Gauge,
    pub warc_files_lost: Counter,
}

impl DiskMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "disk_low",
            "1 while a watched filesystem (store, WARC, crawl log) is below the [disk] pause threshold: fetching paused, new URLs refused; 0 otherwise",
            self.low.clone(),
        );
        r.register(
            "disk_low_episodes",
            "Times free space fell below the [disk] pause threshold",
            self.low_episodes.clone(),
        );
        r.register(
            "disk_available_bytes",
            "Bytes free for the daemon on the filesystem of each watched directory, at the last check, by dir (store, warc, crawl_log)",
            self.available_bytes.clone(),
        );
        r.register(
            "disk_unmeasurable",
            "Episodes in which a watched directory could not be measured (vanished, unreadable), by dir",
            self.unmeasurable.clone(),
        );
        r.register(
            "disk_intake_refused",
            "URL submissions refused while free space was low, by door (api, grpc, spool, cluster)",
            self.intake_refused.clone(),
        );
        r.register(
            "store_write_failed",
            "1 once the store failed a write (a full disk, an I/O error): paused until frontierd is started again; 0 otherwise",
            self.store_write_failed.clone(),
        );
        r.register(
            "warc_files_lost",
            "Open WARC files removed while running (their directory or themselves): let go, archiving went on in a new file; what they held is lost",
            self.warc_files_lost.clone(),
        );
    }
}
