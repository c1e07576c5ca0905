//! Which shard a politeness key belongs to, and which shards a node owns.

use std::fmt;

use frontier::{canon, canonicalize, PolitenessKeyMode, Rejection};
use xxhash_rust::xxh3::xxh3_64;

/// The most shards a cluster can have: far more than any crawl needs, few enough that a
/// node's consumers (one per owned shard) stay cheap.
pub const MAX_SHARDS: u32 = 4096;

/// Maps politeness keys to shards: `xxh3_64(key) % shards`.
///
/// xxh3 (64-bit, seed 0, as in `xxhash-rust`) is a specified algorithm whose output is
/// the same on every platform and every version of the crate, unlike std's `DefaultHasher`
/// (SipHash with keys std may change). The shard count is fixed when the cluster is created:
/// changing it moves most hosts to another shard, so it is recorded on the stream and
/// checked when a node starts ([`crate::ensure_streams`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardMap {
    shards: u32,
    key_mode: PolitenessKeyMode,
}

/// A URL that cannot be routed because the frontier would reject it anyway.
#[derive(Debug, thiserror::Error)]
#[error("cannot route {url:?}: {reason}")]
pub struct RouteError {
    pub url: String,
    pub reason: Rejection,
}

impl ShardMap {
    /// `shards` must be in 1..=[`MAX_SHARDS`] (checked by [`crate::ClusterConfig`]).
    pub fn new(shards: u32, key_mode: PolitenessKeyMode) -> Result<ShardMap, ShardError> {
        if shards == 0 || shards > MAX_SHARDS {
            return Err(ShardError::Count(shards));
        }
        Ok(ShardMap { shards, key_mode })
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    pub fn key_mode(&self) -> PolitenessKeyMode {
        self.key_mode
    }

    /// The shard of a politeness key (as the frontier computes it).
    pub fn shard_of_key(&self, key: &str) -> u32 {
        (xxh3_64(key.as_bytes()) % u64::from(self.shards)) as u32
    }

    /// The shard of a URL: canonicalized exactly as the frontier does (so `HTTP://Example.COM/`
    /// and `http://example.com/` land together), then keyed by its politeness key.
    pub fn shard_of_url(&self, url: &str, max_url_len: usize) -> Result<u32, RouteError> {
        self.place(url, max_url_len).map(|(_, shard)| shard)
    }

    /// A URL's canonical form and its shard.
    pub fn place(
        &self,
        url: &str,
        max_url_len: usize,
    ) -> Result<(frontier::CanonicalUrl, u32), RouteError> {
        let canonical = canonicalize(url, max_url_len).map_err(|reason| RouteError {
            url: url.to_string(),
            reason,
        })?;
        let shard = self.shard_of_key(canon::politeness_key_of(&canonical, self.key_mode));
        Ok((canonical, shard))
    }
}

/// Why a shard count or a shard list is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("shard count {0} is out of range: it must be 1..={MAX_SHARDS}")]
    Count(u32),
    #[error("shard list is empty: a node must own at least one shard")]
    Empty,
    #[error("shard list item {item:?}: {reason}")]
    Item { item: String, reason: String },
    #[error("shard {shard} is listed twice")]
    Duplicate { shard: u32 },
}

/// A set of shards, written as ranges: `"0-31,40"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSet {
    /// Sorted, without duplicates.
    shards: Vec<u32>,
}

impl ShardSet {
    /// Parse `"0-31,40"` against a cluster of `shards` shards: every shard must be below
    /// `shards`, ranges ascending, no shard twice, at least one shard.
    pub fn parse(text: &str, shards: u32) -> Result<ShardSet, ShardError> {
        let mut out = Vec::new();
        for raw in text.split(',') {
            let item = raw.trim();
            if item.is_empty() {
                if text.trim().is_empty() {
                    return Err(ShardError::Empty);
                }
                return Err(ShardError::Item {
                    item: raw.to_string(),
                    reason: "empty item (two commas, or a trailing comma)".into(),
                });
            }
            let bad = |reason: String| ShardError::Item {
                item: item.to_string(),
                reason,
            };
            let number = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| bad(format!("{:?} is not a shard number", s.trim())))
            };
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => {
                    let n = number(item)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(bad(format!("range runs backwards ({lo} > {hi})")));
            }
            if hi >= shards {
                return Err(bad(format!(
                    "shard {hi} does not exist: the cluster has shards 0-{}",
                    shards - 1
                )));
            }
            out.extend(lo..=hi);
        }
        out.sort_unstable();
        if let Some(w) = out.windows(2).find(|w| w[0] == w[1]) {
            return Err(ShardError::Duplicate { shard: w[0] });
        }
        Ok(ShardSet { shards: out })
    }

    /// Every shard of a `shards`-shard cluster (a single node owning all of them).
    pub fn all(shards: u32) -> ShardSet {
        ShardSet {
            shards: (0..shards).collect(),
        }
    }

    pub fn contains(&self, shard: u32) -> bool {
        self.shards.binary_search(&shard).is_ok()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.shards.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.shards.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
}

