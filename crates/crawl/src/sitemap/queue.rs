//! Which sitemaps are queued, and how the pages a sitemap lists are queued: the sitemaps a
//! robots.txt names (those `[scope]` admits, read against robots.txt), those of
//! `sitemaps.urls`, each listed page's `priority` applied to its revisit interval, and the
//! `lastmod` dates of the entries the frontier already knew.

use frontier::{EnqueueItem, EntryKind, RecrawlConfig, SitemapSource};
use url::Url;

use super::{mean_priority_permille, priority_scaled_interval, Dropped};
use crate::discovery::{extend, Hop};
use crate::scope::Scope;

/// The sitemaps a robots.txt names, judged.
#[derive(Debug, Default)]
pub struct NamedSitemaps<'a> {
    /// To queue, as sitemaps of the robots.txt's host (robots.txt as the page they are
    /// found on).
    pub items: Vec<EnqueueItem>,
    /// The `Sitemap:` lines not queued, and why, in their order.
    pub refused: Vec<(&'a str, Dropped)>,
}

/// The sitemaps the `Sitemap:` lines of a robots.txt at `robots_url` name: absolute, as the
/// protocol asks (a relative one is read against robots.txt), and admitted by `scope` with
/// robots.txt as the page they are found on. Nothing when `robots_url` does not parse.
pub fn named_by_robots<'a>(
    robots_url: &str,
    lines: &'a [String],
    scope: &Scope,
) -> NamedSitemaps<'a> {
    let mut named = NamedSitemaps::default();
    let Ok(parsed) = Url::parse(robots_url) else {
        return named;
    };
    for line in lines {
        let Ok(sitemap) = parsed.join(line.trim()) else {
            named.refused.push((line, Dropped::InvalidUrl));
            continue;
        };
        if !scope.admits(&parsed, &sitemap) {
            named.refused.push((line, Dropped::OutOfScope));
            continue;
        }
        named.items.push(EnqueueItem {
            url: sitemap.into(),
            depth: 0,
            via: Some(robots_url.to_string()),
            hops: extend("", Hop::Sitemap),
            kind: EntryKind::Sitemap(SitemapSource::Robots),
            ..EnqueueItem::default()
        });
    }
    named
}

/// `sitemaps.urls`, to queue as sitemaps listed by the configuration.
pub fn listed_in_config<U: AsRef<str>>(urls: &[U]) -> Vec<EnqueueItem> {
    urls.iter()
        .map(|u| EnqueueItem {
            kind: EntryKind::Sitemap(SitemapSource::Listed),
            ..EnqueueItem::seed(u.as_ref())
        })
        .collect()
}

/// Sitemaps are refetched on their own interval (`sitemaps.refetch_interval`), so that
/// their `lastmod` changes are seen: every sitemap without an interval of its own gets
/// `refetch_ms`; pages are left as they are.
pub fn apply_refetch_interval(items: &mut [EnqueueItem], refetch_ms: Option<u64>) {
    for item in items {
        if matches!(item.kind, EntryKind::Sitemap(_)) && item.revisit_interval_ms.is_none() {
            item.revisit_interval_ms = refetch_ms;
        }
    }
}

