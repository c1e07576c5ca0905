//! The daemon's log filter, changeable at run time: url-frontier's SetLogLevel sets one
//! target's level (or the default) through the reload handle installed at start.

use std::sync::{Mutex, OnceLock};

use tracing_subscriber::EnvFilter;

use crate::config::log_filter::LogDirectives;

type Apply = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

struct Reloadable {
    directives: Mutex<LogDirectives>,
    apply: Apply,
}

static RELOADABLE: OnceLock<Reloadable> = OnceLock::new();

/// Record the filter the subscriber started with and how to replace it.
pub fn install(filter: &str, apply: Apply) {
    let _ = RELOADABLE.set(Reloadable {
        directives: Mutex::new(LogDirectives::parse(filter)),
        apply,
    });
}

/// Log `target` (a tracing target: a crate or module path such as `frontier` or
/// `frontierd::grpc`; empty: the default level) at `level` from now on. Returns the
/// filter now in force.
pub fn set_level(target: &str, level: &str) -> Result<String, String> {
    let r = RELOADABLE
        .get()
        .ok_or_else(|| "the log filter is not reloadable in this process".to_string())?;
    let mut d = r.directives.lock().unwrap_or_else(|e| e.into_inner());
    let next = d.with_level(target, level)?;
    let text = next.render();
    let filter = EnvFilter::try_new(&text).map_err(|e| format!("filter {text:?}: {e}"))?;
    (r.apply)(filter)?;
    *d = next;
    Ok(text)
}
