//! frontierd's command line, usable alone: its grammar (`args.rs`, clap derive: the
//! subcommands, their arguments and help), the text the client commands print from the
//! admin API's and the broker's typed answers (`text.rs`: tables, the submission's progress
//! line and totals, the cluster's status), `publish`'s input list (`list.rs`), the manual
//! pages and shell completions generated from that grammar (`generate.rs`, for the Debian
//! package), and the robots.txt tools whole (`robots.rs`: `frontierd robots check|explain` need nothing but their files).
//!
//! What it must never do: talk to a daemon or a broker, or read configuration (the binary
//! runs those commands; this crate says what they accept and what they print). Its I/O: the
//! generator's files, the input files of `publish` and the robots.txt tools and standard output, and the
//! submission's progress line on standard error.

pub mod args;
pub mod generate;
pub mod list;
pub mod robots;
pub mod text;

pub use args::{
    ApiArgs, CheckArgs, Cli, ClusterCommand, Command, ConfigCommand, ExplainArgs, RobotsCommand,
};
