//! `cargo bench -p robots-policy --bench summary`: one pass over the corpus timed with
//! `Instant` (best of a few rounds), printed as the markdown table of docs/benchmarks.md,
//! plus a verdict comparison with `robotstxt` (Google's library ported to Rust) on
//! 10 000 URLs of every real file's list by default (every URL with
//! `FRONTIERD_ROBOTS_VERIFY_MAX=all`).
//!
//! Environment:
//! - `FRONTIERD_ROBOTS_CORPUS`: corpus directory (see `common/mod.rs`).
//! - `FRONTIERD_ROBOTS_VERIFY_MAX`: compare with robotstxt on this many URLs per real file,
//!   spread over the list (default 10 000; `all` for every URL: robotstxt re-parses the
//!   file for every URL, so all of them take some 20 minutes on two cores).
//! - `FRONTIERD_ROBOTS_VERIFY_SYNTHETIC`: the same for the 500 KiB synthetic file
//!   (default 1 000; some 25 ms per URL, all 100 000 take most of an hour).
//! - `FRONTIERD_ROBOTS_SHOW`: disagreements with the corrected reference printed per file
//!   (default 20); `FRONTIERD_ROBOTS_SHOW_PUBLISHED`: disagreements with the published
//!   crate only, explained by its matcher defect (default 3).
//!
//! The reference is checked twice: `robotstxt` 0.3.0 as published, and the same crate
//! with its pattern matcher replaced by Google's (see `common::GoogleMatches`).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use robots_policy::AgentPolicy;

use common::{robotstxt_allowed, robotstxt_fixed_allowed, CorpusFile, AGENT};

/// Rounds per measurement; the fastest is kept (the machine is shared, noise only slows).
const ROUNDS: usize = 3;
/// Minimum wall time of one round.
const ROUND_TIME: Duration = Duration::from_millis(150);

/// Units per second of `f` (which does `units` units of work per call), best of `ROUNDS`
/// rounds of at least `ROUND_TIME` each.
fn best_rate(units: usize, mut f: impl FnMut()) -> f64 {
    let mut best = 0.0f64;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut calls = 0usize;
        while calls == 0 || start.elapsed() < ROUND_TIME {
            f();
            calls += 1;
        }
        let rate = (units * calls) as f64 / start.elapsed().as_secs_f64();
        best = best.max(rate);
    }
    best
}

struct Row {
    name: String,
    bytes: usize,
    group_rules: usize,
    file_rules: usize,
    parse_ours: f64,
    parse_texting: f64,
    /// Parse plus one check: ours builds its floating-rule automaton on first use.
    parse_check_ours: f64,
    parse_check_texting: f64,
    checks_ours: f64,
    checks_texting: f64,
    checks_robotstxt: f64,
}

impl Row {
    fn match_ratio(&self) -> f64 {
        self.checks_ours / self.checks_texting
    }
    fn parse_ratio(&self) -> f64 {
        self.parse_ours / self.parse_texting
    }
}

/// A count from the environment; `all` means no limit.
fn env_usize(key: &str) -> Option<usize> {
    let value = std::env::var(key).ok()?;
    match value.trim() {
        "all" => Some(usize::MAX),
        v => v.parse().ok(),
    }
}

fn measure(file: &CorpusFile) -> Row {
    let body = &file.body;
    let ours = AgentPolicy::parse(body, AGENT);
    let theirs = texting_robots::Robot::new(AGENT, body).expect("texting_robots parse");

    let parse_ours = best_rate(body.len(), || {
        black_box(AgentPolicy::parse(black_box(body), AGENT));
    }) / 1e6;
    let parse_texting = best_rate(body.len(), || {
        black_box(texting_robots::Robot::new(AGENT, black_box(body)).ok());
    }) / 1e6;

    let first = file.url_subset(1);
    let first = first.first().copied().unwrap_or("https://www.example.com/");
    let parse_check_ours = best_rate(body.len(), || {
        black_box(AgentPolicy::parse(black_box(body), AGENT).check_url(first));
    }) / 1e6;
    let parse_check_texting = best_rate(body.len(), || {
        black_box(
            texting_robots::Robot::new(AGENT, black_box(body))
                .ok()
                .map(|r| r.allowed(first)),
        );
    }) / 1e6;

    let all = file.url_subset(usize::MAX);
    let checks_ours = best_rate(all.len(), || {
        for u in &all {
            black_box(ours.check_url(black_box(u)));
        }
    });
    // texting_robots tries every rule: a subset keeps the synthetic file to a second.
    let some = file.url_subset(if file.is_synthetic() {
        2_000
    } else {
        all.len()
    });
    let checks_texting = best_rate(some.len(), || {
        for u in &some {
            black_box(theirs.allowed(black_box(u)));
        }
    });
    // robotstxt re-parses per check: about 2 MB of parsing per round.
    let few = file.url_subset((2_000_000 / body.len().max(1)).clamp(4, 2_000));
    let checks_robotstxt = best_rate(few.len(), || {
        for u in &few {
            black_box(robotstxt_allowed(&file.text, black_box(u)));
        }
    });

    Row {
        name: file.name.clone(),
        bytes: body.len(),
        group_rules: ours.rules().filter(|r| !r.synthesized).count(),
        file_rules: file.file_rules(),
        parse_ours,
        parse_texting,
        parse_check_ours,
        parse_check_texting,
        checks_ours,
        checks_texting,
        checks_robotstxt,
    }
}

