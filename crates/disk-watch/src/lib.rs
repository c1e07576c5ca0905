//! Free-space watch: whether the filesystems a crawler writes to (its store, WARC and
//! crawl-log directories) have room, with two thresholds so that it does not flap: below
//! the low one the caller pauses writing, and it resumes only once every filesystem is back
//! above the high one (Heritrix's disk-space monitor works the same way).
//!
//! [`DiskWatch`] owns the decision and is pure: the caller measures ([`measure`], one
//! `statvfs` per directory) and hands the measurements in; the watch answers whether the
//! state changed, so the caller logs and counts once per episode, not once per check.
//! It never writes, deletes or reserves anything on disk.

use std::path::{Path, PathBuf};

/// Free space below either limit is low.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Bytes free.
    pub bytes: u64,
    /// Percent of the filesystem's size free (0 to 100).
    pub percent: f64,
}

impl Limits {
    /// What `free` lacks to meet both limits, if anything: the larger of the two shortfalls.
    fn shortfall(&self, free: &Free) -> Option<u64> {
        let by_percent = (self.percent / 100.0 * free.total_bytes as f64).ceil() as u64;
        let need = self.bytes.max(by_percent);
        (free.available_bytes < need).then_some(need)
    }
}

/// The thresholds: low below `pause`, back once every directory is at or above `resume`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub pause: Limits,
    pub resume: Limits,
}

/// One directory's filesystem, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Free {
    pub path: PathBuf,
    /// Bytes an unprivileged writer may still use (`f_bavail`).
    pub available_bytes: u64,
    /// The filesystem's size.
    pub total_bytes: u64,
}

/// Why space is low: the first directory below its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Low {
    pub path: PathBuf,
    pub available_bytes: u64,
    /// The free space it needs to be above the pause threshold.
    pub needed_bytes: u64,
}

impl std::fmt::Display for Low {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "disk space low on {}: {} free, below the {} the [disk] thresholds keep free",
            self.path.display(),
            human(self.available_bytes),
            human(self.needed_bytes)
        )
    }
}

/// A size for people: bytes, KiB, MiB or GiB with one decimal.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} bytes"),
        _ => format!("{v:.1} {}", UNITS[unit]),
    }
}

/// What a check changed (a check that changed nothing returns none).
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Space went low: pause.
    WentLow(Low),
    /// Every directory is back above the resume threshold: resume.
    Recovered,
    /// A directory could not be measured (it vanished, or is not readable): reported once
    /// per episode per directory; the state stays what it was.
    Unmeasurable { path: PathBuf, error: String },
}

/// The watch's state across checks.
#[derive(Debug)]
pub struct DiskWatch {
    thresholds: Thresholds,
    low: Option<Low>,
    /// Directories whose last measurement failed (reported once until they measure again).
    unmeasurable: Vec<PathBuf>,
}

impl DiskWatch {
    pub fn new(thresholds: Thresholds) -> DiskWatch {
        DiskWatch {
            thresholds,
            low: None,
            unmeasurable: Vec::new(),
        }
    }

    /// Why space is low, while it is.
    pub fn low(&self) -> Option<&Low> {
        self.low.as_ref()
    }

    /// Take one round of measurements (one per watched directory) and say what changed.
    /// A failed measurement is reported (once) and otherwise ignored: a vanished directory
    /// is the writer's error to report, not a reason to pause everything.
    pub fn check(&mut self, measured: &[(PathBuf, Result<Free, MeasureError>)]) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut ok: Vec<&Free> = Vec::new();
        for (path, m) in measured {
            match m {
                Ok(free) => {
                    self.unmeasurable.retain(|p| p != path);
                    ok.push(free);
                }
                Err(e) => {
                    if !self.unmeasurable.contains(path) {
                        self.unmeasurable.push(path.clone());
                        changes.push(Change::Unmeasurable {
                            path: path.clone(),
                            error: e.to_string(),
                        });
                    }
                }
            }
        }
        let below_pause = ok.iter().find_map(|f| {
            self.thresholds.pause.shortfall(f).map(|needed| Low {
                path: f.path.clone(),
                available_bytes: f.available_bytes,
                needed_bytes: needed,
            })
        });
        match (&self.low, below_pause) {
            (None, Some(low)) => {
                self.low = Some(low.clone());
                changes.push(Change::WentLow(low));
            }
            (Some(_), below) => {
                let all_back = ok
                    .iter()
                    .all(|f| self.thresholds.resume.shortfall(f).is_none());
                if all_back && below.is_none() {
                    self.low = None;
                    changes.push(Change::Recovered);
                } else if let Some(now) = below {
                    // still low: keep the latest figures for health and status answers
                    self.low = Some(now);
                }
            }
            (None, None) => {}
        }
        changes
    }
}

