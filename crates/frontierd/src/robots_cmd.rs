//! `frontierd robots check|explain`: the robots.txt tools operators and other programs drive.
//!
//! The output of `check` is a contract: one line per URL (or per batch input line), starting
//! with `allowed` or `disallowed`, or `error: <reason>` for a malformed batch line. Exit 0
//! whatever the verdicts; exit 2 when a file cannot be read or the arguments are wrong.

use std::fs;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use base64::Engine;
use clap::{Args, Subcommand};
use robots_policy::{AgentPolicy, GroupChoice, RobotsTxt};

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

/// Robots.txt groups name bare product tokens, so an agent with other characters (a
/// version, a URL) can only fall back to `*`: say so, without changing the verdict.
fn warn_if_not_product_token(agent: &str) {
    let is_token = !agent.is_empty()
        && agent
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_');
    if !is_token {
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
        let verdict = policy.check_url(url);
        let word = if verdict.allowed {
            "allowed"
        } else {
            "disallowed"
        };
        let line = match verdict.rule.and_then(|id| policy.rule(id)) {
            Some(rule) => format!(
                "{word} {url} (line {}: {}: {})",
                rule.line,
                rule.kind.as_str(),
                rule.pattern
            ),
            None => format!("{word} {url} (no rule matches)"),
        };
        if writeln!(out, "{line}").is_err() {
            return Ok(ExitCode::SUCCESS); // Reader went away (e.g. `| head`).
        }
    }
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}

/// One batch input line, decoded.
struct BatchCase {
    agent: String,
    url: String,
    robots: Vec<u8>,
}

fn parse_batch_line(line: &[u8]) -> Result<BatchCase, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err("empty line".into());
    }
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let object = value
        .as_object()
        .ok_or_else(|| "not a JSON object".to_string())?;
    let text_field = |name: &str| -> Result<Option<&str>, String> {
        match object.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("field `{name}` must be a string")),
        }
    };
    let agent = text_field("agent")?.ok_or("missing field `agent`")?;
    let url = text_field("url")?.ok_or("missing field `url`")?;
    let robots = match (text_field("robots_b64")?, text_field("robots")?) {
        (Some(b64), _) => base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("field `robots_b64` is not valid base64: {e}"))?,
        (None, Some(text)) => text.as_bytes().to_vec(),
        (None, None) => return Err("missing field `robots` or `robots_b64`".into()),
    };
    Ok(BatchCase {
        agent: agent.to_string(),
        url: url.to_string(),
        robots,
    })
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
    // Consecutive cases often share one robots.txt and agent: compile once for them.
    let mut cached: Option<(Vec<u8>, String, AgentPolicy)> = None;
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
        let content = line.strip_suffix(b"\n").unwrap_or(&line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        let answer = match parse_batch_line(content) {
            Err(reason) => format!("error: {reason}"),
            Ok(case) => {
                let (_, _, policy) = match cached.take() {
                    Some(hit) if hit.0 == case.robots && hit.1 == case.agent => cached.insert(hit),
                    _ => {
                        let policy = AgentPolicy::parse(&case.robots, &case.agent);
                        cached.insert((case.robots, case.agent, policy))
                    }
                };
                if policy.check_url(&case.url).allowed {
                    "allowed"
                } else {
                    "disallowed"
                }
                .to_string()
            }
        };
        if writeln!(out, "{answer}").is_err() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let _ = out.flush();
    Ok(ExitCode::SUCCESS)
}

fn explain(path: &Path, agent: &str) -> Result<ExitCode> {
    let body = read_robots(path)?;
    warn_if_not_product_token(agent);
    let robots = RobotsTxt::parse(&body);
    let policy = robots.for_agent(agent);
    let mut text = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        text,
        "robots.txt: {} ({} bytes parsed{})",
        path.display(),
        robots.bytes_parsed(),
        if robots.bytes_ignored() > 0 {
            format!(
                ", {} bytes past the size limit ignored",
                robots.bytes_ignored()
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(text, "agent: {agent}");
    let describe = |lines: &[robots_policy::AgentLine]| {
        lines
            .iter()
            .map(|l| format!("line {} ({})", l.line, l.value))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match policy.group() {
        GroupChoice::Specific(lines) => {
            let _ = writeln!(
                text,
                "group: the groups naming {agent:?}, merged: {}",
                describe(lines)
            );
        }
        GroupChoice::Global(lines) => {
            let _ = writeln!(
                text,
                "group: no group names {agent:?}; the `*` groups apply, merged: {}",
                describe(lines)
            );
        }
        GroupChoice::NoGroup => {
            let _ = writeln!(
                text,
                "group: none applies (no group names {agent:?} and there is no `*` group): everything is allowed"
            );
        }
    }
    let rules: Vec<_> = policy.rules().collect();
    if rules.is_empty() {
        let _ = writeln!(text, "rules: none (everything is allowed)");
    } else {
        let _ = writeln!(
            text,
            "rules, in precedence order (the first that matches a URL decides; longest pattern first, allow wins ties):"
        );
        for (i, rule) in rules.iter().enumerate() {
            let origin = if rule.synthesized {
                " [derived: an allowed index.htm* page also allows its directory]"
            } else {
                ""
            };
            let _ = writeln!(
                text,
                "  {:>4}. line {:>5}  {:<8} {}{origin}",
                i + 1,
                rule.line,
                rule.kind.as_str(),
                rule.pattern
            );
        }
    }
    match policy.crawl_delay() {
        Some(delay) => {
            let _ = writeln!(text, "crawl-delay: {} s", delay.as_secs_f64());
        }
        None => {
            let _ = writeln!(text, "crawl-delay: none");
        }
    }
    if robots.sitemaps().is_empty() {
        let _ = writeln!(text, "sitemaps: none");
    } else {
        let _ = writeln!(text, "sitemaps:");
        for sitemap in robots.sitemaps() {
            let _ = writeln!(text, "  {sitemap}");
        }
    }
    if robots.diagnostics().is_empty() {
        let _ = writeln!(text, "ignored or repaired lines: none");
    } else {
        let _ = writeln!(text, "ignored or repaired lines:");
        for d in robots.diagnostics() {
            let _ = writeln!(text, "  line {:>5}: {}", d.line, d.kind);
        }
        if robots.diagnostics_omitted() > 0 {
            let _ = writeln!(text, "  ... and {} more", robots.diagnostics_omitted());
        }
    }
    let _ = io::stdout().lock().write_all(text.as_bytes());
    Ok(ExitCode::SUCCESS)
}
