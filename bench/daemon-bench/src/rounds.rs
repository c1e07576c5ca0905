//! `--rounds`: each ratio's median and range over the rounds at a worker count. On a
//! machine whose speed drifts (the bare client's own pages/s moved 2.5x between two runs a
//! minute apart), one round's ratio says little; the ratios within a round are what is
//! compared, and their median over rounds is the figure.

use crate::CrawlRow;

/// Median and range of `values` (none when empty).
fn spread(mut values: Vec<f64>) -> Option<(f64, f64, f64)> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    Some((median, values[0], values[n - 1]))
}

fn cell(s: Option<(f64, f64, f64)>, unit: &str, scale: f64, decimals: usize) -> String {
    match s {
        Some((m, lo, hi)) => format!(
            "{:.*}{unit} ({:.*}-{:.*})",
            decimals,
            m * scale,
            decimals,
            lo * scale,
            decimals,
            hi * scale
        ),
        None => "-".into(),
    }
}

/// One ratio per round that has both sides.
fn per_round(rows: &[&CrawlRow], f: impl Fn(&CrawlRow) -> Option<f64>) -> Option<(f64, f64, f64)> {
    spread(rows.iter().filter_map(|r| f(r)).collect())
}

/// The rounds of each worker count, in the order the counts ran.
fn by_workers(rows: &[CrawlRow]) -> Vec<(usize, Vec<&CrawlRow>)> {
    let mut workers: Vec<usize> = rows.iter().map(|r| r.workers).collect();
    workers.dedup();
    workers
        .into_iter()
        .map(|w| (w, rows.iter().filter(|r| r.workers == w).collect()))
        .collect()
}

/// The table of medians (and ranges) over the rounds, a row per worker count.
pub fn print_medians(rows: &[CrawlRow]) {
    println!();
    println!("Medians over the rounds (range in brackets); each ratio is taken within its round:");
    println!();
    println!("| workers | rounds | bare CPU/page | bare + WARC CPU/page | frontierd CPU/page | frontierd / bare: pages/s, CPU | frontierd / bare + WARC: pages/s, CPU |");
    println!("| ---: | ---: | --- | --- | --- | --- | --- |");
    for (w, rs) in by_workers(rows) {
        let bare_cpu = |r: &CrawlRow| r.bare.as_ref().map(|b| b.cpu_per_page());
        let warc_cpu = |r: &CrawlRow| r.bare_warc.as_ref().map(|b| b.cpu_per_page());
        let ours_cpu = |r: &CrawlRow| r.crawl.as_ref().map(|c| c.cpu_per_page);
        let ours_rate = |r: &CrawlRow| r.crawl.as_ref().map(|c| c.rate());
        let rate_to_bare = per_round(&rs, |r| Some(ours_rate(r)? / r.bare.as_ref()?.rate()));
        let cpu_to_bare = per_round(&rs, |r| Some(ours_cpu(r)? / bare_cpu(r)?));
        let rate_to_warc = per_round(&rs, |r| Some(ours_rate(r)? / r.bare_warc.as_ref()?.rate()));
        let cpu_to_warc = per_round(&rs, |r| Some(ours_cpu(r)? / warc_cpu(r)?));
        println!(
            "| {w} | {} | {} | {} | {} | {}, {} | {}, {} |",
            rs.len(),
            cell(per_round(&rs, bare_cpu), " µs", 1e6, 0),
            cell(per_round(&rs, warc_cpu), " µs", 1e6, 0),
            cell(per_round(&rs, ours_cpu), " µs", 1e6, 0),
            cell(rate_to_bare, " %", 100.0, 1),
            cell(cpu_to_bare, "x", 1.0, 1),
            cell(rate_to_warc, " %", 100.0, 1),
            cell(cpu_to_warc, "x", 1.0, 1),
        );
    }
}

/// `--paced-anchor`: frontierd against the bare client (and the archiving one) held to
/// frontierd's own pages/s in the same round, medians and ranges over the rounds.
pub fn print_paced(rows: &[CrawlRow]) {
    println!();
    println!("At frontierd's pages/s: the bare client (and the bare client + WARC) held to frontierd's rate of the same round; medians over the rounds (range in brackets):");
    println!();
    println!("| workers | rounds | frontierd pages/s | bare CPU/page at that rate | bare + WARC CPU/page at that rate | frontierd CPU/page | frontierd / bare at its rate: CPU | frontierd / bare + WARC at its rate: CPU, beyond it |");
    println!("| ---: | ---: | --- | --- | --- | --- | --- | --- |");
    for (w, rs) in by_workers(rows) {
        let ours_cpu = |r: &CrawlRow| r.crawl.as_ref().map(|c| c.cpu_per_page);
        let paced_cpu = |r: &CrawlRow| r.bare_paced.as_ref().map(|b| b.cpu_per_page());
        let warc_cpu = |r: &CrawlRow| r.bare_warc_paced.as_ref().map(|b| b.cpu_per_page());
        println!(
            "| {w} | {} | {} | {} | {} | {} | {} | {}, {} |",
            rs.len(),
            cell(
                per_round(&rs, |r| Some(r.crawl.as_ref()?.rate())),
                "",
                1.0,
                0
            ),
            cell(per_round(&rs, paced_cpu), " µs", 1e6, 0),
            cell(per_round(&rs, warc_cpu), " µs", 1e6, 0),
            cell(per_round(&rs, ours_cpu), " µs", 1e6, 0),
            cell(
                per_round(&rs, |r| Some(ours_cpu(r)? / paced_cpu(r)?)),
                "x",
                1.0,
                1
            ),
            cell(
                per_round(&rs, |r| Some(ours_cpu(r)? / warc_cpu(r)?)),
                "x",
                1.0,
                1
            ),
            cell(
                per_round(&rs, |r| Some(ours_cpu(r)? - warc_cpu(r)?)),
                " µs",
                1e6,
                0
            ),
        );
    }
}
