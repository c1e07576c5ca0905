//! frontierd: the daemon binary. Wiring, not logic.
fn main() {}
