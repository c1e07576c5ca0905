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
mod grpc;
mod internal_events;
mod log_filter;
mod stdout;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use frontierd_cli::generate;
use frontierd_cli::{ApiArgs, Cli, Command, ConfigCommand};

use crate::stdout::{out, StdoutClosed};

/// mimalloc instead of glibc malloc: why, and its settings, in the heap crate (crates/heap).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // the packaging tools, outside the command line users see (frontierd-cli's generate.rs)
    if let Some(tool) = generate::Tool::from_args() {
        return exit_code(
            generate::run(tool)
                .map_err(anyhow::Error::from)
                .and_then(print_paths),
        );
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Robots(command) => frontierd_cli::robots::run(command),
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
        } => client(api, move |t| admin::commands::ip_groups(t, limit)),
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
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{fmt, reload, EnvFilter};
    let text = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|t| EnvFilter::try_new(t).is_ok())
        .unwrap_or_else(|| format!("{},sled=warn", s.raw.log.level));
    // the filter is reloadable: url-frontier's SetLogLevel changes it (log_filter.rs)
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&text));
    log_filter::install(
        &text,
        Box::new(move |f| handle.reload(f).map_err(|e| e.to_string())),
    );
    let lines = fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let lines = match s.json_logs {
        true => lines.json().boxed(),
        false => lines.boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .init();
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
