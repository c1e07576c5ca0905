//! robots-policy: everything frontierd knows about robots.txt, as pure functions and plain data.
//!
//! It owns the parser (bytes in, never a failure), the compiled per-agent matcher that gives
//! the same verdicts as Google's open-source robotstxt library, and the per-origin robots
//! state machine (`state`), whose transitions take `now` as an argument. It also owns what
//! `frontierd robots check|explain` say (`report`): the verdict lines, the answer to each
//! line of a JSON Lines batch, the explain report, as strings the command prints.
//!
//! It must never do I/O, spawn threads, read clocks or depend on another frontierd crate.

mod matcher;
mod parser;
/// A naive model of Google's matcher, for differential tests and benchmarks only.
#[cfg(feature = "reference")]
#[doc(hidden)]
pub mod reference;
pub mod report;
mod robots_txt;
pub mod state;

pub use matcher::{
    glob_match, path_params_query, AgentLine, AgentPolicy, GroupChoice, RuleKind, RuleView, Verdict,
};
pub use parser::{
    Diagnostic, DiagnosticKind, Field, ParseOptions, DEFAULT_MAX_BYTES, HARD_MAX_BYTES,
    MAX_DIAGNOSTICS, MAX_LINE_BYTES,
};
pub use robots_txt::RobotsTxt;
