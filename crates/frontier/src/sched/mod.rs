//! The scheduler's rules: which URL of which host goes next, and what an outcome does to
//! a host. Pure: every function takes `now_ms` and in-memory state, and returns what to
//! do; nothing here reads or writes the store (the callers in `dispatch.rs` and
//! `complete.rs` persist what it decides).

pub mod aside;
pub mod dispatch;
pub mod failure;
pub mod gate;
pub(crate) mod host_table;
pub(crate) mod hosts;
pub mod ipgroup;
pub mod lease;
pub mod pending;
pub mod politeness;
pub mod rate;
pub mod records;
pub mod recrawl;
pub mod robots_gate;
pub(crate) mod scheduler;

#[cfg(test)]
mod tests;
