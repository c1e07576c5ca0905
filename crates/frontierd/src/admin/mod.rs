//! The admin API in the binary: the daemon as the API's [`frontierd_admin::Backend`]
//! (backend.rs), and the printing and exit status of the `submit`, `stats` and `hosts`
//! commands (submit.rs, commands.rs, ip_groups.rs). The server, its routes, its answers
//! and its client are the `frontierd-admin` crate's.

pub mod backend;
pub mod commands;
pub mod ip_groups;
pub mod submit;
