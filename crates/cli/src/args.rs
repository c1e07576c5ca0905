//! The grammar of `frontierd`'s command line: every subcommand, its arguments and their help
//! (which the manual pages and completions are generated from, generate.rs).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// A politeness-aware crawler frontier daemon.
#[derive(Parser)]
#[command(name = "frontierd", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Check URLs against a robots.txt, or explain what it says to a crawler.
    #[command(subcommand)]
    Robots(RobotsCommand),
    /// Run the daemon (the embedded default configuration when --config is not given).
    Run {
        /// Configuration file (TOML).
        #[arg(long)]
        config: Option<PathBuf>,
        /// A file of URLs (one per line, # comments) submitted at start.
        #[arg(long)]
        seeds: Option<PathBuf>,
    },
    /// Configuration tools.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Hand a URL list (FILE, or - for stdin) to a running daemon through its API.
    ///
    /// The list is read and sent in parts (10 000 lines or 4 MiB each), so a file of any size
    /// goes through. Rejected lines are printed with their line numbers; progress is shown on
    /// stderr when it is a terminal.
    #[command(
        after_help = "Exit status:\n  0  every line accepted, or already known (duplicate)\n  1  some lines rejected (listed on stdout)\n  2  error: nothing, or only the lines named in the message, submitted"
    )]
    Submit {
        /// A URL list: one URL per line, blank lines and # comments skipped.
        file: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Publish a URL list (FILE, or - for stdin) to the cluster's shard subjects ([cluster]).
    #[command(
        after_help = "Exit status:\n  0  every URL published (acknowledged by the broker)\n  1  some lines rejected (listed on stdout)\n  2  error: the message says which lines were published"
    )]
    Publish {
        /// A URL list: one URL per line, blank lines and # comments skipped.
        file: String,
        /// Configuration file with the [cluster] section.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Keep retrying URLs the broker did not acknowledge (and the streams, while a new
        /// JetStream cluster elects its leaders) this long before giving up.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        retry_for: Duration,
    },
    /// Multi-node tools ([cluster]).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Show a running daemon's counters.
    Stats {
        /// Refresh every 2 seconds until interrupted.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List hosts, or show one host in detail.
    Hosts {
        host: Option<String>,
        /// Only hosts whose robots state is this (unknown, fresh, stale, 5xx-disallow, fallback).
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Show the IP groups instead: hosts sharing an address, its requests in flight and
        /// next allowed time.
        #[arg(long, conflicts_with_all = ["host", "state"])]
        ip: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Check a configuration file without starting (exit 2 on any error).
    Check { file: PathBuf },
    /// Print the embedded default configuration.
    Default,
}

#[derive(Args)]
pub struct ApiArgs {
    /// Configuration file to read [admin] from (default: the embedded default).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Admin API address (overrides the configuration), e.g. 127.0.0.1:8470.
    #[arg(long)]
    pub admin: Option<String>,
}

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
    pub robots: Option<PathBuf>,
    /// The crawler's product token, e.g. `googlebot`. Compared as given, like Google's library.
    #[arg(long, value_name = "AGENT", required_unless_present = "batch")]
    pub agent: Option<String>,
    /// JSON Lines file (or `-` for standard input); each line holds `agent`, `url`, and
    /// `robots` (text) or `robots_b64` (base64 of the exact bytes; wins over `robots`).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["robots", "agent", "urls"])]
    pub batch: Option<PathBuf>,
    /// URLs to check (already percent-encoded, as a crawler sends them).
    #[arg(value_name = "URL", required_unless_present = "batch")]
    pub urls: Vec<String>,
}

#[derive(Args)]
pub struct ExplainArgs {
    /// The robots.txt file.
    #[arg(long, value_name = "FILE")]
    pub robots: PathBuf,
    /// The crawler's product token.
    #[arg(long, value_name = "AGENT")]
    pub agent: String,
}

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Shards, their owners and backlogs, and each node's rates, as the broker has them.
    Status {
        /// Configuration file with the [cluster] section (default: the embedded default).
        #[arg(long)]
        config: Option<PathBuf>,
    },
}
