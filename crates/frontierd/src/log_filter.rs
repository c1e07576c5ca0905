//! The daemon's log filter, changeable at run time: url-frontier's SetLogLevel sets one
//! target's level (or the default) through the reload handle installed at start.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::EnvFilter;

type Apply = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

struct Reloadable {
    /// Directives in force: target ("" = the default level) -> level.
    directives: Mutex<BTreeMap<String, String>>,
    apply: Apply,
}

static RELOADABLE: OnceLock<Reloadable> = OnceLock::new();

/// Split a filter string (`info,sled=warn,frontier::dispatch=debug`) into target ->
/// level; a directive without `=` is the default level.
fn parse(filter: &str) -> BTreeMap<String, String> {
    filter
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| match d.rsplit_once('=') {
            Some((target, level)) => (target.to_string(), level.to_string()),
            None => (String::new(), d.to_string()),
        })
        .collect()
}

fn render(directives: &BTreeMap<String, String>) -> String {
    directives
        .iter()
        .map(|(t, l)| {
            if t.is_empty() {
                l.clone()
            } else {
                format!("{t}={l}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Record the filter the subscriber started with and how to replace it.
pub fn install(filter: &str, apply: Apply) {
    let _ = RELOADABLE.set(Reloadable {
        directives: Mutex::new(parse(filter)),
        apply,
    });
}

/// Log `target` (a tracing target: a crate or module path such as `frontier` or
/// `frontierd::grpc`; empty: the default level) at `level` from now on. Returns the
/// filter now in force.
pub fn set_level(target: &str, level: &str) -> Result<String, String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    if !target.chars().all(ok) {
        return Err(format!(
            "not a tracing target (a crate or module path such as frontier or frontierd::grpc; Java package names do not apply): {target:?}"
        ));
    }
    let r = RELOADABLE
        .get()
        .ok_or_else(|| "the log filter is not reloadable in this process".to_string())?;
    let mut d = r.directives.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = d.clone();
    next.insert(target.to_string(), level.to_string());
    let text = render(&next);
    let filter = EnvFilter::try_new(&text).map_err(|e| format!("filter {text:?}: {e}"))?;
    (r.apply)(filter)?;
    *d = next;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_parse_and_render_with_a_target_replaced() {
        let mut d = parse("info,sled=warn");
        assert_eq!(render(&d), "info,sled=warn");
        d.insert("frontier::dispatch".into(), "debug".into());
        d.insert(String::new(), "warn".into());
        assert_eq!(render(&d), "warn,frontier::dispatch=debug,sled=warn");
    }
}
