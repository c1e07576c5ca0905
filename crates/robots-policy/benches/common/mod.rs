//! Shared by the `robots` (criterion) and `summary` bench targets: finds the robots.txt
//! corpus, generates its URL lists on first use (into the target dir, never into the
//! repository) and loads both.
//!
//! Corpus: `$FRONTIERD_ROBOTS_CORPUS` if set, else `<crate>/../../../shared/corpus/robots`
//! (the checkout sits beside `shared/`). URL lists: `gen_urls.py` from the corpus, written
//! under `$CARGO_TARGET_DIR` (or the target dir holding this bench binary, or `./target`).

#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file is checked as this crawler (synthetic.txt has a big Googlebot group).
pub const AGENT: &str = "Googlebot";

/// The generated file; everything else in the corpus is a real site's robots.txt.
pub const SYNTHETIC: &str = "synthetic";

/// Order of the table (as in the corpus' SOURCES.md); unknown files follow, sorted.
const ORDER: &[&str] = &[
    "wikipedia",
    "quora",
    "ipwatchdog",
    "ebay",
    "zillow",
    "cnet",
    "google",
    "facebook",
    "amazon",
    SYNTHETIC,
];

pub struct CorpusFile {
    pub name: String,
    pub body: Vec<u8>,
    /// `body` as text for the `robotstxt` crate, which takes `&str` (lossy if not UTF-8).
    pub text: String,
    /// Absolute URLs from `gen_urls.py`.
    pub urls: Vec<String>,
}

impl CorpusFile {
    pub fn is_synthetic(&self) -> bool {
        self.name == SYNTHETIC
    }

    /// `n` URLs spread evenly over the whole list (the list is i.i.d., this just avoids
    /// depending on its first few lines).
    pub fn url_subset(&self, n: usize) -> Vec<&str> {
        let len = self.urls.len();
        if n >= len {
            return self.urls.iter().map(String::as_str).collect();
        }
        (0..n).map(|i| self.urls[i * len / n].as_str()).collect()
    }

    /// Allow/disallow lines with a value anywhere in the file (all groups).
    pub fn file_rules(&self) -> usize {
        self.text
            .lines()
            .filter(|line| {
                let line = line.split('#').next().unwrap_or("").trim_start();
                let lower = line.to_ascii_lowercase();
                let rest = if let Some(r) = lower.strip_prefix("disallow") {
                    r
                } else if let Some(r) = lower.strip_prefix("allow") {
                    r
                } else {
                    return false;
                };
                let rest = rest.trim_start();
                let rest = rest.strip_prefix(':').unwrap_or(rest).trim();
                !rest.is_empty()
            })
            .count()
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn corpus_dir() -> PathBuf {
    let dir = match std::env::var_os("FRONTIERD_ROBOTS_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("../shared/corpus/robots"),
    };
    if !dir.is_dir() {
        panic!(
            "robots corpus not found at {} (set FRONTIERD_ROBOTS_CORPUS to the directory \
             holding the robots.txt files and gen_urls.py)",
            dir.display()
        );
    }
    dir.canonicalize().unwrap_or(dir)
}

fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.is_absolute() {
            dir
        } else {
            workspace_root().join(dir)
        };
    }
    // The bench binary lives in <target>/[<triple>/]<profile>/deps/.
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1) {
            if dir.join("CACHEDIR.TAG").is_file() {
                return dir.to_path_buf();
            }
        }
    }
    workspace_root().join("target")
}

fn corpus_names(corpus: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(corpus)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", corpus.display()))
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".txt").map(str::to_owned)
        })
        .collect();
    names.sort_by_key(|n| {
        (
            ORDER.iter().position(|o| o == n).unwrap_or(ORDER.len()),
            n.clone(),
        )
    });
    names
}

