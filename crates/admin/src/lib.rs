//! frontierd's admin HTTP API, usable alone: the routes (`router.rs`, on axum) with typed
//! requests and answers (`request.rs`, `answers.rs`), what they show of a frontier
//! (`views.rs`), the server with its connection limits and timeouts (`server.rs`), the
//! stand-in that answers 503 while the store cannot be opened (`waiting.rs`), and the URL
//! list format that `POST /v1/urls`, the spool and `frontierd submit` share (`url_list.rs`,
//! `json_list.rs`); the daemon's counters at one instant as `/v1/stats` answers them
//! (`stats.rs`); and its client (`client.rs`): one request at a time, the typed reads of
//! `frontierd stats` and `hosts`, and a URL list of any size submitted in parts, two posted
//! at a time, with the lines that went in named when one is refused (`client/submit.rs`);
//! and the status page at `/` (`status_page.rs`, its files in `status/`, built in).
//!
//! What it must never do: decide anything about the crawl itself (it reads the frontier's
//! views and hands submissions to its [`Backend`]), log or count on its own (every event
//! goes to [`Backend::event`], which the daemon turns into its internal events), or answer
//! a request that reads the frontier on the connection's thread (a stuck store write must
//! not stop `/healthz` and `/metrics`). Its client prints nothing and decides no exit
//! status: it returns typed answers and errors that name the request and the reason.

pub mod answers;
mod backend;
pub mod client;
pub mod json_list;
pub mod request;
mod router;
pub mod server;
pub mod stats;
pub mod status_page;
pub mod url_list;
pub mod views;
pub mod waiting;

pub use backend::{Backend, BoxFuture, IntakeRefusal, PauseChange, ServerEvent, Tally, Timeout};
pub use server::{AdminServer, Limits};

/// Largest request body the server reads (a URL list); the client sends less per request.
pub const MAX_BODY: usize = 64 << 20;
