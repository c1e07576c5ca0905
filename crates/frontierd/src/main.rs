//! frontierd: the daemon binary. Wiring, not logic: command-line parsing here, every
//! decision in the library crates.

mod admin;
/// The URL list format, the admin API's (`crate::url_list::…`).
use frontierd_admin::url_list;
/// The configuration, from its own crate (`crate::config::…` everywhere in the binary).
use frontierd_config as config;
/// The metrics registry (`crate::metrics::…`).
use frontierd_metrics as metrics;
mod cluster_cmd;
mod daemon;
mod generate;
mod grpc;
mod internal_events;
mod log_filter;
mod robots_cmd;
mod stdout;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};

use crate::stdout::{out, StdoutClosed};

/// A politeness-aware crawler frontier daemon.
#[derive(Parser)]
#[command(name = "frontierd", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check URLs against a robots.txt, or explain what it says to a crawler.
    #[command(subcommand)]
    Robots(robots_cmd::RobotsCommand),
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
        after_help = "Exit status:\n  0  every line accepted, or already known                             (duplicate)\n  1  some lines rejected (listed on stdout)\n  2                              error: nothing, or only the lines named in the message, submitted"
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
    Cluster(cluster_cmd::ClusterCommand),
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
enum ConfigCommand {
    /// Check a configuration file without starting (exit 2 on any error).
    Check { file: PathBuf },
    /// Print the embedded default configuration.
    Default,
}

#[derive(clap::Args)]
struct ApiArgs {
    /// Configuration file to read [admin] from (default: the embedded default).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Admin API address (overrides the configuration), e.g. 127.0.0.1:8470.
    #[arg(long)]
    admin: Option<String>,
}

/// mimalloc instead of glibc malloc: why, and its settings, in the heap crate (crates/heap).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // the packaging tools, outside the command line users see (generate.rs)
    if let Some(tool) = generate::Tool::from_args() {
        return exit_code(generate::run(tool, Cli::command()).and_then(print_paths));
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Robots(command) => robots_cmd::run(command),
        Command::Run { config, seeds } => run(config.as_deref(), seeds),
        Command::Config(ConfigCommand::Check { file }) => {
            match config::Config::load(Some(&file)).and_then(|c| c.check(state_dir().as_deref())) {
                Ok(settings) => {
                    for warning in settings.warnings() {
                        eprintln!("frontierd: warning: {warning}");
                    }
                    out(&format!("{}: ok\n", file.display())).map(|()| ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("frontierd: config error: {e}");
                    Ok(ExitCode::from(2))
                }
            }
        }
        Command::Config(ConfigCommand::Default) => {
            out(config::DEFAULT_TOML).map(|()| ExitCode::SUCCESS)
        }
        Command::Submit { file, api } => client(api, |t| admin::submit::submit(t, file)),
        Command::Publish {
            file,
            config,
            retry_for,
        } => cluster_cmd::publish(file, config.as_deref(), retry_for),
        Command::Cluster(command) => cluster_cmd::run(command),
        Command::Stats { watch, api } => client(api, move |t| admin::commands::stats(t, watch)),
        Command::Hosts {
            ip: true,
            limit,
            api,
            ..
        } => client(api, move |t| admin::ip_groups::print(t, limit)),
        Command::Hosts {
            host,
            state,
            limit,
            api,
            ..
        } => client(api, move |t| admin::commands::hosts(t, host, state, limit)),
    };
    exit_code(result)
}

/// What a command's result means to the shell.
fn exit_code(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        // `| head` has what it wanted: not an error
        Err(error) if error.downcast_ref::<StdoutClosed>().is_some() => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("frontierd: error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// One line per file written (the packaging tools).
fn print_paths(files: Vec<PathBuf>) -> Result<ExitCode> {
    for file in files {
        out(&format!("{}\n", file.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn state_dir() -> Option<String> {
    std::env::var("STATE_DIRECTORY").ok()
}

fn run(config_path: Option<&Path>, seeds: Option<PathBuf>) -> Result<ExitCode> {
    // before the runtime's threads exist: mimalloc's options are not synchronized
    frontierd_heap::tune_allocator();
    let settings =
        match config::Config::load(config_path).and_then(|c| c.check(state_dir().as_deref())) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("frontierd: config error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
    init_logging(&settings);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(daemon::run::run(settings, seeds))?;
    // in-flight tasks abandoned after the grace period must not hold the exit
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(ExitCode::SUCCESS)
}

fn init_logging(s: &config::Settings) {
    use tracing_subscriber::EnvFilter;
    let text = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|t| EnvFilter::try_new(t).is_ok())
        .unwrap_or_else(|| format!("{},sled=warn", s.raw.log.level));
    let filter = EnvFilter::new(&text);
    let builder = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    // the filter is reloadable: url-frontier's SetLogLevel changes it (log_filter.rs)
    if s.json_logs {
        let builder = builder
            .json()
            .with_env_filter(filter)
            .with_filter_reloading();
        let handle = builder.reload_handle();
        log_filter::install(
            &text,
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())),
        );
        builder.init();
    } else {
        let builder = builder.with_env_filter(filter).with_filter_reloading();
        let handle = builder.reload_handle();
        log_filter::install(
            &text,
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())),
        );
        builder.init();
    }
}

fn client<F, Fut>(api: ApiArgs, f: F) -> Result<ExitCode>
where
    F: FnOnce(frontierd_admin::client::Target) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode>>,
{
    let settings = match config::Config::load(api.config.as_deref())
        .and_then(|c| c.check(state_dir().as_deref()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("frontierd: config error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let addr = match api.admin {
        Some(a) => a,
        None => std::fs::read_to_string(settings.data_dir.join("admin.addr"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| settings.admin_listen.to_string()),
    };
    let token = match &settings.token_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading admin.token_file {}", p.display()))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(f(frontierd_admin::client::Target { addr, token }))
}
