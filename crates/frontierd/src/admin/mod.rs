//! The admin API: the daemon's HTTP server (server.rs, requests checked by request.rs) and
//! the client the `submit`, `stats` and `hosts` commands use (client.rs, submit.rs); the IP
//! groups view (ip_groups.rs).

pub mod client;
mod hosts;
pub mod ip_groups;
pub mod request;
pub mod server;
pub mod submit;
pub mod waiting;

/// Largest request body the server reads (a URL list); the client sends less per request.
pub const MAX_BODY: usize = 64 << 20;
