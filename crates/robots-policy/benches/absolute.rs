//! `cargo bench -p robots-policy --bench absolute`: match speed from absolute URLs, as an
//! outside harness measures it: for each corpus file the policy is built once, then every
//! URL of the file's list (`https://www.example.com/path?query`, from `gen_urls.py`) is
//! checked with `AgentPolicy::check_url`, and the same URLs with texting_robots'
//! `Robot::allowed`, in one process, rounds of the two interleaved so that load on the
//! machine hits both alike. The ratio is taken per round and the median round kept;
//! geometric mean over the real files, the synthetic file apart. Rates are per CPU second
//! of the measuring thread (`CLOCK_THREAD_CPUTIME_ID`), so a loaded machine slows both
//! sides' wall time without skewing the figures much.
//!
//! Also timed, to tell where the time goes: ours on the pre-extracted paths
//! (`AgentPolicy::check`) and `path_params_query` alone; and, so that a faster match is
//! not bought with a slower parse, the parse of each side (CPU µs per file).
//!
//! Environment:
//! - `FRONTIERD_ROBOTS_CORPUS`: corpus directory (see `common/mod.rs`).
//! - `FRONTIERD_ROBOTS_URLS`: URLs per file (default: the whole list, 100 000), spread over
//!   the list; a small number shows cache effects of the URL set.
//! - `FRONTIERD_ROBOTS_ROUNDS`: interleaved rounds per file (default 7).
//! - `FRONTIERD_ROBOTS_PROFILE=SECONDS`: no table; only ours (`check_url`) on each selected
//!   file for that long, for `perf record`.

mod common;

use std::hint::black_box;
use std::time::Instant;

use robots_policy::{path_params_query, AgentPolicy};

use common::{CorpusFile, AGENT};

/// texting_robots tries every rule: ~5 000 checks/s on the synthetic file.
const SYNTHETIC_TEXTING_URLS: usize = 2_000;
/// Each timed pass repeats the URL list until it has lasted this long.
const MIN_PASS_SECS: f64 = 0.1;

fn env_usize(key: &str) -> Option<usize> {
    std::env::var(key).ok()?.trim().parse().ok()
}

/// CPU seconds this thread has run: time spent waiting for a core on a loaded machine
/// does not count, so both sides of a ratio are charged only for their own work.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Checks per CPU second of `check` over `urls`, repeating the list for at least
/// `MIN_PASS_SECS` of CPU time.
fn rate(urls: &[&str], mut check: impl FnMut(&str) -> bool) -> f64 {
    let start = thread_cpu_secs();
    let mut checks = 0usize;
    loop {
        let mut allowed = 0usize;
        for url in urls {
            allowed += check(black_box(url)) as usize;
        }
        black_box(allowed);
        checks += urls.len();
        let elapsed = thread_cpu_secs() - start;
        if elapsed >= MIN_PASS_SECS {
            return checks as f64 / elapsed;
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn geomean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v.ln(), n + 1));
    (sum / n.max(1) as f64).exp()
}

struct Row {
    name: String,
    urls: usize,
    /// Median over rounds of each measure.
    ours_url: f64,
    ours_path: f64,
    extract: f64,
    texting_url: f64,
    /// Parses (`AgentPolicy::parse`) per CPU second, ours and texting_robots'.
    parse_ours: f64,
    parse_texting: f64,
    /// Median of the per-round ratio ours_url / texting_url.
    ratio: f64,
}

