//! `[sitemaps]`: whether sitemaps are fetched, which ones besides robots.txt's, and what one
//! sitemap may cost (docs/sitemaps.md).

use crawl::sitemap::{SitemapLimits, PROTOCOL_MAX_BYTES, PROTOCOL_MAX_URLS};
use serde::Deserialize;
use url::Url;

use super::{bad, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SitemapsSection {
    pub enabled: bool,
    pub urls: Vec<String>,
    pub max_urls_per_file: u64,
    pub max_uncompressed_bytes: u64,
    pub refetch_interval: super::recrawl::Interval,
}

impl Default for SitemapsSection {
    fn default() -> Self {
        SitemapsSection {
            enabled: false,
            urls: Vec::new(),
            max_urls_per_file: PROTOCOL_MAX_URLS as u64,
            max_uncompressed_bytes: PROTOCOL_MAX_BYTES,
            refetch_interval: super::recrawl::Interval(Some(std::time::Duration::from_secs(
                86_400,
            ))),
        }
    }
}

/// `[sitemaps]`, checked.
#[derive(Debug, Clone)]
pub struct SitemapSettings {
    pub enabled: bool,
    /// `sitemaps.urls`, parsed.
    pub urls: Vec<Url>,
    pub limits: SitemapLimits,
    /// Every sitemap's own revisit interval (ms), so that its `lastmod` changes are seen;
    /// None: `[recrawl]` decides, as for pages.
    pub refetch_interval_ms: Option<u64>,
}

impl SitemapsSection {
    pub fn check(&self) -> Result<SitemapSettings, ConfigError> {
        if !(1..=PROTOCOL_MAX_URLS as u64).contains(&self.max_urls_per_file) {
            return Err(bad(
                "sitemaps.max_urls_per_file",
                self.max_urls_per_file,
                &format!("1 to {PROTOCOL_MAX_URLS} (the sitemaps.org limit per file)"),
            ));
        }
        if !(1024..=PROTOCOL_MAX_BYTES).contains(&self.max_uncompressed_bytes) {
            return Err(bad(
                "sitemaps.max_uncompressed_bytes",
                self.max_uncompressed_bytes,
                &format!("1024 to {PROTOCOL_MAX_BYTES} (50 MiB, the sitemaps.org limit per file)"),
            ));
        }
        let mut urls = Vec::with_capacity(self.urls.len());
        for u in &self.urls {
            let parsed = Url::parse(u.trim())
                .ok()
                .filter(|p| matches!(p.scheme(), "http" | "https") && p.host_str().is_some());
            match parsed {
                Some(p) => urls.push(p),
                None => {
                    return Err(bad(
                        "sitemaps.urls",
                        format!("{u:?}"),
                        "absolute http:// or https:// URLs of sitemaps",
                    ))
                }
            }
        }
        Ok(SitemapSettings {
            enabled: self.enabled,
            urls,
            limits: SitemapLimits {
                max_urls: usize::try_from(self.max_urls_per_file).unwrap_or(PROTOCOL_MAX_URLS),
                max_bytes: self.max_uncompressed_bytes,
            },
            refetch_interval_ms: self
                .refetch_interval
                .0
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        })
    }

    /// The frontier's part: with sitemaps on, scheduled URLs keep a locator so that a
    /// sitemap's `lastmod` can move a known URL's due time.
    pub fn apply(&self, f: &mut frontier::FrontierConfig) {
        f.recrawl.locate_for_lastmod = self.enabled;
    }

    /// What is allowed but does nothing.
    pub fn warnings(&self) -> Vec<String> {
        if !self.enabled && !self.urls.is_empty() {
            vec![format!(
                "sitemaps.urls lists {} sitemap(s) but sitemaps.enabled = false: they are not fetched",
                self.urls.len()
            )]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    #[test]
    fn defaults_are_the_protocol_limits_and_off() {
        let s = Config::default().check(None).unwrap();
        assert!(!s.sitemaps.enabled);
        assert_eq!(s.sitemaps.limits.max_urls, 50_000);
        assert_eq!(s.sitemaps.limits.max_bytes, 50 * 1024 * 1024);
        assert_eq!(s.sitemaps.refetch_interval_ms, Some(86_400_000));
        assert!(!s.frontier_config().recrawl.locate_for_lastmod);
        assert!(s.warnings().iter().all(|w| !w.contains("sitemaps")));
    }

    #[test]
    fn values_are_checked_and_errors_name_the_key() {
        let check = |toml: &str| {
            Config::parse(toml, "t")
                .unwrap()
                .check(None)
                .map(|s| s.sitemaps)
                .map_err(|e| e.to_string())
        };
        let s = check(
            "[sitemaps]\nenabled = true\nurls = [\"https://a.test/sitemap.xml\"]\nmax_urls_per_file = 10\nmax_uncompressed_bytes = 4096\n",
        )
        .unwrap();
        assert!(s.enabled);
        assert_eq!(s.urls[0].as_str(), "https://a.test/sitemap.xml");
        assert_eq!((s.limits.max_urls, s.limits.max_bytes), (10, 4096));
        let on = Config::parse(
            "[sitemaps]\nenabled = true\nrefetch_interval = \"6h\"\n",
            "t",
        )
        .unwrap()
        .check(None)
        .unwrap();
        assert_eq!(on.sitemaps.refetch_interval_ms, Some(6 * 3_600_000));
        assert!(on.frontier_config().recrawl.locate_for_lastmod);
        let off = check("[sitemaps]\nrefetch_interval = \"off\"\n").unwrap();
        assert_eq!(off.refetch_interval_ms, None);
        assert!(
            Config::parse("[sitemaps]\nrefetch_interval = \"soon\"\n", "t")
                .is_err_and(|e| e.to_string().contains("refetch_interval"))
        );
        for (toml, key) in [
            (
                "max_urls_per_file = 50001",
                "sitemaps.max_urls_per_file = 50001",
            ),
            ("max_urls_per_file = 0", "sitemaps.max_urls_per_file = 0"),
            (
                "max_uncompressed_bytes = 52428801",
                "sitemaps.max_uncompressed_bytes = 52428801",
            ),
            (
                "urls = [\"/sitemap.xml\"]",
                "sitemaps.urls = \"/sitemap.xml\"",
            ),
            ("urls = [\"ftp://a.test/s.xml\"]", "sitemaps.urls"),
        ] {
            let e = check(&format!("[sitemaps]\n{toml}\n")).unwrap_err();
            assert!(e.starts_with(key), "{e}");
        }
        // listed while off: a warning, not an error
        let s = Config::parse("[sitemaps]\nurls = [\"https://a.test/s.xml\"]\n", "t")
            .unwrap()
            .check(None)
            .unwrap();
        assert!(
            s.warnings()
                .iter()
                .any(|w| w.contains("sitemaps.enabled = false")),
            "{:?}",
            s.warnings()
        );
    }
}
