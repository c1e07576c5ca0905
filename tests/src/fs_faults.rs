//! Real filesystem faults for the disk tests: a small tmpfs mounted over a directory (CI
//! runs as root), and a file that fills it; an ext4 filesystem on a loop device that the
//! kernel turns read-only as on an I/O error (`errors=remount-ro` and ext4's
//! `trigger_fs_error`: `mount -o remount,ro` is refused while files are open for writing).
//! Where mounting is not allowed (not root), the test says so and is skipped on that
//! machine; under CI a tmpfs must mount. Loop devices are not available everywhere root is
//! (containers): the ext4 test is skipped, saying so, where they are not.

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

/// An ext4 filesystem in an image file, loop-mounted at a directory with
/// `errors=remount-ro`, until dropped.
pub struct Ext4Loop {
    image: PathBuf,
    at: PathBuf,
    _dir: tempfile::TempDir,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

impl Ext4Loop {
    /// Make and mount a `mib` MiB ext4 at `at`; `None` (with the reason printed) where this
    /// machine cannot (no loop devices, no mkfs.ext4, not root).
    pub fn mount(at: &Path, mib: u64) -> Option<Ext4Loop> {
        let dir = tempfile::tempdir().expect("tempdir");
        let image = dir.path().join("fs.img");
        std::fs::create_dir_all(at).expect("mount point");
        let made = std::fs::File::create(&image)
            .and_then(|f| f.set_len(mib << 20))
            .map_err(|e| e.to_string())
            .and_then(|()| run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image)));
        let fs = Ext4Loop {
            image,
            at: at.to_path_buf(),
            _dir: dir,
        };
        match made.and_then(|()| fs.mount_again()) {
            Ok(()) => Some(fs),
            Err(why) => {
                eprintln!(
                    "skipped on this machine: cannot loop-mount an ext4 at {}: {why}",
                    at.display()
                );
                None
            }
        }
    }

    fn mount_again(&self) -> Result<(), String> {
        run(Command::new("mount")
            .args(["-o", "loop,errors=remount-ro"])
            .arg(&self.image)
            .arg(&self.at))
    }

    /// The kernel's reaction to an I/O error: the filesystem turns read-only at once, files
    /// open for writing included (ext4's `trigger_fs_error`). False (said) where the kernel
    /// has no such knob: the test is skipped there.
    pub fn fail(&self) -> bool {
        let out = Command::new("findmnt")
            .args(["-n", "-o", "SOURCE"])
            .arg(&self.at)
            .output()
            .expect("findmnt");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let name = Path::new(&dev).file_name().expect("loop device").to_owned();
        let knob = Path::new("/sys/fs/ext4")
            .join(name)
            .join("trigger_fs_error");
        match std::fs::write(&knob, "1") {
            Ok(()) => true,
            Err(e) => {
                eprintln!("skipped on this machine: {}: {e}", knob.display());
                false
            }
        }
    }

    /// What an operator does next: unmount, check, mount again (the daemon stopped first).
    pub fn repair(&self) {
        run(Command::new("umount").arg(&self.at)).expect("umount");
        // e2fsck exits 1 when it fixed something
        let _ = Command::new("e2fsck")
            .args(["-fy"])
            .arg(&self.image)
            .output();
        self.mount_again().expect("mount again");
    }
}

impl Drop for Ext4Loop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}
