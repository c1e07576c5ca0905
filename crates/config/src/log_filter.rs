//! The log filter's directives (`[log] level`, `RUST_LOG`, url-frontier's SetLogLevel):
//! `info,sled=warn,frontier::dispatch=debug` as target -> level, one target's level changed
//! at a time. The binary builds the tracing filter from [`LogDirectives::render`].

use std::collections::BTreeMap;

/// Directives in force: target ("" = the default level) -> level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogDirectives(BTreeMap<String, String>);

impl LogDirectives {
    /// Split a filter string into target -> level; a directive without `=` is the default
    /// level.
    pub fn parse(filter: &str) -> LogDirectives {
        LogDirectives(
            filter
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| match d.rsplit_once('=') {
                    Some((target, level)) => (target.to_string(), level.to_string()),
                    None => (String::new(), d.to_string()),
                })
                .collect(),
        )
    }

    /// The filter string, the default level first.
    pub fn render(&self) -> String {
        self.0
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

    /// These directives with `target` (a tracing target: a crate or module path such as
    /// `frontier` or `frontierd::grpc`; empty: the default level) at `level`, or why `target`
    /// is not one.
    pub fn with_level(&self, target: &str, level: &str) -> Result<LogDirectives, String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
        if !target.chars().all(ok) {
            return Err(format!(
                "not a tracing target (a crate or module path such as frontier or frontierd::grpc; Java package names do not apply): {target:?}"
            ));
        }
        let mut next = self.clone();
        next.0.insert(target.to_string(), level.to_string());
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_parse_and_render_with_a_target_replaced() {
        let d = LogDirectives::parse("info,sled=warn");
        assert_eq!(d.render(), "info,sled=warn");
        let d = d.with_level("frontier::dispatch", "debug").unwrap();
        let d = d.with_level("", "warn").unwrap();
        assert_eq!(d.render(), "warn,frontier::dispatch=debug,sled=warn");
    }

    #[test]
    fn a_java_package_name_is_not_a_target() {
        let d = LogDirectives::parse("info");
        let e = d.with_level("com.digitalpebble.stormcrawler", "debug");
        assert!(e.unwrap_err().contains("not a tracing target"));
    }
}
