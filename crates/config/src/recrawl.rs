//! `[recrawl]`: revisits of fetched URLs (`docs/recrawl.md`). Its struct, defaults and
//! checks; `config.rs` holds only the field.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::{bad, ConfigError, Dur};

/// A revisit interval: a duration, or `"off"` (no revisits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Option<Duration>);

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim() == "off" {
            return Ok(Interval(None));
        }
        humantime::parse_duration(s.trim())
            .map(|d| Interval(Some(d)))
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid interval {s:?} ({e}); allowed: \"off\" or a number with a unit, e.g. \"30m\", \"24h\", \"7days\""
                ))
            })
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("off"),
            Some(d) => Dur(d).fmt(f),
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One `[[recrawl.patterns]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PatternInterval {
    /// With a `*`: a glob over the whole canonical URL; without: a prefix of it.
    pub pattern: String,
    pub interval: Interval,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecrawlSection {
    pub default_interval: Interval,
    pub adaptive: bool,
    pub min_interval: Dur,
    pub max_interval: Dur,
    pub gone_after: u32,
    pub due_per_dispatch: u32,
    /// Host name (exact) -> interval.
    pub hosts: BTreeMap<String, Interval>,
    /// First match wins.
    pub patterns: Vec<PatternInterval>,
}

impl Default for RecrawlSection {
    fn default() -> Self {
        RecrawlSection {
            default_interval: Interval(None),
            adaptive: false,
            min_interval: Dur(Duration::from_secs(3600)),
            max_interval: Dur(Duration::from_secs(30 * 86_400)),
            gone_after: 3,
            due_per_dispatch: 256,
            hosts: BTreeMap::new(),
            patterns: Vec::new(),
        }
    }
}

impl RecrawlSection {
    /// Check the values (errors name the key, the value and what is allowed).
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.min_interval.0.is_zero() {
            return Err(bad(
                "recrawl.min_interval",
                self.min_interval,
                "allowed: a positive duration, e.g. \"1h\"",
            ));
        }
        if self.max_interval.0 < self.min_interval.0 {
            return Err(bad(
                "recrawl.max_interval",
                self.max_interval,
                &format!(
                    "allowed: at least recrawl.min_interval ({})",
                    self.min_interval
                ),
            ));
        }
        if self.due_per_dispatch == 0 || self.due_per_dispatch > 100_000 {
            return Err(bad(
                "recrawl.due_per_dispatch",
                self.due_per_dispatch,
                "allowed: 1 to 100000",
            ));
        }
        for host in self.hosts.keys() {
            let plain = !host.is_empty()
                && host.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
                });
            if !plain {
                return Err(bad(
                    &format!("recrawl.hosts.\"{host}\""),
                    host,
                    "allowed: a host name as it appears in URLs, e.g. \"news.example.org\"",
                ));
            }
        }
        for (i, p) in self.patterns.iter().enumerate() {
            if p.pattern.trim().is_empty() {
                return Err(bad(
                    &format!("recrawl.patterns[{i}].pattern"),
                    format!("{:?}", p.pattern),
                    "allowed: a URL prefix, or a glob with *, e.g. \"https://example.org/news/*\"",
                ));
            }
        }
        Ok(())
    }

    /// The frontier's recrawl settings (after [`RecrawlSection::check`]).
    pub fn frontier(&self) -> frontier::RecrawlConfig {
        let interval = |i: &Interval| i.0.map(ms);
        frontier::RecrawlConfig {
            default_interval_ms: interval(&self.default_interval),
            hosts: self
                .hosts
                .iter()
                .map(|(h, i)| (h.to_ascii_lowercase(), interval(i)))
                .collect(),
            patterns: self
                .patterns
                .iter()
                .map(|p| {
                    (
                        frontier::UrlPattern::new(p.pattern.clone()),
                        interval(&p.interval),
                    )
                })
                .collect(),
            adaptive: self.adaptive,
            min_interval_ms: ms(self.min_interval.0),
            max_interval_ms: ms(self.max_interval.0),
            gone_after: self.gone_after,
            due_per_dispatch: self.due_per_dispatch as usize,
            // set by `[sitemaps]` (config/sitemaps.rs): only sitemaps use locators
            locate_for_lastmod: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    fn section(text: &str) -> Result<frontier::RecrawlConfig, String> {
        let c = Config::parse(text, "t.toml").map_err(|e| e.to_string())?;
        c.recrawl.check().map_err(|e| e.to_string())?;
        Ok(c.recrawl.frontier())
    }

    #[test]
    fn off_by_default_and_every_key_reaches_the_frontier() {
        let d = section("").unwrap();
        assert_eq!(d.default_interval_ms, None);
        assert!(!d.schedules_any());
        let r = section(
            "[recrawl]\ndefault_interval = \"1d\"\nadaptive = true\nmin_interval = \"2s\"\n\
             max_interval = \"7d\"\ngone_after = 5\ndue_per_dispatch = 10\n\
             hosts = { \"News.test\" = \"1h\", \"static.test\" = \"off\" }\n\
             [[recrawl.patterns]]\npattern = \"*.pdf\"\ninterval = \"off\"\n",
        )
        .unwrap();
        assert_eq!(r.default_interval_ms, Some(86_400_000));
        assert!(r.adaptive);
        assert_eq!(
            (r.min_interval_ms, r.max_interval_ms),
            (2000, 7 * 86_400_000)
        );
        assert_eq!((r.gone_after, r.due_per_dispatch), (5, 10));
        assert_eq!(
            r.hosts,
            vec![
                ("news.test".into(), Some(3_600_000)),
                ("static.test".into(), None)
            ]
        );
        assert_eq!(r.patterns.len(), 1);
        assert!(r.patterns[0].0.matches("https://a.test/x.pdf"));
        assert_eq!(r.patterns[0].1, None);
    }

    #[test]
    fn bad_values_name_the_key() {
        let e = section("[recrawl]\ndefault_interval = \"sometimes\"\n").unwrap_err();
        assert!(e.contains("default_interval") && e.contains("off"), "{e}");
        let e = section("[recrawl]\nmin_interval = \"2h\"\nmax_interval = \"1h\"\n").unwrap_err();
        assert!(e.contains("recrawl.max_interval"), "{e}");
        let e = section("[recrawl]\nmin_interval = \"0s\"\n").unwrap_err();
        assert!(e.contains("recrawl.min_interval"), "{e}");
        let e = section("[recrawl]\ndue_per_dispatch = 0\n").unwrap_err();
        assert!(e.contains("recrawl.due_per_dispatch"), "{e}");
        let e = section("[recrawl]\nhosts = { \"a b\" = \"1h\" }\n").unwrap_err();
        assert!(e.contains("recrawl.hosts"), "{e}");
        let e = section("[recrawl]\n[[recrawl.patterns]]\npattern = \"\"\ninterval = \"1h\"\n")
            .unwrap_err();
        assert!(e.contains("recrawl.patterns[0].pattern"), "{e}");
    }
}
