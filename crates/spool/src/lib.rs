//! The spool directory (`spool/incoming` -> `done` or `rejected`, written through `tmp`),
//! one of the daemon's doors for URL lists (docs/operations.md, "Feed seeds").
//!
//! Owns the protocol: the four directories, which names in `incoming` are taken and in
//! which order (dot-files are being written; the rest by name), what an entry is judged
//! without opening it (a FIFO would block), how a file is moved to `done` with its
//! rejected lines in `rejected/NAME`, how an entry that is not a file of URLs is moved to
//! `rejected/` with a `NAME.reason` beside it, and the names that never overwrite.
//!
//! Must never: read the URL lists (their format is `frontierd_admin::url_list`'s), offer
//! URLs, log or count (the caller does, from what each call returns).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

#[cfg(test)]
mod tests;

/// The spool's subdirectories, made at start.
pub const DIRS: [&str; 4] = ["incoming", "done", "rejected", "tmp"];

/// What kind of spool entry is not a file of URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Directory,
    Fifo,
    Socket,
    Device,
    /// Any other file type.
    Other,
    /// A symbolic link whose target cannot be read.
    DanglingLink,
    /// A symbolic link to something other than a regular file.
    LinkToNonFile,
    /// A file that cannot be opened or read to its end.
    Unreadable,
}

/// What a name in `spool/incoming` is, judged without opening it.
#[derive(Debug, PartialEq)]
pub enum Entry {
    /// A regular file, or a symbolic link to one (`link` is its target).
    File { link: Option<PathBuf> },
    /// Anything else: to be moved to `spool/rejected/` with this reason.
    Reject { kind: EntryKind, reason: String },
}

/// A file of URLs opened for reading.
#[derive(Debug)]
pub enum Opened {
    File(fs::File),
    /// Gone since it was listed: nothing to do.
    Gone,
    /// It cannot be opened: to be rejected with this reason.
    Unreadable(String),
}

/// What went wrong in the spool directory; each error names what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("{doing}")]
    Io {
        doing: String,
        #[source]
        source: io::Error,
    },
    /// Reading the listing of `incoming` failed part-way.
    #[error(transparent)]
    Listing(io::Error),
}

fn doing(doing: String) -> impl FnOnce(io::Error) -> SpoolError {
    move |source| SpoolError::Io { doing, source }
}

/// One spool directory.
#[derive(Debug, Clone)]
pub struct Spool {
    root: PathBuf,
}

impl Spool {
    pub fn new(root: impl Into<PathBuf>) -> Spool {
        Spool { root: root.into() }
    }

    /// Make the spool's directories ([`DIRS`]).
    pub fn create(&self) -> Result<(), SpoolError> {
        for sub in DIRS {
            let dir = self.root.join(sub);
            fs::create_dir_all(&dir).map_err(doing(format!("creating {}", dir.display())))?;
        }
        Ok(())
    }

    fn incoming(&self) -> PathBuf {
        self.root.join("incoming")
    }

