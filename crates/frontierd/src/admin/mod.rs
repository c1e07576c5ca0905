//! The admin API in the binary: the daemon as the API's [`frontierd_admin::Backend`]
//! (backend.rs), and the client the `submit`, `stats` and `hosts` commands use (client.rs,
//! submit.rs, ip_groups.rs). The server, its routes and its answers are the
//! `frontierd-admin` crate's.

pub mod backend;
pub mod client;
pub mod ip_groups;
pub mod submit;

pub use frontierd_admin::MAX_BODY;