struct Disagreement {
    url: String,
    ours: bool,
    rule: Option<String>,
    /// robotstxt 0.3.0 as published.
    published: bool,
    /// robotstxt with Google's `Matches` restored (`common::GoogleMatches`).
    fixed: bool,
}

/// Verdicts of robots-policy and of robotstxt (as published, and with Google's `Matches`
/// restored) on `max` URLs spread over the list, on two threads.
/// Returns (URLs compared, URLs where ours differs from either).
fn verify(file: &CorpusFile, max: usize) -> (usize, Vec<Disagreement>) {
    let ours = AgentPolicy::parse(&file.body, AGENT);
    let urls = file.url_subset(max);
    let half = urls.len().div_ceil(2);
    let check = |chunk: &[&str]| -> Vec<Disagreement> {
        chunk
            .iter()
            .filter_map(|&url| {
                let verdict = ours.check_url(url);
                let published = robotstxt_allowed(&file.text, url);
                let fixed = robotstxt_fixed_allowed(&file.text, url);
                (verdict.allowed != published || verdict.allowed != fixed).then(|| Disagreement {
                    url: url.to_owned(),
                    ours: verdict.allowed,
                    rule: verdict
                        .rule
                        .and_then(|id| ours.rule(id))
                        .map(|r| format!("{} {} (line {})", r.kind.as_str(), r.pattern, r.line)),
                    published,
                    fixed,
                })
            })
            .collect()
    };
    let mut found = std::thread::scope(|s| {
        let (a, b) = urls.split_at(half);
        let other = s.spawn(|| check(b));
        let mut found = check(a);
        found.extend(other.join().expect("verify thread"));
        found
    });
    found.sort_by(|a, b| a.url.cmp(&b.url));
    (urls.len(), found)
}

fn verdict(allowed: bool) -> &'static str {
    if allowed {
        "allowed"
    } else {
        "disallowed"
    }
}

/// Shows the `robotstxt` 0.3.0 matcher defect on patterns taken from the corpus.
fn matcher_self_check() {
    use robotstxt::matcher::{LongestMatchRobotsMatchStrategy, RobotsMatchStrategy};
    println!(
        "
robotstxt 0.3.0 `matches` vs Google's `Matches` (path, pattern):"
    );
    for (path, pattern) in [
        ("/1/feature/x", "*/feature/*"),
        ("/104856/account/139361/feature/xhr.pdf", "*/feature/*"),
        ("/159082/ajax/reviews/877387.aspx", "/*/reviews/"),
        ("/b/page/login?p=?iid=&chn=ps/archive", "/b/*?iid=*&chn=ps"),
        ("/google/robotstxt/tree/master", "/*/*/tree/master"),
    ] {
        println!(
            "  {path:45} {pattern:22} robotstxt: {:5}  Google: {}",
            LongestMatchRobotsMatchStrategy::matches(path, pattern),
            common::GoogleMatches::matches(path, pattern)
        );
    }
}

fn geomean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v.ln(), n + 1));
    (sum / n as f64).exp()
}

fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it: skip.
    if !std::env::args().any(|a| a == "--bench") {
        println!("summary: run with `cargo bench -p robots-policy --bench summary`");
        return;
    }
    let corpus = common::load();
    let verify_max = env_usize("FRONTIERD_ROBOTS_VERIFY_MAX").unwrap_or(10_000);
    let verify_synthetic = env_usize("FRONTIERD_ROBOTS_VERIFY_SYNTHETIC").unwrap_or(1_000);
    let show = env_usize("FRONTIERD_ROBOTS_SHOW").unwrap_or(20);
    let show_published = env_usize("FRONTIERD_ROBOTS_SHOW_PUBLISHED").unwrap_or(3);

    let mut rows = Vec::new();
    for file in &corpus {
        eprintln!("measuring {} ...", file.name);
        rows.push(measure(file));
    }
    let real: Vec<&Row> = rows
        .iter()
        .filter(|r| r.name != common::SYNTHETIC)
        .collect();

    print_speed_table(&rows, &real);
    print_parse_with_first_check(&rows, &real);
    print_parse_back_to_back(&real);
    matcher_self_check();
    print_agreement(&corpus, verify_max, verify_synthetic, show, show_published);
}

