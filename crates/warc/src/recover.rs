//! Completing the `.open` files a crash left behind.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::files::{rename_no_clobber, sync_dir};
use crate::writer::{OPEN_SUFFIX, WARC_SUFFIX};
use crate::WarcError;

/// What [`recover_open_files`] did with one leftover `.open` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Every gzip member was complete; renamed to the given path.
    Renamed(PathBuf),
    /// An incomplete or corrupt tail was cut at the end of the last whole member
    /// (`kept` bytes of `was`), then the file was renamed.
    Truncated { path: PathBuf, kept: u64, was: u64 },
    /// Not one whole record: the file was removed.
    Removed(PathBuf),
}

impl std::fmt::Display for Recovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recovered::Renamed(path) => write!(f, "complete, renamed to {}", path.display()),
            Recovered::Truncated { path, kept, was } => write!(
                f,
                "cut after its last whole record ({kept} of {was} bytes kept), renamed to {}",
                path.display()
            ),
            Recovered::Removed(path) => {
                write!(f, "not one whole record, removed {}", path.display())
            }
        }
    }
}

/// Completes every `*.warc.gz.open` file in `dir` left by a crash.
///
/// Each file is decompressed member by member (streaming, constant memory; about as
/// long as `gunzip` takes on it). Everything after the last gzip member that decodes whole,
/// CRC and length checked, is cut off; then the file is renamed to `.warc.gz`. A file
/// without a single whole member is deleted. Records are not parsed, so a response whose
/// request made it but which itself did not is simply missing (a lone request record is
/// valid WARC).
pub fn recover_open_files(dir: &Path) -> Result<Vec<Recovered>, WarcError> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(WarcError::io("listing", dir)(e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(WarcError::io("listing", dir))?;
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(OPEN_SUFFIX) {
            paths.push(entry.path());
        }
    }
    paths.sort();
    for open_path in paths {
        out.push(recover_one(&open_path)?);
    }
    if !out.is_empty() {
        sync_dir(dir);
    }
    Ok(out)
}

fn recover_one(open_path: &Path) -> Result<Recovered, WarcError> {
    let name = open_path.to_string_lossy();
    let final_path = PathBuf::from(format!(
        "{}{WARC_SUFFIX}",
        &name[..name.len() - OPEN_SUFFIX.len()]
    ));
    let file = File::open(open_path).map_err(WarcError::io("opening", open_path))?;
    let was = file
        .metadata()
        .map_err(WarcError::io("reading", open_path))?
        .len();
    let kept = whole_members_len(file).map_err(WarcError::io("reading", open_path))?;
    if kept == 0 {
        fs::remove_file(open_path).map_err(WarcError::io("removing", open_path))?;
        return Ok(Recovered::Removed(open_path.to_path_buf()));
    }
    if kept < was {
        OpenOptions::new()
            .write(true)
            .open(open_path)
            .and_then(|f| f.set_len(kept).and_then(|()| f.sync_all()))
            .map_err(WarcError::io("truncating", open_path))?;
    }
    rename_no_clobber(open_path, &final_path)?;
    Ok(if kept < was {
        Recovered::Truncated {
            path: final_path,
            kept,
            was,
        }
    } else {
        Recovered::Renamed(final_path)
    })
}

/// A BufRead that counts the bytes its consumer consumed.
struct Counting<R> {
    inner: BufReader<R>,
    consumed: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: Read> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed += amt as u64;
        self.inner.consume(amt);
    }
}

/// Byte length of the leading run of whole, valid gzip members.
fn whole_members_len<R: Read>(input: R) -> io::Result<u64> {
    let mut reader = Counting {
        inner: BufReader::with_capacity(1 << 16, input),
        consumed: 0,
    };
    let mut good = 0;
    let mut sink = vec![0u8; 1 << 16];
    loop {
        if reader.fill_buf()?.is_empty() {
            return Ok(good);
        }
        // The bufread decoder stops exactly at the end of its member.
        let mut member = flate2::bufread::GzDecoder::new(reader);
        let ok = loop {
            match member.read(&mut sink) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(_) => break false,
            }
        };
        reader = member.into_inner();
        if !ok {
            return Ok(good);
        }
        good = reader.consumed;
    }
}
