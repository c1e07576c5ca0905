//! `cargo bench -p robots-policy --bench robots`: parse throughput (bytes/s) and match
//! throughput (checks/s) of robots-policy, `texting_robots` and `robotstxt` on the corpus
//! in `../shared/corpus/robots` (see `common/mod.rs`), agent `Googlebot` throughout.
//!
//! - parse: `AgentPolicy::parse(body, agent)` (parse + compile for the agent) against
//!   `texting_robots::Robot::new(agent, body)`; `robotstxt` has no parsed form, so its
//!   entry is one full `one_agent_allowed_by_robots` call (a parse with one URL matched).
//! - match: checks of absolute URLs from `gen_urls.py` against the parsed form;
//!   `robotstxt` re-parses the whole file on every check, so its checks/s is its
//!   per-URL cost including the parse, measured on far fewer URLs.
//!
//! A filter such as `cargo bench -p robots-policy --bench robots -- match/synthetic`
//! selects benchmarks as usual.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use robots_policy::AgentPolicy;

use common::{robotstxt_allowed, CorpusFile, AGENT};

/// URLs per iteration for robots-policy, and for texting_robots on the real files.
const MATCH_URLS: usize = 10_000;
/// texting_robots tries every rule: about 13 000 checks/s on the synthetic file.
const MATCH_URLS_SLOW: usize = 1_000;
/// Bytes robotstxt should parse per iteration (it parses once per URL).
const ROBOTSTXT_BYTES_PER_ITER: usize = 2_000_000;

fn robotstxt_urls(file: &CorpusFile) -> usize {
    (ROBOTSTXT_BYTES_PER_ITER / file.body.len().max(1)).clamp(4, 1_000)
}

fn parse(c: &mut Criterion, corpus: &[CorpusFile]) {
    let mut group = c.benchmark_group("parse");
    for file in corpus {
        group.throughput(Throughput::Bytes(file.body.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("robots_policy", &file.name),
            file,
            |b, f| b.iter(|| AgentPolicy::parse(black_box(&f.body), AGENT)),
        );
        group.bench_with_input(
            BenchmarkId::new("texting_robots", &file.name),
            file,
            |b, f| b.iter(|| texting_robots::Robot::new(AGENT, black_box(&f.body)).ok()),
        );
        let url = file.urls[0].as_str();
        group.bench_with_input(
            BenchmarkId::new("robotstxt_parse_and_1_check", &file.name),
            file,
            |b, f| b.iter(|| robotstxt_allowed(black_box(&f.text), url)),
        );
    }
    group.finish();
}

fn matching(c: &mut Criterion, corpus: &[CorpusFile]) {
    let mut group = c.benchmark_group("match");
    // Each iteration is thousands of checks (or robotstxt's full re-parses): long enough
    // for flat sampling, which keeps the slow entries within the measurement time.
    group.sampling_mode(SamplingMode::Flat);
    for file in corpus {
        let ours = AgentPolicy::parse(&file.body, AGENT);
        let urls = file.url_subset(MATCH_URLS);
        group.throughput(Throughput::Elements(urls.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("robots_policy", &file.name),
            &urls,
            |b, urls| {
                b.iter(|| {
                    urls.iter()
                        .filter(|u| ours.check_url(black_box(u)).allowed)
                        .count()
                })
            },
        );

        let theirs = texting_robots::Robot::new(AGENT, &file.body).expect("texting_robots parse");
        let n = if file.is_synthetic() {
            MATCH_URLS_SLOW
        } else {
            MATCH_URLS
        };
        let urls = file.url_subset(n);
        group.throughput(Throughput::Elements(urls.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("texting_robots", &file.name),
            &urls,
            |b, urls| b.iter(|| urls.iter().filter(|u| theirs.allowed(black_box(u))).count()),
        );

        let urls = file.url_subset(robotstxt_urls(file));
        group.throughput(Throughput::Elements(urls.len() as u64));
        group.bench_with_input(
            BenchmarkId::new("robotstxt_reparse_per_check", &file.name),
            &urls,
            |b, urls| {
                b.iter(|| {
                    urls.iter()
                        .filter(|u| robotstxt_allowed(&file.text, black_box(u)))
                        .count()
                })
            },
        );
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let corpus = common::load();
    parse(c, &corpus);
    matching(c, &corpus);
}

criterion_group! {
    name = robots;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(robots);
