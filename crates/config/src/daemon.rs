//! What `frontierd run` opens, built from the settings: the frontier as the daemon runs it
//! (robots.txt fetches capped beside the workers), the WARC writer's configuration, the
//! directories the free-space watch measures, and the admin API's token from its file's contents (refused when the API would be open to
//! others without one). The daemon reads the file and opens everything.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::{exposure, Settings};

/// The admin API would listen beyond loopback without a token (and
/// `admin.allow_unauthenticated` is not set).
#[derive(Debug, thiserror::Error)]
#[error("{}", exposure::unauthenticated_listener(*.0))]
pub struct Unauthenticated(pub SocketAddr);

impl Settings {
    /// [`Settings::frontier_config`] as `frontierd run` opens it: robots.txt fetches take at
    /// most half the workers, so that with many new hosts the pages of the hosts whose rules
    /// are known keep flowing beside them (no robots.txt wall); workers that no page is
    /// ready for fetch the robots.txt of hosts waiting in line, up to seven eighths of them
    /// (an eighth, one worker at least, is kept for the pages that come ready while those
    /// fetches run); with no workers (a pure frontier, the daemon fetching only robots.txt
    /// for external fetchers) `grpc.robots_in_flight`.
    pub fn daemon_frontier_config(&self) -> frontier::FrontierConfig {
        let mut f = self.frontier_config();
        let w = u64::from(self.raw.fetch.workers);
        f.max_robots_in_flight = Some(match w {
            0 => u64::from(self.raw.grpc.robots_in_flight),
            w => (w / 2).max(1),
        });
        if w > 0 {
            // an eighth, and one worker at least, stays for pages
            f.max_robots_in_flight_spare = Some((w - (w / 8).max(1)).max(1));
        }
        f
    }

    /// The WARC writer's configuration: `[warc]` in the WARC directory.
    pub fn warc_config(&self) -> warc::WarcConfig {
        let w = &self.raw.warc;
        let mut c = warc::WarcConfig::new(&self.warc_dir);
        c.prefix = w.prefix.clone();
        c.max_file_size = w.max_file_size;
        c.gzip_level = w.gzip_level;
        c.deflate_compressed_payloads = w.deflate_compressed_payloads;
        if !w.operator.is_empty() {
            c.operator = Some(w.operator.clone());
        }
        c
    }

    /// The directories the free-space watch measures, by their label in metrics: the
    /// store's, the WARC directory and the crawl log's (`.` for a bare file name).
    pub fn watched_dirs(&self) -> Vec<(&'static str, PathBuf)> {
        let log_dir = self
            .crawl_log
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        vec![
            ("store", self.store_path.clone()),
            ("warc", self.warc_dir.clone()),
            ("crawl_log", log_dir),
        ]
    }

    /// The admin API's bearer token, from the contents of `admin.token_file` when one is
    /// set (trimmed; an empty file is no token). Refused when the API would listen beyond
    /// loopback without one, unless `admin.allow_unauthenticated` (an empty file:
    /// `config check` cannot see that).
    pub fn admin_token(&self, file: Option<&str>) -> Result<Option<String>, Unauthenticated> {
        let token = file.map(str::trim).filter(|t| !t.is_empty());
        if token.is_none()
            && !exposure::is_loopback(self.admin_listen)
            && !self.raw.admin.allow_unauthenticated
        {
            return Err(Unauthenticated(self.admin_listen));
        }
        Ok(token.map(str::to_string))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::Config;

    fn settings(text: &str) -> crate::Settings {
        Config::parse(text, "t").unwrap().check(None).unwrap()
    }

    #[test]
    fn robots_fetches_take_at_most_half_the_workers() {
        let cap = |text| settings(text).daemon_frontier_config().max_robots_in_flight;
        assert_eq!(cap("[fetch]\nworkers = 10\n"), Some(5));
        assert_eq!(cap("[fetch]\nworkers = 1\n"), Some(1));
        assert_eq!(
            cap("[fetch]\nworkers = 0\n[grpc]\nlisten = \"127.0.0.1:0\"\nrobots_in_flight = 3\n"),
            Some(3)
        );
        // workers no page is ready for take robots.txt up to seven eighths of them
        let spare = |text| {
            settings(text)
                .daemon_frontier_config()
                .max_robots_in_flight_spare
        };
        assert_eq!(spare("[fetch]\nworkers = 1000\n"), Some(875));
        assert_eq!(spare("[fetch]\nworkers = 4\n"), Some(3));
        assert_eq!(spare("[fetch]\nworkers = 1\n"), Some(1));
        assert_eq!(
            spare("[fetch]\nworkers = 0\n[grpc]\nlisten = \"127.0.0.1:0\"\n"),
            None
        );
    }

    #[test]
    fn warc_config_follows_the_warc_section() {
        let c = settings("[warc]\nprefix = \"x\"\noperator = \"ops@example.org\"\n").warc_config();
        assert_eq!(c.prefix, "x");
        assert_eq!(c.operator.as_deref(), Some("ops@example.org"));
        assert_eq!(settings("").warc_config().operator, None);
    }

    #[test]
    fn the_crawl_logs_directory_is_watched() {
        let dirs = settings("[crawl_log]\npath = \"crawl.log\"\n").watched_dirs();
        let labels: Vec<_> = dirs.iter().map(|(l, _)| *l).collect();
        assert_eq!(labels, ["store", "warc", "crawl_log"]);
        assert_eq!(dirs[2].1, PathBuf::from("."));
    }

    #[test]
    fn a_token_is_needed_beyond_loopback() {
        let local = settings("");
        assert_eq!(local.admin_token(None).unwrap(), None);
        assert_eq!(
            local.admin_token(Some(" s3cret\n")).unwrap().as_deref(),
            Some("s3cret")
        );
        let open =
            settings("[admin]\nlisten = \"0.0.0.0:0\"\ntoken_file = \"/etc/frontierd/token\"\n");
        // the file named, but empty: only seen once it is read
        let refused = open.admin_token(Some("  \n")).unwrap_err();
        assert!(refused.to_string().contains("admin.token_file is not set"));
        assert_eq!(open.admin_token(Some("t")).unwrap().as_deref(), Some("t"));
        let trusted = settings("[admin]\nlisten = \"0.0.0.0:0\"\nallow_unauthenticated = true\n");
        assert_eq!(trusted.admin_token(None).unwrap(), None);
    }
}