/// The directory of URL lists for `corpus`, generated with its `gen_urls.py` if any list
/// is missing or older than its robots.txt.
pub fn urls_dir(corpus: &Path, names: &[String]) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    corpus.hash(&mut hasher);
    let out = target_dir()
        .join("robots-bench-urls")
        .join(format!("{:016x}", hasher.finish()));
    let fresh = |name: &String| {
        let modified = |p: PathBuf| fs::metadata(p).and_then(|m| m.modified()).ok();
        match (
            modified(out.join(format!("{name}.urls"))),
            modified(corpus.join(format!("{name}.txt"))),
        ) {
            (Some(urls), Some(txt)) => urls >= txt,
            _ => false,
        }
    };
    if names.iter().all(fresh) {
        return out;
    }
    // Generate into a scratch directory, then move the finished lists in place.
    let scratch = out.with_extension(format!("tmp{}", std::process::id()));
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).expect("create URL scratch dir");
    eprintln!(
        "generating URL lists: python3 {}/gen_urls.py -> {}",
        corpus.display(),
        out.display()
    );
    let status = Command::new("python3")
        .arg(corpus.join("gen_urls.py"))
        .arg(corpus)
        .arg(&scratch)
        .status()
        .expect("run python3 gen_urls.py (is python3 installed?)");
    assert!(status.success(), "gen_urls.py failed: {status}");
    fs::create_dir_all(&out).expect("create URL dir");
    for name in names {
        let file = format!("{name}.urls");
        fs::rename(scratch.join(&file), out.join(&file))
            .unwrap_or_else(|e| panic!("gen_urls.py wrote no {file}: {e}"));
    }
    let _ = fs::remove_dir_all(&scratch);
    out
}

/// Every robots.txt of the corpus with its URL list, real files first, synthetic last.
pub fn load() -> Vec<CorpusFile> {
    let corpus = corpus_dir();
    let names = corpus_names(&corpus);
    let urls = urls_dir(&corpus, &names);
    names
        .into_iter()
        .map(|name| {
            let body = fs::read(corpus.join(format!("{name}.txt"))).expect("read robots.txt");
            let text = String::from_utf8_lossy(&body).into_owned();
            let list =
                fs::read_to_string(urls.join(format!("{name}.urls"))).expect("read URL list");
            let urls = list
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            CorpusFile {
                name,
                body,
                text,
                urls,
            }
        })
        .collect()
}

/// One check with the `robotstxt` crate: it parses the whole body again for every URL.
pub fn robotstxt_allowed(text: &str, url: &str) -> bool {
    robotstxt::DefaultMatcher::default().one_agent_allowed_by_robots(text, AGENT, url)
}

/// One check with the `robotstxt` crate whose pattern matcher is replaced by
/// [`GoogleMatches`]: its parser, group selection and precedence, Google's `Matches`.
pub fn robotstxt_fixed_allowed(text: &str, url: &str) -> bool {
    robotstxt::matcher::RobotsMatcher::<GoogleMatches>::default()
        .one_agent_allowed_by_robots(text, AGENT, url)
}

/// `robotstxt` 0.3.0's `RobotsMatchStrategy::matches` ports Google's
/// `RobotsMatchStrategy::Matches` (robots.cc) with `Vec::insert` where the C++ assigns
/// `pos[i] = ...`: every insert shifts the positions not yet visited, so patterns with a
/// `*` followed by literal text can fail to match (`*/feature/*` misses
/// `/1/feature/x`). This strategy is the C++ function again, line for line, on bytes;
/// the allow/disallow priorities are the crate's (`pattern.len()` on a match, else -1).
#[derive(Default)]
pub struct GoogleMatches;

impl robotstxt::matcher::RobotsMatchStrategy for GoogleMatches {
    fn match_allow(&self, path: &str, pattern: &str) -> i32 {
        if Self::matches(path, pattern) {
            pattern.len() as i32
        } else {
            -1
        }
    }

    fn match_disallow(&self, path: &str, pattern: &str) -> i32 {
        if Self::matches(path, pattern) {
            pattern.len() as i32
        } else {
            -1
        }
    }

    fn matches(path: &str, pattern: &str) -> bool {
        let (path, pattern) = (path.as_bytes(), pattern.as_bytes());
        let pathlen = path.len();
        let mut pos = vec![0usize; pathlen + 1];
        let mut numpos = 1;
        for (k, &pat) in pattern.iter().enumerate() {
            if pat == b'$' && k + 1 == pattern.len() {
                return pos[numpos - 1] == pathlen;
            }
            if pat == b'*' {
                numpos = pathlen - pos[0] + 1;
                for i in 1..numpos {
                    pos[i] = pos[i - 1] + 1;
                }
            } else {
                let mut newnumpos = 0;
                for i in 0..numpos {
                    if pos[i] < pathlen && path[pos[i]] == pat {
                        pos[newnumpos] = pos[i] + 1;
                        newnumpos += 1;
                    }
                }
                numpos = newnumpos;
                if numpos == 0 {
                    return false;
                }
            }
        }
        true
    }
}