/// A directory that could not be measured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("statvfs {path}: {reason}")]
pub struct MeasureError {
    pub path: String,
    pub reason: String,
}

/// Measure the filesystem `path` is on (`statvfs`).
pub fn measure(path: &Path) -> Result<Free, MeasureError> {
    let err = |reason: String| MeasureError {
        path: path.display().to_string(),
        reason,
    };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| err("the path holds a NUL byte".into()))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` a buffer of the size statvfs writes.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(err(std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    Ok(free_of(path, st.f_frsize, st.f_bavail, st.f_blocks))
}

/// The field types are u64 on 64-bit Linux and narrower elsewhere.
#[allow(clippy::useless_conversion)]
fn free_of(
    path: &Path,
    unit: libc::c_ulong,
    available: libc::fsblkcnt_t,
    blocks: libc::fsblkcnt_t,
) -> Free {
    let unit = u64::from(unit);
    Free {
        path: path.to_path_buf(),
        available_bytes: u64::from(available).saturating_mul(unit),
        total_bytes: u64::from(blocks).saturating_mul(unit),
    }
}

/// Why the daemon refuses new URLs and pauses fetching, from the free space and its store,
/// and whether it should stop to open the store again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Why new URLs are refused (`None`: they are not).
    pub refusal: Option<String>,
    /// The store failed a write and its directory takes writes again: stop, to be started
    /// again on what was made durable (sled fails every write after a failed one).
    pub restart: bool,
}

/// The verdict, from the watch's `low` reason and the store's first failed write, if any.
/// Only once space is back is `probe` asked whether the store's directory takes writes
/// again (the caller's write: the watch never writes).
pub fn verdict(
    low: Option<&Low>,
    store_failure: Option<&str>,
    probe: impl FnOnce() -> std::io::Result<()>,
) -> Verdict {
    let low = low.map(ToString::to_string);
    let (refusal, restart) = match (low, store_failure) {
        (low, None) => (low, false),
        (Some(low), Some(e)) => (
            Some(format!("{low}; and the store failed a write ({e})")),
            false,
        ),
        (None, Some(e)) => match probe() {
            Ok(()) => (
                Some(format!("the store failed a write ({e}); stopping to open it again")),
                true,
            ),
            Err(probe) => (
                Some(format!(
                    "the store failed a write ({e}) and its directory still cannot be written ({probe})"
                )),
                false,
            ),
        },
    };
    Verdict { refusal, restart }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn thresholds() -> Thresholds {
        Thresholds {
            pause: Limits {
                bytes: 100 * MIB,
                percent: 0.0,
            },
            resume: Limits {
                bytes: 200 * MIB,
                percent: 0.0,
            },
        }
    }

    fn free(path: &str, available_mib: u64) -> (PathBuf, Result<Free, MeasureError>) {
        (
            PathBuf::from(path),
            Ok(Free {
                path: PathBuf::from(path),
                available_bytes: available_mib * MIB,
                total_bytes: 10_000 * MIB,
            }),
        )
    }

    #[test]
    fn low_once_per_episode_and_back_only_above_the_resume_threshold() {
        let mut w = DiskWatch::new(thresholds());
        assert_eq!(w.check(&[free("/data", 500), free("/warc", 500)]), vec![]);
        let went = w.check(&[free("/data", 500), free("/warc", 99)]);
        assert!(
            matches!(&went[..], [Change::WentLow(l)] if l.path == Path::new("/warc") && l.needed_bytes == 100 * MIB),
            "{went:?}"
        );
        assert!(w.low().is_some());
        // still low, then between the thresholds: no new event, still paused
        assert_eq!(w.check(&[free("/data", 500), free("/warc", 50)]), vec![]);
        assert_eq!(w.low().map(|l| l.available_bytes), Some(50 * MIB));
        assert_eq!(w.check(&[free("/data", 500), free("/warc", 150)]), vec![]);
        assert!(w.low().is_some(), "150 MiB is above pause but below resume");
        // above resume everywhere: back
        assert_eq!(
            w.check(&[free("/data", 500), free("/warc", 200)]),
            vec![Change::Recovered]
        );
        assert!(w.low().is_none());
        // a second episode is reported again
        assert!(matches!(
            &w.check(&[free("/data", 10), free("/warc", 500)])[..],
            [Change::WentLow(_)]
        ));
    }

    #[test]
    fn the_percentage_counts_when_it_asks_more_than_the_size() {
        let mut w = DiskWatch::new(Thresholds {
            pause: Limits {
                bytes: MIB,
                percent: 5.0,
            },
            resume: Limits {
                bytes: MIB,
                percent: 10.0,
            },
        });
        // 400 MiB free of 10 000 is 4 %: below 5 %, although far above 1 MiB
        let went = w.check(&[free("/data", 400)]);
        assert!(
            matches!(&went[..], [Change::WentLow(l)] if l.needed_bytes == 500 * MIB),
            "{went:?}"
        );
        assert!(w
            .low()
            .is_some_and(|l| l.to_string().contains("400.0 MiB free")));
        assert_eq!(w.check(&[free("/data", 999)]), vec![]);
        assert_eq!(w.check(&[free("/data", 1000)]), vec![Change::Recovered]);
    }

    #[test]
    fn a_vanished_directory_is_reported_once_and_does_not_pause() {
        let mut w = DiskWatch::new(thresholds());
        let gone = || {
            (
                PathBuf::from("/warc"),
                Err(MeasureError {
                    path: "/warc".into(),
                    reason: "No such file or directory".into(),
                }),
            )
        };
        let first = w.check(&[free("/data", 500), gone()]);
        assert!(
            matches!(&first[..], [Change::Unmeasurable { .. }]),
            "{first:?}"
        );
        assert_eq!(w.check(&[free("/data", 500), gone()]), vec![]);
        assert!(w.low().is_none());
        assert_eq!(w.check(&[free("/data", 500), free("/warc", 500)]), vec![]);
        assert_eq!(
            w.check(&[gone()]).len(),
            1,
            "reported again after it came back"
        );
    }

    #[test]
    fn measure_reads_a_real_filesystem_and_names_a_missing_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = measure(dir.path()).expect("statvfs");
        assert!(f.total_bytes > 0 && f.available_bytes <= f.total_bytes);
        let e = measure(&dir.path().join("missing")).expect_err("missing");
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn verdict_of_space_and_store() {
        let never = || -> std::io::Result<()> { panic!("probed while space is low") };
        let fine = verdict(None, None, never);
        assert_eq!(
            fine,
            Verdict {
                refusal: None,
                restart: false
            }
        );
        let low = Low {
            path: PathBuf::from("/data"),
            available_bytes: 1,
            needed_bytes: 2,
        };
        let v = verdict(Some(&low), Some("disk full"), never);
        assert!(!v.restart);
        assert!(v
            .refusal
            .unwrap()
            .ends_with("; and the store failed a write (disk full)"));
        let v = verdict(None, Some("disk full"), || Ok(()));
        assert_eq!(
            v,
            Verdict {
                refusal: Some(
                    "the store failed a write (disk full); stopping to open it again".into()
                ),
                restart: true,
            }
        );
        let v = verdict(None, Some("disk full"), || {
            Err(std::io::Error::other("read-only"))
        });
        assert!(!v.restart);
        assert_eq!(
            v.refusal.as_deref(),
            Some("the store failed a write (disk full) and its directory still cannot be written (read-only)")
        );
    }
}
