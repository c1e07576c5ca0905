//! Real filesystem faults for the disk tests: a small tmpfs mounted over a directory (CI
//! runs as root), and a file that fills it. Where mounting is not allowed (not root), the
//! test says so and is skipped on that machine; under CI it fails instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted at a directory until dropped.
pub struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `mib` MiB at `at` (created if missing); `None` (with the reason
    /// printed) where this machine does not allow it, outside CI.
    pub fn mount(at: &Path, mib: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .output();
        let why = match out {
            Ok(o) if o.status.success() => {
                return Some(Tmpfs {
                    at: at.to_path_buf(),
                })
            }
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => format!("running mount: {e}"),
        };
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to mount a tmpfs (it runs as root): {why}"
        );
        eprintln!(
            "skipped on this machine: cannot mount a tmpfs at {}: {why}",
            at.display()
        );
        None
    }

    /// Bytes free on it.
    pub fn available(&self) -> u64 {
        disk_watch::measure(&self.at)
            .expect("statvfs")
            .available_bytes
    }

    /// Write a file of zeros until only about `leave` bytes are free; its path.
    pub fn fill_leaving(&self, leave: u64) -> PathBuf {
        let path = self.at.join("filler");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("filler");
        let chunk = vec![0u8; 256 << 10];
        while self.available() > leave + chunk.len() as u64 {
            if f.write_all(&chunk).is_err() {
                break;
            }
        }
        f.sync_all().ok();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // lazy: a daemon killed a moment ago may still hold files there
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}
