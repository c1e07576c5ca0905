//! `Config::check`'s parts, one per area of the file: each checks its keys (the error names
//! the key, the value and what is allowed) and returns what `Settings` takes from them.

use super::*;

impl Config {
    /// `[fetch]`: the product token of the user agent.
    pub(super) fn check_fetch(&self) -> Result<String, ConfigError> {
        let c = self;
        // fetch
        let ua = c.fetch.user_agent.trim();
        let product_token: String = ua
            .split('/')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        if product_token.is_empty()
            || !product_token
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        {
            return Err(bad(
                "fetch.user_agent",
                format!("{:?}", c.fetch.user_agent),
                "allowed: a product token of letters, digits, '-' or '_', then /version and a contact URL, e.g. \"mybot/1.0 (+https://example.org/bot)\"",
            ));
        }
        if !ua.contains("http://") && !ua.contains("https://") && !ua.contains('@') {
            return Err(bad(
                "fetch.user_agent",
                format!("{:?}", c.fetch.user_agent),
                "allowed: must include a contact URL or e-mail so site owners can reach the operator",
            ));
        }
        range_u64("fetch.workers", c.fetch.workers.into(), 0, 4096)?;
        range_u64(
            "warc.gzip_level",
            c.warc.gzip_level.into(),
            0,
            warc::MAX_GZIP_LEVEL.into(),
        )?;
        if let Some(servers) = c.fetch.tls_sessions {
            range_u64("fetch.tls_sessions", servers.into(), 0, 1 << 20)?;
        }
        if let Some(max) = c.fetch.max_pooled_connections {
            range_u64("fetch.max_pooled_connections", max.into(), 0, 1 << 20)?;
        }
        range_dur(
            "fetch.pool_idle_timeout",
            c.fetch.pool_idle_timeout,
            1000,
            3_600_000,
        )?;
        range_dur(
            "fetch.connect_timeout",
            c.fetch.connect_timeout,
            100,
            600_000,
        )?;
        range_dur("fetch.total_timeout", c.fetch.total_timeout, 100, 3_600_000)?;
        range_u64(
            "fetch.robots_body_cap",
            c.fetch.robots_body_cap,
            1024,
            1 << 30,
        )?;
        range_u64("fetch.page_body_cap", c.fetch.page_body_cap, 1024, 1 << 32)?;
        range_u64(
            "fetch.max_decoded_bytes",
            c.fetch.max_decoded_bytes,
            1024,
            1 << 32,
        )?;
        range_u64(
            "fetch.robots_max_redirects",
            c.fetch.robots_max_redirects.into(),
            5,
            20,
        )?;
        range_dur("fetch.shutdown_grace", c.fetch.shutdown_grace, 0, 3_600_000)?;
        Ok(product_token)
    }