    /// The names waiting in `incoming`, in the order they are taken (by name); dot-files
    /// are being written and wait.
    pub fn waiting(&self) -> Result<Vec<OsString>, SpoolError> {
        let incoming = self.incoming();
        let listing =
            fs::read_dir(&incoming).map_err(doing(format!("listing {}", incoming.display())))?;
        let mut names = Vec::new();
        for e in listing {
            let name = e.map_err(SpoolError::Listing)?.file_name();
            if !name.as_encoded_bytes().starts_with(b".") {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// What `incoming/NAME` is; `None` when it is gone since the listing.
    pub fn entry(&self, name: &OsStr) -> Result<Option<Entry>, SpoolError> {
        let path = self.incoming().join(name);
        match judge(&path) {
            Ok(entry) => Ok(Some(entry)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(doing(format!("inspecting {}", path.display()))(e)),
        }
    }

    /// Open `incoming/NAME` to read its URLs.
    pub fn open(&self, name: &OsStr) -> Opened {
        match fs::File::open(self.incoming().join(name)) {
            Ok(f) => Opened::File(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Opened::Gone,
            Err(e) => Opened::Unreadable(format!("cannot be opened: {e}")),
        }
    }

    /// Move `incoming/NAME` to `rejected/` (under a name not taken), with `NAME.reason`
    /// beside it saying why; returns where it went.
    pub fn reject(&self, name: &OsStr, reason: &str) -> Result<PathBuf, SpoolError> {
        let from = self.incoming().join(name);
        let rejected = self.root.join("rejected");
        let dest = free_name(&rejected, name);
        let mut reason_name = dest.clone();
        reason_name.push(".reason");
        let tmp = self.root.join("tmp").join({
            let mut n = OsString::from(".reason-");
            n.push(&dest);
            n
        });
        let writing = || doing(format!("writing {}", tmp.display()));
        let mut f = fs::File::create(&tmp).map_err(writing())?;
        writeln!(f, "{}: {reason}", name.to_string_lossy())
            .and_then(|_| f.sync_all())
            .map_err(writing())?;
        if let Err(e) = fs::rename(&from, rejected.join(&dest)) {
            fs::remove_file(&tmp).ok();
            let moving = format!("moving {} to {}", from.display(), rejected.display());
            return Err(doing(moving)(e));
        }
        fs::rename(&tmp, rejected.join(&reason_name)).map_err(doing(format!(
            "moving {} into {}",
            tmp.display(),
            rejected.display()
        )))?;
        Ok(rejected.join(&dest))
    }

    /// A file read to its end: its rejected lines, if any, written to `rejected/NAME`
    /// (`line`, `reason`, `url`, tab-separated, under a header), then the file moved to
    /// `done/` (a symbolic link itself, never its target).
    pub fn done<'a>(
        &self,
        name: &OsStr,
        rejected: impl IntoIterator<Item = RejectedLine<'a>>,
    ) -> Result<(), SpoolError> {
        let mut lines = rejected.into_iter().peekable();
        if lines.peek().is_some() {
            let mut tmp_name = OsString::from(".rejected-");
            tmp_name.push(name);
            let tmp = self.root.join("tmp").join(tmp_name);
            let mut body = String::from("# line\treason\turl\n");
            for r in lines {
                body.push_str(&format!("{}\t{}\t{}\n", r.line, r.reason, r.input));
            }
            fs::write(&tmp, body).map_err(doing(format!("writing {}", tmp.display())))?;
            fs::rename(&tmp, self.root.join("rejected").join(name))
                .map_err(doing("moving the rejected-lines file".to_string()))?;
        }
        let path = self.incoming().join(name);
        let done = self.root.join("done").join(name);
        fs::rename(&path, &done).map_err(doing(format!("moving {} to done", path.display())))
    }
}

/// One rejected line of a file, for `rejected/NAME`.
#[derive(Debug, Clone, Copy)]
pub struct RejectedLine<'a> {
    pub line: usize,
    pub reason: &'a str,
    /// The line as echoed back.
    pub input: &'a str,
}

/// What `ft` is, for a rejection: its kind and how the reason names it.
fn kind_of(ft: fs::FileType) -> (EntryKind, &'static str) {
    if ft.is_dir() {
        (EntryKind::Directory, "a directory")
    } else if ft.is_fifo() {
        (EntryKind::Fifo, "a FIFO (named pipe)")
    } else if ft.is_socket() {
        (EntryKind::Socket, "a socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        (EntryKind::Device, "a device")
    } else {
        (EntryKind::Other, "not a regular file")
    }
}

/// What the entry at `path` is, from its metadata (and its link's target's) only.
fn judge(path: &Path) -> io::Result<Entry> {
    let ft = fs::symlink_metadata(path)?.file_type();
    if ft.is_file() {
        return Ok(Entry::File { link: None });
    }
    if !ft.is_symlink() {
        let (kind, what) = kind_of(ft);
        return Ok(Entry::Reject {
            kind,
            reason: format!("{what}, not a file of URLs"),
        });
    }
    let target = fs::read_link(path)?;
    Ok(match fs::metadata(path) {
        Ok(m) if m.is_file() => Entry::File { link: Some(target) },
        Ok(m) => Entry::Reject {
            kind: EntryKind::LinkToNonFile,
            reason: format!(
                "symbolic link to {}, which is {}, not a file of URLs",
                target.display(),
                kind_of(m.file_type()).1
            ),
        },
        Err(e) => Entry::Reject {
            kind: EntryKind::DanglingLink,
            reason: format!(
                "symbolic link to {}, which cannot be read: {e}",
                target.display()
            ),
        },
    })
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
