//! `frontierd generate-man DIR` and `frontierd generate-completions DIR`: the manual pages
//! (clap_mangen) and the bash, zsh and fish completions (clap_complete) that the Debian
//! package ships, written by the release binary itself (deploy/deb/build.sh). Packaging tools,
//! not commands: they have their own small parser (`Tool`), tried before `Cli` when the first
//! argument names one, so they appear in no `--help`, manual page or completion.
//!
//! Why subcommands of the binary rather than a build script: the pages and completions come
//! from the very `clap::Command` the packaged binary parses ([`crate::Cli`]), so they cannot
//! describe another binary. The same choice as `rg --generate man` (ripgrep) and
//! `jj util mangen`.

use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// A file or directory the generator could not write, with the reason.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}", path.display())]
pub struct GenerateError {
    /// What was being done (`creating`, `writing manual pages into`, ...).
    pub what: String,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

type Result<T> = std::result::Result<T, GenerateError>;

/// Adds what was being done and where to an I/O error.
fn at<T>(r: std::io::Result<T>, what: &str, path: &Path) -> Result<T> {
    r.map_err(|source| GenerateError {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    })
}

/// The packaging tools' command line (`frontierd generate-man DIR`, ...).
#[derive(clap::Parser)]
#[command(name = "frontierd")]
pub enum Tool {
    /// Write frontierd(1) and one manual page per subcommand into DIR.
    GenerateMan { dir: PathBuf },
    /// Write the bash, zsh and fish completions into DIR.
    GenerateCompletions { dir: PathBuf },
}

impl Tool {
    /// The tool the command line asks for, when its first argument names one (its errors are
    /// clap's, as for any command); None for every other command line.
    pub fn from_args() -> Option<Tool> {
        let first = std::env::args_os().nth(1)?;
        matches!(
            first.to_str(),
            Some("generate-man" | "generate-completions")
        )
        .then(<Tool as clap::Parser>::parse)
    }
}

/// Runs a tool over the command line users see ([`crate::Cli`]). Returns the files written.
pub fn run(tool: Tool) -> Result<Vec<PathBuf>> {
    let cli = <crate::Cli as clap::CommandFactory>::command();
    match tool {
        Tool::GenerateMan { dir } => man_pages(cli, &dir),
        Tool::GenerateCompletions { dir } => completions(cli, &dir),
    }
}

/// Writes `frontierd.1` and one page per subcommand, nested ones included
/// (`frontierd-run.1`, `frontierd-robots-check.1`, ...), into `dir` (created if missing).
/// Returns the files written, sorted.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    at(std::fs::create_dir_all(dir), "creating", dir)?;
    at(
        clap_mangen::generate_to(cmd, dir),
        "writing manual pages into",
        dir,
    )?;
    written(dir, |name| name.ends_with(".1"))
}

/// The shells completions are written for, each with the file name clap_complete gives it
/// (`frontierd.bash`, `_frontierd`, `frontierd.fish`); the package installs them under the
/// names and directories Debian's bash-completion, zsh and fish read.
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Writes the bash, zsh and fish completions for `frontierd` into `dir` (created if
/// missing). Returns the files written.
pub fn completions(mut cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    at(std::fs::create_dir_all(dir), "creating", dir)?;
    let mut files = Vec::new();
    for shell in SHELLS {
        let file = at(
            clap_complete::generate_to(shell, &mut cmd, "frontierd", dir),
            &format!("writing the {shell} completion into"),
            dir,
        )?;
        files.push(file);
    }
    Ok(files)
}

fn written(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in at(std::fs::read_dir(dir), "reading", dir)? {
        let path = at(entry, "reading", dir)?.path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(&keep) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::Cli;

    fn names(files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn one_page_per_subcommand_and_none_for_the_packaging_tools() {
        let dir = tempfile::tempdir().unwrap();
        let pages = names(&man_pages(Cli::command(), dir.path()).unwrap());
        for page in [
            "frontierd.1",
            "frontierd-run.1",
            "frontierd-submit.1",
            "frontierd-stats.1",
            "frontierd-hosts.1",
            "frontierd-publish.1",
            "frontierd-config.1",
            "frontierd-config-check.1",
            "frontierd-robots-check.1",
            "frontierd-cluster.1",
        ] {
            assert!(pages.iter().any(|p| p == page), "{page} missing: {pages:?}");
        }
        assert!(
            pages.iter().all(|p| !p.contains("generate")),
            "a packaging tool got a page: {pages:?}"
        );
        let main = std::fs::read_to_string(dir.path().join("frontierd.1")).unwrap();
        assert!(main.contains(".TH frontierd 1"), "{main}");
        assert!(main.contains("submit") && !main.contains("generate"));
    }

    #[test]
    fn completions_for_bash_zsh_and_fish_without_the_packaging_tools() {
        let dir = tempfile::tempdir().unwrap();
        let files = completions(Cli::command(), dir.path()).unwrap();
        assert_eq!(
            names(&files),
            ["frontierd.bash", "_frontierd", "frontierd.fish"]
        );
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(text.contains("submit"), "{}", file.display());
            assert!(text.contains("seeds"), "{}", file.display());
            assert!(!text.contains("generate-man"), "{}", file.display());
        }
    }
}