fn measure(file: &CorpusFile, want_urls: usize, rounds: usize) -> Row {
    let ours = AgentPolicy::parse(&file.body, AGENT);
    let theirs = texting_robots::Robot::new(AGENT, &file.body).expect("texting_robots parse");
    let urls = file.url_subset(want_urls);
    let texting_urls = if file.is_synthetic() {
        file.url_subset(want_urls.min(SYNTHETIC_TEXTING_URLS))
    } else {
        urls.clone()
    };
    let paths: Vec<String> = urls
        .iter()
        .map(|u| path_params_query(u).into_owned())
        .collect();
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();

    // Same verdicts for ours by URL and by path (the bench would be meaningless otherwise),
    // and the lazily built automaton is in place before timing, as in a long-lived policy.
    for (url, path) in urls.iter().zip(&paths) {
        assert_eq!(ours.check_url(url), ours.check(path), "{url}");
    }

    let (mut ours_url, mut ours_path, mut extract, mut texting_url, mut ratio) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut parse_ours, mut parse_texting) = (vec![], vec![]);
    let one = [""];
    for _ in 0..rounds {
        let o = rate(&urls, |u| ours.check_url(u).allowed);
        let t = rate(&texting_urls, |u| theirs.allowed(u));
        ours_url.push(o);
        texting_url.push(t);
        ratio.push(o / t);
        ours_path.push(rate(&paths, |p| ours.check(p).allowed));
        extract.push(rate(&urls, |u| path_params_query(u).len() > 1));
        parse_ours.push(rate(&one, |_| {
            black_box(AgentPolicy::parse(black_box(&file.body), AGENT))
                .crawl_delay()
                .is_some()
        }));
        parse_texting.push(rate(&one, |_| {
            texting_robots::Robot::new(AGENT, black_box(&file.body)).is_ok()
        }));
    }
    Row {
        name: file.name.clone(),
        urls: urls.len(),
        ours_url: median(&mut ours_url),
        ours_path: median(&mut ours_path),
        extract: median(&mut extract),
        texting_url: median(&mut texting_url),
        parse_ours: median(&mut parse_ours),
        parse_texting: median(&mut parse_texting),
        ratio: median(&mut ratio),
    }
}

fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2} M", r / 1e6)
    } else {
        format!("{:.1} k", r / 1e3)
    }
}

fn main() {
    // `cargo bench` passes `--bench` and any filter; a filter selects files by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want_urls = env_usize("FRONTIERD_ROBOTS_URLS").unwrap_or(usize::MAX);
    let rounds = env_usize("FRONTIERD_ROBOTS_ROUNDS").unwrap_or(7).max(1);
    let corpus = common::load();
    if let Some(secs) = env_usize("FRONTIERD_ROBOTS_PROFILE") {
        for file in &corpus {
            if filter.is_empty() || filter.iter().any(|f| file.name.contains(f.as_str())) {
                let ours = AgentPolicy::parse(&file.body, AGENT);
                let urls = file.url_subset(want_urls);
                let start = Instant::now();
                let mut checks = 0usize;
                while start.elapsed().as_secs() < secs as u64 {
                    black_box(urls.iter().filter(|u| ours.check_url(u).allowed).count());
                    checks += urls.len();
                }
                println!(
                    "{}: {} checks/s",
                    file.name,
                    fmt_rate(checks as f64 / start.elapsed().as_secs_f64())
                );
            }
        }
        return;
    }
    println!(
        "| file | URLs | checks/s ours `check_url` | checks/s ours `check` (path) | \
         `path_params_query`/s | checks/s texting_robots `allowed` | ratio (median round) | \
         parse µs ours | parse µs texting_robots |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for file in &corpus {
        if !filter.is_empty() && !filter.iter().any(|f| file.name.contains(f.as_str())) {
            continue;
        }
        let row = measure(file, want_urls, rounds);
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1}x | {:.1} | {:.1} |",
            row.name,
            row.urls,
            fmt_rate(row.ours_url),
            fmt_rate(row.ours_path),
            fmt_rate(row.extract),
            fmt_rate(row.texting_url),
            row.ratio,
            1e6 / row.parse_ours,
            1e6 / row.parse_texting,
        );
        rows.push(row);
    }
    let real: Vec<&Row> = rows
        .iter()
        .filter(|r| r.name != common::SYNTHETIC)
        .collect();
    if !real.is_empty() {
        println!(
            "| **geometric mean, {} real files** | | {} | {} | {} | {} | **{:.1}x** | {:.1} | {:.1} |",
            real.len(),
            fmt_rate(geomean(real.iter().map(|r| r.ours_url))),
            fmt_rate(geomean(real.iter().map(|r| r.ours_path))),
            fmt_rate(geomean(real.iter().map(|r| r.extract))),
            fmt_rate(geomean(real.iter().map(|r| r.texting_url))),
            geomean(real.iter().map(|r| r.ratio)),
            1e6 / geomean(real.iter().map(|r| r.parse_ours)),
            1e6 / geomean(real.iter().map(|r| r.parse_texting)),
        );
    }
}