    /// `[politeness]`: the politeness key and the crawl-delay cap's rule.
    pub(super) fn check_politeness(
        &self,
    ) -> Result<(frontier::PolitenessKeyMode, frontier::CrawlDelayOverCap), ConfigError> {
        let c = self;
        // politeness
        let key_mode = choose(
            "politeness.key",
            &c.politeness.key,
            &[
                ("host", frontier::PolitenessKeyMode::Host),
                ("domain", frontier::PolitenessKeyMode::Domain),
                ("origin", frontier::PolitenessKeyMode::Origin),
            ],
        )?;
        range_dur("politeness.min_delay", c.politeness.min_delay, 0, 3_600_000)?;
        range_dur(
            "politeness.max_delay",
            c.politeness.max_delay,
            0,
            86_400_000,
        )?;
        if c.politeness.max_delay.0 < c.politeness.min_delay.0 {
            return Err(bad(
                "politeness.max_delay",
                format!("\"{}\"", c.politeness.max_delay),
                &format!(
                    "allowed: at least politeness.min_delay (\"{}\")",
                    c.politeness.min_delay
                ),
            ));
        }
        if !(0.0..=1000.0).contains(&c.politeness.delay_factor) {
            return Err(bad(
                "politeness.delay_factor",
                c.politeness.delay_factor,
                "allowed: a number from 0 to 1000",
            ));
        }
        range_dur(
            "politeness.max_crawl_delay",
            c.politeness.max_crawl_delay,
            0,
            86_400_000,
        )?;
        let crawl_delay_over_cap = choose(
            "politeness.crawl_delay_over_cap",
            &c.politeness.crawl_delay_over_cap,
            &[
                ("clamp", frontier::CrawlDelayOverCap::Clamp),
                ("skip", frontier::CrawlDelayOverCap::Skip),
            ],
        )?;
        range_u64(
            "politeness.max_in_flight_per_host",
            c.politeness.max_in_flight_per_host,
            1,
            64,
        )?;
        range_u64(
            "politeness.global_rate_per_sec",
            c.politeness.global_rate_per_sec.into(),
            0,
            100_000,
        )?;
        range_u64(
            "politeness.max_attempts",
            c.politeness.max_attempts.into(),
            1,
            100,
        )?;
        range_dur(
            "politeness.backoff_base",
            c.politeness.backoff_base,
            1,
            86_400_000,
        )?;
        range_dur(
            "politeness.backoff_max",
            c.politeness.backoff_max,
            1,
            7 * 86_400_000,
        )?;
        range_dur(
            "politeness.retry_after_cap",
            c.politeness.retry_after_cap,
            0,
            30 * 86_400_000,
        )?;
        Ok((key_mode, crawl_delay_over_cap))
    }

    /// `[robots]`.
    pub(super) fn check_robots(&self) -> Result<(), ConfigError> {
        let c = self;
        // robots
        let r = &c.robots;
        // any positive duration: an operator may rehearse the rules in minutes on a test
        // site; below what the open web should get is a warning (see `warnings`)
        range_dur("robots.freshness", r.freshness, 1, 30 * 86_400_000)?;
        range_dur("robots.max_age_min", r.max_age_min, 0, 30 * 86_400_000)?;
        range_dur("robots.max_age_max", r.max_age_max, 60_000, 30 * 86_400_000)?;
        if r.max_age_max.0 < r.max_age_min.0 {
            return Err(bad(
                "robots.max_age_max",
                format!("\"{}\"", r.max_age_max),
                "allowed: at least robots.max_age_min",
            ));
        }
        range_dur("robots.retry_initial", r.retry_initial, 1_000, 86_400_000)?;
        range_dur("robots.retry_max", r.retry_max, 1_000, 7 * 86_400_000)?;
        range_dur(
            "robots.fallback_after",
            r.fallback_after,
            1,
            365 * 86_400_000,
        )?;
        range_dur(
            "robots.fallback_retry_interval",
            r.fallback_retry_interval,
            60_000,
            30 * 86_400_000,
        )?;
        range_dur("robots.hold_recheck", r.hold_recheck, 1_000, 86_400_000)?;
        range_u64("robots.cache_origins", r.cache_origins, 16, 100_000_000)?;
        Ok(())
    }

    /// `[scope]`: the scope mode and the include and exclude patterns.
    pub(super) fn check_scope(
        &self,
    ) -> Result<(ScopeMode, Vec<regex::Regex>, Vec<regex::Regex>), ConfigError> {
        let c = self;
        // scope
        let scope_mode = choose(
            "scope.mode",
            &c.scope.mode,
            &[
                ("same-host", ScopeMode::SameHost),
                ("same-domain", ScopeMode::SameDomain),
                ("any", ScopeMode::Any),
            ],
        )?;
        range_u64("scope.max_depth", c.scope.max_depth.into(), 0, 1000)?;
        range_u64(
            "scope.max_links_per_page",
            c.scope.max_links_per_page,
            1,
            1_000_000,
        )?;
        // a chain is counted on the hop path kept with the URL, which holds the last 50 hops
        range_u64(
            "scope.max_redirect_hops",
            c.scope.max_redirect_hops.into(),
            0,
            crawl::discovery::MAX_HOPS_KEPT as u64,
        )?;
        let include = regexes("scope.include", &c.scope.include)?;
        let exclude = regexes("scope.exclude", &c.scope.exclude)?;
        Ok((scope_mode, include, exclude))
    }

