//! What can go wrong writing or recovering WARC files; every error names the file.

use std::io;
use std::path::PathBuf;

/// A WARC writer or recovery failure.
#[derive(Debug, thiserror::Error)]
pub enum WarcError {
    /// A file system operation failed (`action` says which, `path` on what).
    #[error("{action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file name prefix is empty or holds `/` or NUL.
    #[error("invalid WARC file prefix {0:?}: it must be non-empty, without '/' or NUL")]
    InvalidPrefix(String),
    /// The URL of an exchange cannot be a `WARC-Target-URI`.
    #[error("WARC-Target-URI must be non-empty without spaces or control characters: {0:?}")]
    InvalidTargetUri(String),
    /// A file would have replaced an existing one when renamed to its final name.
    #[error("cannot rename {} to {}: target exists", from.display(), to.display())]
    TargetExists { from: PathBuf, to: PathBuf },
    /// Compressing a record in memory failed.
    #[error("compressing a WARC record")]
    Compress(#[source] io::Error),
}

impl WarcError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| WarcError::Io {
            action,
            path,
            source,
        }
    }
}
