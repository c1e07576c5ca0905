//! Standard output for the commands: written without `println!` (which panics on a closed
//! pipe), and a reader that went away (`| head`) ends the command quietly.

use anyhow::Result;

/// Standard output was closed by its reader (`frontierd stats --watch | head`): the command
/// ends quietly, exit 0.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// Write to standard output (not `println!`, which panics on a closed pipe).
pub fn out(text: &str) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => anyhow::Error::new(StdoutClosed),
            _ => anyhow::Error::new(e).context("writing to standard output"),
        })
}