    /// `[intake]`, `[recrawl]`, `[warc]`, `[admin] listen`, `[log]`, `[dns]`, `[addresses]`,
    /// `[disk]`: the admin address and whether logs are JSON.
    pub(super) fn check_outputs(&self) -> Result<(SocketAddr, bool), ConfigError> {
        let c = self;
        // intake
        range_dur(
            "intake.poll_interval",
            c.intake.poll_interval,
            10,
            3_600_000,
        )?;
        range_u64("intake.batch_size", c.intake.batch_size.into(), 1, 100_000)?;
        c.recrawl.check()?;
        // warc
        range_u64("warc.max_file_size", c.warc.max_file_size, 1 << 20, 1 << 40)?;
        if c.warc.prefix.is_empty()
            || !c
                .warc
                .prefix
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
        {
            return Err(bad(
                "warc.prefix",
                format!("{:?}", c.warc.prefix),
                "allowed: letters, digits, '-', '_' and '.'",
            ));
        }
        // admin
        let admin_listen: SocketAddr = c.admin.listen.parse().map_err(|_| {
            bad(
                "admin.listen",
                format!("{:?}", c.admin.listen),
                "allowed: IP:PORT, e.g. \"127.0.0.1:8470\" (port 0 picks a free one)",
            )
        })?;
        // log
        let json_logs = choose(
            "log.format",
            &c.log.format,
            &[("text", false), ("json", true)],
        )?;
        choose(
            "log.level",
            &c.log.level,
            &[
                ("error", ()),
                ("warn", ()),
                ("info", ()),
                ("debug", ()),
                ("trace", ()),
            ],
        )?;
        range_dur(
            "log.stats_interval",
            c.log.stats_interval,
            1_000,
            86_400_000,
        )?;
        network::check_ip_keys(&c.politeness)?;
        c.dns.check()?;
        c.addresses.check()?;
        c.disk.check()?;
        Ok((admin_listen, json_logs))
    }

    /// `[resolve]`.
    pub(super) fn check_resolve(&self) -> Result<(), ConfigError> {
        let c = self;
        // resolve
        for (name, ips) in &c.resolve {
            if ips.is_empty() {
                return Err(bad(
                    &format!("resolve.\"{name}\""),
                    "[]",
                    "allowed: a non-empty list of IP addresses",
                ));
            }
            for ip in ips {
                if ip.parse::<IpAddr>().is_err() {
                    return Err(bad(
                        &format!("resolve.\"{name}\""),
                        format!("{ip:?}"),
                        "allowed: IP addresses such as \"127.0.0.1\" or \"::1\"",
                    ));
                }
            }
        }
        Ok(())
    }

    /// `[admin]` limits and token rule, `[store]` sizes.
    pub(super) fn check_admin_and_store(
        &self,
        admin_listen: SocketAddr,
        token_file: Option<&Path>,
    ) -> Result<(), ConfigError> {
        let c = self;
        if token_file.is_none()
            && !crate::exposure::is_loopback(admin_listen)
            && !c.admin.allow_unauthenticated
        {
            return Err(ConfigError::UnauthenticatedListener(
                crate::exposure::unauthenticated_listener(admin_listen),
            ));
        }
        range_dur(
            "admin.header_read_timeout",
            c.admin.header_read_timeout,
            100,
            3_600_000,
        )?;
        range_dur(
            "admin.request_timeout",
            c.admin.request_timeout,
            1_000,
            86_400_000,
        )?;
        range_u64(
            "admin.max_connections",
            c.admin.max_connections.into(),
            1,
            65_536,
        )?;
        range_u64("store.cache_bytes", c.store.cache_bytes, 1 << 20, 1 << 40)?;
        range_u64(
            "store.intake_buffer_bytes",
            c.store.intake_buffer_bytes,
            1 << 16,
            1 << 34,
        )?;
        Ok(())
    }
}