/// Writes the set back as ranges (`0-31,40`), the form [`ShardSet::parse`] reads.
impl fmt::Display for ShardSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.shards.len() {
            let lo = self.shards[i];
            let mut j = i;
            while j + 1 < self.shards.len() && self.shards[j + 1] == self.shards[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j == i {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{}", self.shards[j])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn map(shards: u32) -> ShardMap {
        ShardMap::new(shards, PolitenessKeyMode::Host).unwrap()
    }

    #[test]
    fn shard_of_key_is_pinned_to_xxh3_seed_0() {
        // Pinned outputs: a change of hash (or of its seed) would silently move every host
        // of a running cluster to another owner. xxh3_64("example.com") is a published
        // value of the algorithm, not of this code.
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        let m = map(64);
        assert_eq!(m.shard_of_key(""), (0x2D06_8005_38D3_94C2u64 % 64) as u32);
        assert_eq!(
            m.shard_of_key("example.com"),
            (xxh3_64(b"example.com") % 64) as u32
        );
    }

    #[test]
    fn urls_route_by_canonical_host_and_key_mode() {
        let m = map(64);
        let a = m.shard_of_url("HTTP://Example.COM:80/a", 8192).unwrap();
        let b = m.shard_of_url("http://example.com/b?x", 8192).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, m.shard_of_key("example.com"));
        let d = ShardMap::new(64, PolitenessKeyMode::Domain).unwrap();
        assert_eq!(
            d.shard_of_url("http://a.b.example.co.uk/", 8192).unwrap(),
            d.shard_of_key("example.co.uk")
        );
        let err = m.shard_of_url("not a url", 8192).unwrap_err();
        assert!(err.to_string().contains("not a url"), "{err}");
    }

    #[test]
    fn hosts_spread_evenly_over_shards() {
        let m = map(64);
        let mut counts = [0u32; 64];
        let hosts = 64_000;
        for i in 0..hosts {
            counts[m.shard_of_key(&format!("host{i}.example.org")) as usize] += 1;
        }
        let mean = hosts / 64;
        for (shard, &c) in counts.iter().enumerate() {
            // binomial sd ≈ 31 at mean 1000: 15% is about 5 sd
            assert!(
                c.abs_diff(mean) < mean * 15 / 100,
                "shard {shard}: {c} hosts, mean {mean}"
            );
        }
    }

    #[test]
    fn shard_sets_parse_and_print_ranges() {
        let s = ShardSet::parse("0-3, 40,7", 64).unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 7, 40]);
        assert_eq!(s.to_string(), "0-3,7,40");
        assert!(s.contains(40) && !s.contains(4));
        assert_eq!(ShardSet::all(4).to_string(), "0-3");
    }

    #[test]
    fn bad_shard_sets_name_the_item_and_reason() {
        let e = |t: &str| ShardSet::parse(t, 64).unwrap_err().to_string();
        assert_eq!(ShardSet::parse("", 64), Err(ShardError::Empty));
        assert!(
            e("0-64").contains("shard 64 does not exist"),
            "{}",
            e("0-64")
        );
        assert!(e("5-3").contains("backwards"));
        assert!(e("1,x").contains("\"x\" is not a shard number"));
        assert!(e("1,,2").contains("empty item"));
        assert_eq!(e("0-3,2"), "shard 2 is listed twice");
        assert!(ShardMap::new(0, PolitenessKeyMode::Host).is_err());
        assert!(ShardMap::new(MAX_SHARDS + 1, PolitenessKeyMode::Host).is_err());
    }

    proptest! {
        #[test]
        fn shard_is_in_range_and_stable(key in ".{0,64}", shards in 1u32..=MAX_SHARDS) {
            let m = map(shards);
            let s = m.shard_of_key(&key);
            prop_assert!(s < shards);
            prop_assert_eq!(s, map(shards).shard_of_key(&key.clone()));
        }

        #[test]
        fn printed_sets_parse_back(set in proptest::collection::btree_set(0u32..128, 1..40)) {
            let text = set.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let parsed = ShardSet::parse(&text, 128).unwrap();
            let again = ShardSet::parse(&parsed.to_string(), 128).unwrap();
            prop_assert_eq!(&parsed, &again);
            prop_assert_eq!(parsed.iter().collect::<Vec<_>>(), set.into_iter().collect::<Vec<_>>());
        }
    }
}
