//! `frontierd robots check|explain`: the robots.txt tools operators and other programs drive,
//! whole (they need no daemon and no configuration). What they say is robots-policy's
//! ([`robots_policy::report`]); here, the files read and the lines printed.
//!
//! The output of `check` is a contract: one line per URL (or per batch input line), starting
//! with `allowed` or `disallowed`, or `error: <reason>` for a malformed batch line. Exit 0
//! whatever the verdicts; exit 2 when a file cannot be read or the arguments are wrong.

use std::fs;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::RobotsCommand;
use robots_policy::report::{self, BatchChecker};
use robots_policy::AgentPolicy;

/// Runs a `robots` subcommand: exit 0 whatever the verdicts, an error (exit 2 for the
/// caller) when a file cannot be read or the arguments are wrong.
pub fn run(command: RobotsCommand) -> Result<ExitCode> {
    match command {
        RobotsCommand::Check(args) => match args.batch {
            Some(batch) => check_batch(&batch),
            None => match (args.robots, args.agent) {
                (Some(robots), Some(agent)) => check_urls(&robots, &agent, &args.urls),
                _ => bail!("--robots and --agent are required without --batch"),
            },
        },
        RobotsCommand::Explain(args) => explain(&args.robots, &args.agent),
    }
}

fn read_robots(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).with_context(|| format!("cannot read robots.txt file {}", path.display()))
}

/// An agent that is not a bare product token can only fall back to `*`: say so, without
/// changing the verdict.
fn warn_if_not_product_token(agent: &str) {
    if !report::is_product_token(agent) {
        eprintln!(
            "frontierd: note: agent {agent:?} is not a bare product token ([A-Za-z_-]); \
             no user-agent line can name it, so only `*` groups apply"
        );
    }
}

fn check_urls(robots: &Path, agent: &str, urls: &[String]) -> Result<ExitCode> {
    let body = read_robots(robots)?;
    warn_if_not_product_token(agent);
    let policy = AgentPolicy::parse(&body, agent);
    let mut out = BufWriter::new(io::stdout().lock());
    for url in urls {
        if writeln!(out, "{}", report::check_line(&policy, url)).is_err() {
            return Ok(ExitCode::SUCCESS); // Reader went away (e.g. `| head`).
        }
    }
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}

fn check_batch(path: &Path) -> Result<ExitCode> {
    let input: Box<dyn Read> = if path == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        Box::new(
            fs::File::open(path)
                .with_context(|| format!("cannot read batch file {}", path.display()))?,
        )
    };
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut checker = BatchChecker::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).with_context(|| {
            format!("reading batch file {} after line {number}", path.display())
        })?;
        if read == 0 {
            break;
        }
        number += 1;
        if writeln!(out, "{}", checker.answer(&line)).is_err() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}

fn explain(path: &Path, agent: &str) -> Result<ExitCode> {
    let body = read_robots(path)?;
    warn_if_not_product_token(agent);
    let text = report::explain(&body, agent, &path.display().to_string());
    let _ = io::stdout().lock().write_all(text.as_bytes());
    Ok(ExitCode::SUCCESS)
}
