//! Checks of a configuration that are about safety and etiquette rather than syntax: who
//! can reach the admin API, and whether site owners can reach the operator. The listener
//! rule itself is exposure.rs's, which config.rs applies as an error.

use crate::exposure::is_loopback;
use crate::Settings;

/// Files the daemon holds open besides its sockets to sites: the store, WARC files, the
/// crawl log, listeners and their clients, the broker.
const OPEN_FILES_BESIDES_SITES: u64 = 512;

/// Kept connections a worker when `fetch.max_pooled_connections` is unset: a host comes
/// back after the others in its turn, and the hosts a crawl goes round grow with its
/// workers (docs/benchmarks.md, "Many slow hosts": 1 000 workers over 10 000 slow hosts).
const POOLED_CONNECTIONS_PER_WORKER: u32 = 16;

/// The contact part of the default user agent: a placeholder nobody can be reached at.
const PLACEHOLDER_CONTACTS: [&str; 3] = ["example.org", "example.com", "example.net"];

impl Settings {
    /// What is allowed but probably not meant: logged as WARN at start and printed by
    /// `frontierd config check` (which still exits 0).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let ua = &self.raw.fetch.user_agent;
        let contact = ua
            .split(|c: char| c.is_whitespace() || "()+;".contains(c))
            .find(|w| w.contains("://") || w.contains('@'))
            .unwrap_or("");
        let contact_host = contact
            .split("://")
            .last()
            .unwrap_or("")
            .split(['/', ':', '?'])
            .next()
            .unwrap_or("")
            .rsplit('@')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if PLACEHOLDER_CONTACTS
            .iter()
            .any(|p| contact_host == *p || contact_host.ends_with(&format!(".{p}")))
        {
            out.push(format!(
                "fetch.user_agent = {ua:?}: the contact {contact} is a placeholder; site \
                 owners cannot reach you. Set your own contact URL or e-mail"
            ));
        }
        if self.raw.admin.allow_unauthenticated
            && self.token_file.is_none()
            && !is_loopback(self.admin_listen)
        {
            out.push(format!(
                "admin.listen = \"{}\" without a token (admin.allow_unauthenticated = true): \
                 anyone who can connect can add URLs and pause hosts",
                self.admin_listen
            ));
        }
        out.extend(crate::robots_timing_warnings(&self.raw));
        out.extend(self.raw.sitemaps.warnings());
        out
    }

    /// Idle connections the pool keeps at most: `fetch.max_pooled_connections`, or when
    /// unset 16 a worker and never below the fetcher's
    /// default (1 024), so that a crawl's rotation of hosts, which grows with its workers,
    /// finds its connections again (a kept one holds about 4 KiB).
    pub fn max_pooled_connections(&self) -> u32 {
        let f = &self.raw.fetch;
        f.max_pooled_connections
            .unwrap_or_else(|| self.hosts_in_rotation())
    }

    /// The hosts a crawl is taken to go round at once, which grow with its workers: 16 a
    /// worker, at least 1 024 (the pool's and the TLS store's size when unset).
    fn hosts_in_rotation(&self) -> u32 {
        self.raw
            .fetch
            .workers
            .saturating_mul(POOLED_CONNECTIONS_PER_WORKER)
            .max(fetcher::DEFAULT_MAX_POOLED_CONNECTIONS as u32)
    }

    /// `fetch.tls_sessions`, or when unset as many servers as the pool's wanted size
    /// (16 a worker, at least 1 024): the hosts a crawl goes round grow with its workers,
    /// and a host whose server closed the kept connection resumes its TLS session.
    pub fn tls_sessions(&self) -> u32 {
        self.raw
            .fetch
            .tls_sessions
            .unwrap_or_else(|| self.hosts_in_rotation())
    }

    /// Files the daemon may hold open at once: a socket for each worker's fetch, the kept
    /// connections (`fetch.max_pooled_connections`, and as many again after a burst), and
    /// a margin for the rest.
    pub fn open_files_wanted(&self) -> u64 {
        self.open_files_besides_pool() + u64::from(self.max_pooled_connections())
    }

    /// Files besides the kept connections: a socket for each worker's fetch, as many idle
    /// ones after a burst, and the margin.
    fn open_files_besides_pool(&self) -> u64 {
        2 * u64::from(self.raw.fetch.workers) + OPEN_FILES_BESIDES_SITES
    }

    /// Kept connections the open-files limit `limit` leaves room for: at most
    /// `fetch.max_pooled_connections`, and no more than what the other files leave. Kept
    /// connections only save connects; fetches need their sockets, so the pool gives way
    /// first.
    pub fn max_pooled_within(&self, limit: u64) -> usize {
        let room = limit.saturating_sub(self.open_files_besides_pool());
        usize::try_from(room.min(u64::from(self.max_pooled_connections()))).unwrap_or(usize::MAX)
    }

    /// A warning when `limit`, the open-files limit the daemon runs with (its soft limit,
    /// raised to the hard one at start), is below [`Settings::open_files_wanted`]: the
    /// pool keeps fewer connections ([`Settings::max_pooled_within`]), and when even the
    /// workers' sockets do not fit, connects fail with "too many open files" and pages
    /// are retried as network errors.
    pub fn open_files_warning(&self, limit: u64) -> Option<String> {
        let wanted = self.open_files_wanted();
        if limit >= wanted {
            return None;
        }
        let (workers, pooled) = (self.raw.fetch.workers, self.max_pooled_connections());
        let consequence = match self.max_pooled_within(limit) {
            0 => format!(
                "no connection is kept for reuse, and fetches may fail with \"too many open \
                 files\" (fetch.workers = {workers})"
            ),
            kept => format!("at most {kept} connections are kept for reuse instead of {pooled}"),
        };
        Some(format!(
            "the open-files limit is {limit}, below the {wanted} files fetch.workers = {workers} \
             and fetch.max_pooled_connections = {pooled} may hold open: {consequence}; raise \
             the limit (LimitNOFILE= in the systemd unit, ulimit -Hn in a shell) or lower those"
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn err(text: &str) -> String {
        match Config::parse(text, "t.toml").and_then(|c| c.check(None)) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn open_admin_listener_needs_a_token_or_explicit_consent() {
        let e = err("[admin]\nlisten = \"0.0.0.0:8470\"\n");
        assert!(
            e.contains("admin.listen = \"0.0.0.0:8470\"")
                && e.contains("admin.token_file")
                && e.contains("admin.allow_unauthenticated = true"),
            "{e}"
        );
        let ok = |t: &str| Config::parse(t, "t.toml").unwrap().check(None).unwrap();
        let s = ok("[admin]\nlisten = \"0.0.0.0:8470\"\ntoken_file = \"/etc/t\"\n");
        assert!(s.warnings().iter().all(|w| !w.contains("admin")));
        let s = ok("[admin]\nlisten = \"0.0.0.0:8470\"\nallow_unauthenticated = true\n");
        assert!(s.warnings().iter().any(|w| w.contains("without a token")));
        let s = ok("[admin]\nlisten = \"127.0.0.1:8470\"\nallow_unauthenticated = true\n");
        assert!(s.warnings().iter().all(|w| !w.contains("admin")));
    }

    #[test]
    fn placeholder_contact_is_warned_about() {
        let warned = |ua: &str| {
            let t = format!("[fetch]\nuser_agent = {ua:?}\n");
            let s = Config::parse(&t, "t.toml").unwrap().check(None).unwrap();
            s.warnings().iter().any(|w| w.contains("placeholder"))
        };
        assert!(Config::default().check(None).unwrap().warnings()[0].contains("example.org"));
        assert!(warned("frontierd/0.1 (+https://example.org/bot)"));
        assert!(warned("mybot/1.0 (+http://www.EXAMPLE.com/about)"));
        assert!(warned("mybot/1.0 (crawler@example.net)"));
        assert!(!warned("mybot/1.0 (+https://crawl.archive.test/bot)"));
        assert!(!warned("mybot/1.0 (ops@archive.test)"));
        assert!(!warned("mybot/1.0 (+https://myexample.org/bot)"));
    }

    #[test]
    fn an_open_files_limit_below_what_the_fetch_settings_may_open_is_warned_about() {
        let s = Config::parse(
            "[fetch]\nworkers = 256\nmax_pooled_connections = 16384\n",
            "t.toml",
        )
        .unwrap()
        .check(None)
        .unwrap();
        assert_eq!(s.open_files_wanted(), 2 * 256 + 16384 + 512);
        let w = s
            .open_files_warning(1024)
            .expect("a shell's usual 1 024 is too few");
        assert!(w.contains("1024") && w.contains("17408"), "{w}");
        assert!(w.contains("LimitNOFILE"), "{w}");
        assert!(w.contains("no connection is kept"), "{w}");
        assert_eq!(s.max_pooled_within(1024), 0, "1 024 - 2 x 256 - 512");
        let w = s.open_files_warning(8192).expect("8 192 is too few too");
        assert!(
            w.contains("at most 7168 connections are kept for reuse"),
            "{w}"
        );
        assert_eq!(s.max_pooled_within(8192), 8192 - 512 - 512);
        assert_eq!(
            s.open_files_warning(65536),
            None,
            "the systemd unit's limit"
        );
        assert_eq!(s.max_pooled_within(65536), 16384, "the configured cap");
    }
}
