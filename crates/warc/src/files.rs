//! File operations shared by the writer and the recovery.

use std::fs::{self, File};
use std::path::Path;

use crate::WarcError;

/// Renames `from` to `to`, refusing to replace an existing `to`.
pub(crate) fn rename_no_clobber(from: &Path, to: &Path) -> Result<(), WarcError> {
    if to.exists() {
        return Err(WarcError::TargetExists {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
    }
    fs::rename(from, to).map_err(WarcError::io("renaming", from))
}

pub(crate) fn sync_dir(dir: &Path) {
    // Makes the rename durable; best effort (not every file system allows it).
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
