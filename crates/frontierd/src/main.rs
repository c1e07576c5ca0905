//! frontierd: the daemon binary. Wiring, not logic: command-line parsing here, every
//! decision in the library crates.

mod links;
mod robots_cmd;
mod robots_fetch;
mod warc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Robots(command) => robots_cmd::run(command),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("frontierd: error: {error:#}");
            ExitCode::from(2)
        }
    }
}
