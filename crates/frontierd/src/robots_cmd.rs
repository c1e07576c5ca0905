//! `frontierd robots check|explain`: the robots.txt tools operators and other programs drive.
//! What they say is robots-policy's ([`robots_policy::report`]); here, the arguments, the
//! files read and the lines printed.
//!
//! The output of `check` is a contract: one line per URL (or per batch input line), starting
//! with `allowed` or `disallowed`, or `error: <reason>` for a malformed batch line. Exit 0
//! whatever the verdicts; exit 2 when a file cannot be read or the arguments are wrong.

use std::fs;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use robots_policy::report::{self, BatchChecker};
use robots_policy::AgentPolicy;

#[derive(Subcommand)]
pub enum RobotsCommand {
    /// Print `allowed` or `disallowed` for each URL.
    Check(CheckArgs),
    /// Show the group chosen for an agent, its rules in precedence order, crawl-delay,
    /// sitemaps, and every ignored or repaired line with the reason.
    Explain(ExplainArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// The robots.txt file (its exact bytes are used).
    #[arg(long, value_name = "FILE", required_unless_present = "batch")]
    robots: Option<PathBuf>,
    /// The crawler's product token, e.g. `googlebot`. Compared as given, like Google's library.
    #[arg(long, value_name = "AGENT", required_unless_present = "batch")]
    agent: Option<String>,
    /// JSON Lines file (or `-` for standard input); each line holds `agent`, `url`, and
    /// `robots` (text) or `robots_b64` (base64 of the exact bytes; wins over `robots`).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["robots", "agent", "urls"])]
    batch: Option<PathBuf>,
    /// URLs to check (already percent-encoded, as a crawler sends them).
    #[arg(value_name = "URL", required_unless_present = "batch")]
    urls: Vec<String>,
}

#[derive(Args)]
pub struct ExplainArgs {
    /// The robots.txt file.
    #[arg(long, value_name = "FILE")]
    robots: PathBuf,
    /// The crawler's product token.
    #[arg(long, value_name = "AGENT")]
    agent: String,
}

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
