//! Properties of the sitemap parser on any input: it never panics, never keeps more than
//! its limits, reads what a well-formed sitemap lists, and keeps a prefix of it when the
//! document is cut anywhere (plain or gzip).

use std::io::Write;

use crawl::sitemap::{parse_sitemap, Cut, SitemapLimits};
use flate2::write::GzEncoder;
use flate2::Compression;
use proptest::prelude::*;

fn document(locs: &[String]) -> String {
    let mut s = String::from(
        r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#,
    );
    for l in locs {
        let escaped = l.replace('&', "&amp;").replace('<', "&lt;");
        s.push_str(&format!(
            "<url><loc>{escaped}</loc><lastmod>2024-01-01</lastmod><priority>0.5</priority></url>"
        ));
    }
    s.push_str("</urlset>");
    s
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

fn loc() -> impl Strategy<Value = String> {
    "https?://[a-z]{1,8}\\.test/[a-z0-9/?=&<-]{0,30}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_bytes_parse_within_the_limits(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..2048),
            prop::collection::vec(loc(), 0..20).prop_map(|l| document(&l).into_bytes()),
        ],
        max_urls in 0usize..10,
        max_bytes in 0u64..4096,
        zipped in any::<bool>(),
    ) {
        let body = if zipped { gzip(&body) } else { body };
        let limits = SitemapLimits { max_urls, max_bytes };
        let p = parse_sitemap(&body, &limits);
        prop_assert!(p.entries.len() <= max_urls);
        prop_assert!(p.bytes <= max_bytes);
        prop_assert_eq!(p.gzip, zipped || body.starts_with(&[0x1f, 0x8b]));
    }

    #[test]
    fn a_well_formed_sitemap_reads_back_and_a_cut_one_keeps_a_prefix(
        locs in prop::collection::vec(loc(), 0..30),
        cut_at in any::<prop::sample::Index>(),
        zipped in any::<bool>(),
    ) {
        let doc = document(&locs);
        let whole = parse_sitemap(doc.as_bytes(), &SitemapLimits::default());
        prop_assert_eq!(&whole.cut, &None);
        let read: Vec<&str> = whole.entries.iter().map(|e| e.loc.as_str()).collect();
        prop_assert_eq!(&read, &locs.iter().map(String::as_str).collect::<Vec<_>>());
        prop_assert!(whole.entries.iter().all(|e| e.hints.priority_permille == Some(500)));
        let at = cut_at.index(doc.len());
        let body = if zipped { gzip(&doc.as_bytes()[..at]) } else { doc.as_bytes()[..at].to_vec() };
        let part = parse_sitemap(&body, &SitemapLimits::default());
        prop_assert!(part.entries.len() <= locs.len());
        for (got, want) in part.entries.iter().zip(&locs) {
            prop_assert_eq!(&got.loc, want);
        }
        if at > 0 && at < doc.len() {
            prop_assert!(matches!(part.cut, Some(Cut::Malformed { .. })), "{:?}", part.cut);
        }
    }
}
