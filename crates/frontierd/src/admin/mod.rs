//! The admin API in the binary: the daemon as the API's [`frontierd_admin::Backend`]
//! (backend.rs), and the `submit`, `stats` and `hosts` commands run (submit.rs,
//! commands.rs). The server, its routes, its answers and its client are the
//! `frontierd-admin` crate's; what the commands print is `frontierd-cli`'s.

pub mod backend;
pub mod commands;
pub mod submit;