/// Listed pages' `priority`, relative to their sitemap's mean, scales their revisit
/// interval (their `changefreq`'s, else the `[recrawl]` one) within
/// `min_interval..=max_interval` ([`priority_scaled_interval`]). A URL the configuration
/// does not revisit stays so; sitemaps are left as they are.
pub fn apply_priority(recrawl: &RecrawlConfig, items: &mut [EnqueueItem]) {
    let mean = mean_priority_permille(items.iter().map(|it| it.hints.as_ref()));
    for item in items.iter_mut() {
        if item.kind != EntryKind::Page {
            continue;
        }
        let Some(priority) = item.hints.as_ref().and_then(|h| h.priority_permille) else {
            continue;
        };
        let host = Url::parse(&item.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let Some(base) = recrawl.base_interval(&item.url, &host, item.revisit_interval_ms) else {
            continue;
        };
        item.revisit_interval_ms = Some(priority_scaled_interval(
            base,
            priority,
            mean,
            recrawl.min_interval_ms,
            recrawl.max_interval_ms,
        ));
    }
}

/// The `lastmod` dates of a sitemap's entries, kept before they are offered: those of the
/// entries the frontier already knew may make them due now.
#[derive(Debug, Default)]
pub struct Lastmods(Vec<(usize, String, u64)>);

impl Lastmods {
    /// The entries of `items` with a `lastmod` (a date before 1970 is none).
    pub fn of(items: &[EnqueueItem]) -> Lastmods {
        Lastmods(
            items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| {
                    let m = it.hints.as_ref()?.lastmod_ms?;
                    Some((i, it.url.clone(), u64::try_from(m).ok()?))
                })
                .collect(),
        )
    }

    /// (URL, `lastmod`) of those the frontier already knew: `duplicate_at` are their indices
    /// in the items offered, in order.
    pub fn known(self, duplicate_at: &[usize]) -> Vec<(String, u64)> {
        self.0
            .into_iter()
            .filter(|(i, _, _)| duplicate_at.binary_search(i).is_ok())
            .map(|(_, url, m)| (url, m))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::ScopeMode;
    use frontier::SitemapHints;

    #[test]
    fn sitemaps_without_their_own_interval_get_the_refetch_interval() {
        let mut items = listed_in_config(&["https://a.test/s.xml", "https://a.test/t.xml"]);
        items[1].revisit_interval_ms = Some(5);
        items.push(EnqueueItem::seed("https://a.test/page"));
        apply_refetch_interval(&mut items, Some(86_400_000));
        let got: Vec<_> = items.iter().map(|i| i.revisit_interval_ms).collect();
        assert_eq!(got, [Some(86_400_000), Some(5), None]);
    }

    fn same_host() -> Scope {
        Scope {
            mode: ScopeMode::SameHost,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }

    #[test]
    fn robots_sitemaps_are_read_against_robots_txt_and_scoped() {
        let lines: Vec<String> = [
            "https://a.test/sitemap.xml",
            " /relative.xml ",
            "https://b.test/elsewhere.xml",
            "http://[::1",
        ]
        .map(String::from)
        .to_vec();
        let named = named_by_robots("https://a.test/robots.txt", &lines, &same_host());
        let urls: Vec<&str> = named.items.iter().map(|i| i.url.as_str()).collect();
        assert_eq!(
            urls,
            ["https://a.test/sitemap.xml", "https://a.test/relative.xml"]
        );
        let item = &named.items[0];
        assert_eq!(item.kind, EntryKind::Sitemap(SitemapSource::Robots));
        assert_eq!(item.via.as_deref(), Some("https://a.test/robots.txt"));
        assert_eq!(item.hops, "M");
        assert_eq!(item.depth, 0);
        assert_eq!(
            named.refused,
            [
                ("https://b.test/elsewhere.xml", Dropped::OutOfScope),
                ("http://[::1", Dropped::InvalidUrl)
            ]
        );
        assert!(named_by_robots("not a url", &lines, &same_host())
            .items
            .is_empty());
    }

    #[test]
    fn configured_sitemaps_are_listed_seeds() {
        let items = listed_in_config(&["https://a.test/s.xml".to_string()]);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].kind, EntryKind::Sitemap(SitemapSource::Listed));
        assert_eq!(items[0].url, "https://a.test/s.xml");
    }

    fn page(url: &str, priority: Option<u16>, lastmod: Option<i64>) -> EnqueueItem {
        EnqueueItem {
            hints: Some(SitemapHints {
                priority_permille: priority,
                lastmod_ms: lastmod,
                changefreq: None,
            }),
            ..EnqueueItem::seed(url)
        }
    }

    #[test]
    fn priority_scales_revisits_against_the_sitemaps_mean() {
        let day = 86_400_000;
        let recrawl = RecrawlConfig {
            default_interval_ms: Some(day),
            ..RecrawlConfig::default()
        };
        let mut items = vec![
            page("https://a.test/hi", Some(1000), None),
            page("https://a.test/lo", Some(0), None),
            page("https://a.test/none", None, None),
        ];
        apply_priority(&recrawl, &mut items);
        // mean 0.5: 1.0 revisits ~1.4 times as often, 0.0 ~1.4 times less
        let hi = items[0].revisit_interval_ms.unwrap();
        let lo = items[1].revisit_interval_ms.unwrap();
        assert!(hi < day && lo > day, "{hi} {lo}");
        assert_eq!(items[2].revisit_interval_ms, None, "no priority: untouched");

        // not revisited by the configuration: stays so
        let mut items = vec![page("https://a.test/hi", Some(1000), None)];
        apply_priority(&RecrawlConfig::default(), &mut items);
        assert_eq!(items[0].revisit_interval_ms, None);
    }

    #[test]
    fn lastmods_of_known_entries_only() {
        let items = vec![
            page("https://a.test/1", None, Some(1_000)),
            page("https://a.test/2", None, None),
            page("https://a.test/3", None, Some(3_000)),
            page("https://a.test/4", None, Some(-5)),
        ];
        let lastmods = Lastmods::of(&items);
        assert_eq!(
            lastmods.known(&[1, 2, 3]),
            [("https://a.test/3".to_string(), 3_000)]
        );
    }
}
