//! `[disk]`: the free-space watch over the store, WARC and crawl-log directories
//! (`disk-watch`; what pauses and what is refused: docs/operations.md, "Disk space").

use std::time::Duration;

use serde::Deserialize;

use super::{bad, ConfigError, Dur};

/// `[disk]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiskSection {
    /// Pause when a watched filesystem has less than this many bytes free...
    pub pause_below_bytes: u64,
    /// ...or less than this percentage of its size free.
    pub pause_below_percent: f64,
    /// Resume once every watched filesystem has at least this many bytes free...
    pub resume_above_bytes: u64,
    /// ...and at least this percentage of its size.
    pub resume_above_percent: f64,
    /// How often the filesystems are measured.
    pub check_every: Dur,
}

impl Default for DiskSection {
    fn default() -> Self {
        DiskSection {
            pause_below_bytes: 256 << 20,
            pause_below_percent: 1.0,
            resume_above_bytes: 512 << 20,
            resume_above_percent: 2.0,
            check_every: Dur(Duration::from_secs(1)),
        }
    }
}

impl DiskSection {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (key, v) in [
            ("disk.pause_below_percent", self.pause_below_percent),
            ("disk.resume_above_percent", self.resume_above_percent),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return Err(bad(key, v.to_string(), "allowed: 0 to 100"));
            }
        }
        if self.resume_above_bytes < self.pause_below_bytes {
            return Err(bad(
                "disk.resume_above_bytes",
                self.resume_above_bytes.to_string(),
                "allowed: at least disk.pause_below_bytes (resuming below the pause threshold would pause again at once)",
            ));
        }
        if self.resume_above_percent < self.pause_below_percent {
            return Err(bad(
                "disk.resume_above_percent",
                self.resume_above_percent.to_string(),
                "allowed: at least disk.pause_below_percent",
            ));
        }
        if self.check_every.0 < Duration::from_millis(100) {
            return Err(bad(
                "disk.check_every",
                self.check_every.to_string(),
                "allowed: 100ms or more",
            ));
        }
        Ok(())
    }

    pub fn thresholds(&self) -> disk_watch::Thresholds {
        disk_watch::Thresholds {
            pause: disk_watch::Limits {
                bytes: self.pause_below_bytes,
                percent: self.pause_below_percent,
            },
            resume: disk_watch::Limits {
                bytes: self.resume_above_bytes,
                percent: self.resume_above_percent,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_that_would_flap_are_refused_by_name() {
        assert!(DiskSection::default().check().is_ok());
        let s = DiskSection {
            resume_above_bytes: 1,
            ..DiskSection::default()
        };
        let e = s.check().expect_err("resume below pause").to_string();
        assert!(e.contains("disk.resume_above_bytes"), "{e}");
        let s = DiskSection {
            pause_below_percent: 101.0,
            ..DiskSection::default()
        };
        assert!(s
            .check()
            .expect_err("over 100")
            .to_string()
            .contains("disk.pause_below_percent"));
    }
}