/// The markdown table of docs/benchmarks.md: a row per file, then the geometric mean
/// of the real files (the synthetic one is an extreme, not a typical file).
fn print_speed_table(rows: &[Row], real: &[&Row]) {
    println!(
        "| file | bytes | rules (Googlebot group / file) | parse MB/s ours | parse MB/s \
         texting_robots | parse ratio | checks/s ours | checks/s texting_robots | checks/s \
         robotstxt (re-parses per check) | match ratio ours / texting_robots |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} / {} | {:.0} | {:.0} | {:.2}x | {} | {} | {} | {:.0}x |",
            r.name,
            r.bytes,
            r.group_rules,
            r.file_rules,
            r.parse_ours,
            r.parse_texting,
            r.parse_ratio(),
            fmt_rate(r.checks_ours),
            fmt_rate(r.checks_texting),
            fmt_rate(r.checks_robotstxt),
            r.match_ratio(),
        );
    }
    if !real.is_empty() {
        println!(
            "| **geometric mean, {} real files** | | | {:.0} | {:.0} | {:.2}x | {} | {} | {} | \
             **{:.0}x** |",
            real.len(),
            geomean(real.iter().map(|r| r.parse_ours)),
            geomean(real.iter().map(|r| r.parse_texting)),
            geomean(real.iter().map(|r| r.parse_ratio())),
            fmt_rate(geomean(real.iter().map(|r| r.checks_ours))),
            fmt_rate(geomean(real.iter().map(|r| r.checks_texting))),
            fmt_rate(geomean(real.iter().map(|r| r.checks_robotstxt))),
            geomean(real.iter().map(|r| r.match_ratio())),
        );
    }
}

/// Parse plus one check per file: ours builds its floating-rule automaton on first use,
/// so this is its cost for a file checked once.
fn print_parse_with_first_check(rows: &[Row], real: &[&Row]) {
    println!("\nparse + first check (ours builds its floating-rule automaton on first use), MB/s:");
    for r in rows {
        println!(
            "  {:<12} ours {:>5.0}  texting_robots {:>5.0}  ratio {:.2}x",
            r.name,
            r.parse_check_ours,
            r.parse_check_texting,
            r.parse_check_ours / r.parse_check_texting
        );
    }
    if !real.is_empty() {
        println!(
            "  geometric mean, real files: ratio {:.2}x",
            geomean(
                real.iter()
                    .map(|r| r.parse_check_ours / r.parse_check_texting)
            )
        );
    }
}

/// Parse throughput over all real files together: weighted by size, unlike the mean.
fn print_parse_back_to_back(real: &[&Row]) {
    let total_bytes: usize = real.iter().map(|r| r.bytes).sum();
    let total_ours: f64 = real.iter().map(|r| r.bytes as f64 / r.parse_ours).sum();
    let total_texting: f64 = real.iter().map(|r| r.bytes as f64 / r.parse_texting).sum();
    println!(
        "\nparse, all real files back to back: ours {:.0} MB/s, texting_robots {:.0} MB/s",
        total_bytes as f64 / total_ours,
        total_bytes as f64 / total_texting
    );
}

/// Compares verdicts with robotstxt on each file (`verify_max` URLs of a real file,
/// `verify_synthetic` of the synthetic one) and prints the counts, then up to `show`
/// disagreements with the corrected reference and `show_published` with the published
/// crate only.
fn print_agreement(
    corpus: &[CorpusFile],
    verify_max: usize,
    verify_synthetic: usize,
    show: usize,
    show_published: usize,
) {
    println!(
        "\nagreement with robotstxt (Google's library ported to Rust), agent {AGENT}: \
         as published / with Google's `Matches` restored"
    );
    let (mut total, mut total_published, mut total_fixed) = (0usize, 0usize, 0usize);
    for file in corpus {
        let max = if file.is_synthetic() {
            verify_synthetic
        } else {
            verify_max
        };
        let start = Instant::now();
        let (n, found) = verify(file, max);
        let published = found.iter().filter(|d| d.ours != d.published).count();
        let fixed: Vec<&Disagreement> = found.iter().filter(|d| d.ours != d.fixed).collect();
        total += n;
        total_published += published;
        total_fixed += fixed.len();
        println!(
            "  {}: {} URLs, {} / {} disagreements ({:.1} s)",
            file.name,
            n,
            published,
            fixed.len(),
            start.elapsed().as_secs_f64()
        );
        // Differences from the corrected reference first: those would be ours to fix.
        for d in fixed.iter().take(show) {
            print_disagreement("VS GOOGLE MATCHES", d);
        }
        for d in found
            .iter()
            .filter(|d| d.ours == d.fixed)
            .take(show_published)
        {
            print_disagreement("published only", d);
        }
    }
    println!(
        "  total: {total} URLs compared; {total_published} disagreements with robotstxt as \
         published, {total_fixed} with robotstxt + Google's Matches"
    );
}

fn print_disagreement(label: &str, d: &Disagreement) {
    println!(
        "    {label}  {}  ours: {} [{}]  robotstxt: {}  robotstxt+Matches: {}",
        d.url,
        verdict(d.ours),
        d.rule.as_deref().unwrap_or("no rule"),
        verdict(d.published),
        verdict(d.fixed),
    );
}
