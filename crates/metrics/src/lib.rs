//! The one Prometheus registry of the daemon (`GET /metrics`): every metric's name, type,
//! labels and HELP text, and the two exposition formats. See `docs/metrics.md`.
//!
//! Must never: log, or count on its own. Only the daemon's internal events change a
//! metric, so a metric and its log line never disagree.
//!
//! `prometheus_client` encodes OpenMetrics, which names a counter family `x` and its sample
//! `x_total`. Prometheus' own text format 0.0.4 (what `promtool check metrics` and most other
//! consumers read) wants HELP/TYPE on `x_total` and no `# EOF`, so `/metrics` serves 0.0.4 by
//! default, converted here, and OpenMetrics to clients whose `Accept` asks for it.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

mod cluster;
mod disk;
mod register;
pub use cluster::ClusterMetrics;
pub use disk::DiskMetrics;

/// The label set of a metric family.
pub type Labels = Vec<(String, String)>;

/// One label pair, for `Family::get_or_create`.
pub fn l(k: &str, v: &str) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

/// Every metric, registered once.
pub struct Metrics {
    registry: Registry,
    pub urls_accepted: Counter,
    pub urls_duplicate: Counter,
    pub urls_rejected: Family<Labels, Counter>,
    pub urls_queued: Gauge,
    pub urls_queued_by_reason: Family<Labels, Gauge>,
    pub config_warnings: Gauge,
    pub page_failures: Family<Labels, Counter>,
    pub robots_hosts: Family<Labels, Gauge>,
    pub robots_fetches: Family<Labels, Counter>,
    pub page_fetches: Family<Labels, Counter>,
    pub crawl_outcomes: Family<Labels, Counter>,
    pub fetched_bytes: Counter,
    pub fetch_latency: Histogram,
    pub politeness_wait: Histogram,
    pub hosts_backoff: Gauge,
    pub hosts_paused: Gauge,
    pub open_connections: Gauge,
    pub crawl_delay_clamped: Counter,
    /// The frontier's cumulative clamp count already added to `crawl_delay_clamped`.
    crawl_delay_clamped_seen: AtomicU64,
    pub warc_bytes: Counter,
    pub in_flight: Gauge,
    pub completion_batches: Counter,
    pub completion_batch_size: Histogram,
    pub store_size: Gauge,
    pub journal_checkpoints: Counter,
    pub journal_checkpoint_hosts: Counter,
    pub spool_files: Family<Labels, Counter>,
    pub redirect_chains_stopped: Counter,
    pub admin_connections: Gauge,
    pub admin_connections_refused: Counter,
    pub admin_timeouts: Family<Labels, Counter>,
    pub crawl_log_reopens: Counter,
    pub crawl_log_write_failures: Counter,
    pub crawl_drained: Counter,
    pub leases_returned: Counter,
    pub robots_transitions: Family<Labels, Counter>,
    pub pages_completed: Counter,
    pub warc_write_failures: Counter,
    pub revisits: Family<Labels, Counter>,
    pub revisits_due: Counter,
    pub revisits_gone: Counter,
    /// The frontier's cumulative due and gone counts already added to the two above.
    recrawl_seen: [AtomicU64; 2],
    pub grpc_urls_served: Counter,
    pub grpc_acks: Family<Labels, Counter>,
    pub grpc_leases_expired: Counter,
    pub grpc_rpc_errors: Family<Labels, Counter>,
    pub grpc_unauthenticated: Counter,
    pub grpc_urls_deleted: Family<Labels, Counter>,
    pub grpc_log_level_changes: Counter,
    pub sitemaps: Family<Labels, Counter>,
    pub sitemap_urls: Family<Labels, Counter>,
    pub sitemap_lastmod: Family<Labels, Counter>,
    pub dns_lookups: Family<Labels, Counter>,
    /// The fetcher's cumulative lookups per result already added to `dns_lookups`.
    dns_lookups_seen: [AtomicU64; 6],
    pub dns_cache_entries: Gauge,
    pub fetch_dns_failures: Family<Labels, Counter>,
    pub address_refusals: Family<Labels, Counter>,
    pub frontier_call_failures: Family<Labels, Counter>,
    pub ip_groups: Gauge,
    pub ip_waits: Counter,
    /// The frontier's cumulative IP waits already added to `ip_waits`.
    ip_waits_seen: AtomicU64,
    pub host_address_changes: Counter,
    pub host_resolutions: Family<Labels, Counter>,
    pub cluster: ClusterMetrics,
    pub disk: DiskMetrics,
}

impl Default for Metrics {
    /// Every metric at zero, registered nowhere ([`Metrics::new`] registers them).
    fn default() -> Metrics {
        Metrics {
            urls_accepted: Counter::default(),
            urls_duplicate: Counter::default(),
            urls_rejected: Family::default(),
            urls_queued: Gauge::default(),
            urls_queued_by_reason: Family::default(),
            config_warnings: Gauge::default(),
            page_failures: Family::default(),
            robots_hosts: Family::default(),
            robots_fetches: Family::default(),
            page_fetches: Family::default(),
            crawl_outcomes: Family::default(),
            fetched_bytes: Counter::default(),
            fetch_latency: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            politeness_wait: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            hosts_backoff: Gauge::default(),
            hosts_paused: Gauge::default(),
            open_connections: Gauge::default(),
            crawl_delay_clamped: Counter::default(),
            crawl_delay_clamped_seen: AtomicU64::new(0),
            warc_bytes: Counter::default(),
            in_flight: Gauge::default(),
            completion_batches: Counter::default(),
            completion_batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            store_size: Gauge::default(),
            journal_checkpoints: Counter::default(),
            journal_checkpoint_hosts: Counter::default(),
            spool_files: Family::default(),
            redirect_chains_stopped: Counter::default(),
            admin_connections: Gauge::default(),
            admin_connections_refused: Counter::default(),
            admin_timeouts: Family::default(),
            crawl_log_reopens: Counter::default(),
            crawl_log_write_failures: Counter::default(),
            crawl_drained: Counter::default(),
            leases_returned: Counter::default(),
            robots_transitions: Family::default(),
            pages_completed: Counter::default(),
            warc_write_failures: Counter::default(),
            revisits: Family::default(),
            revisits_due: Counter::default(),
            revisits_gone: Counter::default(),
            recrawl_seen: [AtomicU64::new(0), AtomicU64::new(0)],
            grpc_urls_served: Counter::default(),
            grpc_acks: Family::default(),
            grpc_leases_expired: Counter::default(),
            grpc_rpc_errors: Family::default(),
            grpc_unauthenticated: Counter::default(),
            grpc_urls_deleted: Family::default(),
            grpc_log_level_changes: Counter::default(),
            sitemaps: Family::default(),
            sitemap_urls: Family::default(),
            sitemap_lastmod: Family::default(),
            dns_lookups: Family::default(),
            dns_lookups_seen: Default::default(),
            dns_cache_entries: Gauge::default(),
            fetch_dns_failures: Family::default(),
            address_refusals: Family::default(),
            frontier_call_failures: Family::default(),
            ip_groups: Gauge::default(),
            ip_waits: Counter::default(),
            ip_waits_seen: AtomicU64::new(0),
            host_address_changes: Counter::default(),
            host_resolutions: Family::default(),
            cluster: ClusterMetrics::default(),
            disk: DiskMetrics::default(),
            registry: Registry::default(),
        }
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics::default();
        let mut registry = Registry::with_prefix("frontierd");
        m.register_intake_and_grpc(&mut registry);
        m.register_fetching(&mut registry);
        m.register_store_and_outputs(&mut registry);
        m.register_network(&mut registry);
        m.cluster.register(&mut registry);
        m.disk.register(&mut registry);
        Metrics { registry, ..m }
    }

    /// Feed `dns_lookups{result}` from the fetcher's counts since start (they only grow).
    pub fn dns_lookups_total(&self, stats: &fetcher::DnsStats) {
        for (i, result) in fetcher::DnsResult::ALL.iter().enumerate() {
            let cumulative = stats.lookups[i];
            let seen = self.dns_lookups_seen[i].fetch_max(cumulative, Ordering::Relaxed);
            let c = self
                .dns_lookups
                .get_or_create(&l("result", result.as_str()));
            if cumulative > seen {
                c.inc_by(cumulative - seen);
            }
        }
        self.dns_cache_entries.set(stats.cache_entries as i64);
    }

    /// Feed `ip_waits` from the frontier's count since open (it only grows).
    pub fn ip_waits_total(&self, cumulative: u64) {
        let seen = self.ip_waits_seen.fetch_max(cumulative, Ordering::Relaxed);
        if cumulative > seen {
            self.ip_waits.inc_by(cumulative - seen);
        }
    }

    // Events count through internal_events (one type per event); what is set here are the
    // snapshot gauges stats.rs refreshes from the frontier.

    /// `urls_queued_by_reason{reason}`.
    pub fn queued_by_reason(&self, reason: &str, n: i64) {
        self.urls_queued_by_reason
            .get_or_create(&l("reason", reason))
            .set(n);
    }
    /// `robots_hosts{state}`.
    pub fn robots_state(&self, state: &str, n: i64) {
        self.robots_hosts.get_or_create(&l("state", state)).set(n);
    }

    /// Feed `crawl_delays_clamped` from the frontier's count since open (it only grows):
    /// adds what the counter has not seen yet, once, however many scrapes race.
    pub fn crawl_delays_clamped_total(&self, cumulative: u64) {
        let seen = self
            .crawl_delay_clamped_seen
            .fetch_max(cumulative, Ordering::Relaxed);
        if cumulative > seen {
            self.crawl_delay_clamped.inc_by(cumulative - seen);
        }
    }

    /// Feed `revisits_due` and `revisits_gone` from the frontier's counts since open
    /// (they only grow), as [`Metrics::crawl_delays_clamped_total`] does.
    pub fn recrawl_totals(&self, due: u64, gone: u64) {
        for (i, (cumulative, counter)) in [(due, &self.revisits_due), (gone, &self.revisits_gone)]
            .into_iter()
            .enumerate()
        {
            let seen = self.recrawl_seen[i].fetch_max(cumulative, Ordering::Relaxed);
            if cumulative > seen {
                counter.inc_by(cumulative - seen);
            }
        }
    }

    /// The exposition in `format`.
    pub fn encode(&self, format: Format) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        match format {
            Format::OpenMetrics => out,
            Format::PrometheusText => openmetrics_to_prometheus_text(&out),
        }
    }
}

/// The exposition formats `GET /metrics` answers in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text, as `prometheus_client` encodes it.
    OpenMetrics,
    /// Prometheus text format 0.0.4.
    PrometheusText,
}

impl Format {
    /// OpenMetrics when `Accept` names `application/openmetrics-text` with a quality at least
    /// that of the best text/plain range (Prometheus itself asks this way); 0.0.4 otherwise,
    /// including without an `Accept` header.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let mut openmetrics = 0.0f32;
        let mut plain = 0.0f32;
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(0.0));
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => plain = plain.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= plain {
            Format::OpenMetrics
        } else {
            Format::PrometheusText
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Rewrites an OpenMetrics text exposition as Prometheus text format 0.0.4: HELP/TYPE of a
/// counter family `x` name `x_total` (its sample), an info family `x` becomes the gauge
/// `x_info`, `unknown` becomes `untyped` (stateset and gaugehistogram too, which 0.0.4 lacks),
/// `# UNIT`, `# EOF`, counters' `_created` samples and exemplars are dropped, and timestamps go
/// from seconds to milliseconds. Works on any registry's output, not just ours.
pub fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let mut kinds: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                kinds.insert(name, kind.trim());
            }
        }
    }
    let renamed = |name: &str| -> String {
        match kinds.get(name) {
            Some(&"counter") => format!("{name}_total"),
            Some(&"info") => format!("{name}_info"),
            _ => name.to_string(),
        }
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            // 0.0.4 escapes only backslash and newline in HELP
            let help = help.replace("\\\"", "\"");
            out.push_str(&format!("# HELP {} {help}\n", renamed(name)));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = match kind.trim() {
                "counter" | "gauge" | "histogram" | "summary" => kind.trim(),
                "info" => "gauge",
                _ => "untyped",
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
        } else if line.starts_with('#') {
            // # UNIT, # EOF and other comments have no 0.0.4 form
        } else if !line.trim().is_empty() {
            if let Some(sample) = prometheus_sample(line, &kinds) {
                out.push_str(&sample);
                out.push('\n');
            }
        }
    }
    out
}

/// One OpenMetrics sample line in 0.0.4 form; None for samples 0.0.4 has no place for.
fn prometheus_sample(line: &str, kinds: &std::collections::HashMap<&str, &str>) -> Option<String> {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = &line[..name_end];
    if let Some(family) = name.strip_suffix("_created") {
        if kinds.get(family) == Some(&"counter") {
            return None;
        }
    }
    // the label set ends at the first `}` outside a quoted value
    let mut end = name_end;
    if line[name_end..].starts_with('{') {
        let mut quoted = false;
        let mut escaped = false;
        for (i, c) in line[name_end..].char_indices() {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = !quoted;
            } else if c == '}' && !quoted {
                end = name_end + i + 1;
                break;
            }
        }
    }
    let series = &line[..end];
    // value [timestamp] [# exemplar]
    let rest = line[end..].split(" # ").next().unwrap_or("");
    let mut fields = rest.split_whitespace();
    let value = fields.next()?;
    match fields.next().and_then(|t| t.parse::<f64>().ok()) {
        Some(ts) => Some(format!("{series} {value} {}", (ts * 1000.0).round() as i64)),
        None => Some(format!("{series} {value}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::info::Info;
    use prometheus_client::registry::Unit;

    #[test]
    fn counters_are_named_total_in_prometheus_text() {
        let mut r = Registry::with_prefix("t");
        let c: Counter = Counter::default();
        c.inc_by(3);
        r.register("requests", "Requests served", c);
        let f: Family<Labels, Counter> = Family::default();
        f.get_or_create(&l("class", "2xx")).inc();
        r.register("fetches", "Fetches \"by\" class", f);
        let g: Gauge = Gauge::default();
        g.set(-2);
        r.register("queued", "Queued", g);
        let secs: Counter = Counter::default();
        r.register_with_unit("busy", "Busy time", Unit::Seconds, secs);
        r.register("build", "Build", Info::new(vec![("version", "1.2")]));
        let h = Histogram::new([1.0].into_iter());
        h.observe(0.5);
        r.register("wait_seconds", "Wait", h);
        let mut om = String::new();
        encode(&mut om, &r).unwrap();
        assert!(om.ends_with("# EOF\n"), "{om}");

        let text = openmetrics_to_prometheus_text(&om);
        let expected = r#"# HELP t_requests_total Requests served.
# TYPE t_requests_total counter
t_requests_total 3
# HELP t_fetches_total Fetches "by" class.
# TYPE t_fetches_total counter
t_fetches_total{class="2xx"} 1
# HELP t_queued Queued.
# TYPE t_queued gauge
t_queued -2
# HELP t_busy_seconds_total Busy time.
# TYPE t_busy_seconds_total counter
t_busy_seconds_total 0
# HELP t_build_info Build.
# TYPE t_build_info gauge
t_build_info{version="1.2"} 1
# HELP t_wait_seconds Wait.
# TYPE t_wait_seconds histogram
t_wait_seconds_sum 0.5
t_wait_seconds_count 1
t_wait_seconds_bucket{le="1.0"} 1
t_wait_seconds_bucket{le="+Inf"} 1
"#;
        assert_eq!(text, expected, "from:\n{om}");
    }

    #[test]
    fn created_exemplars_and_timestamps_get_their_0_0_4_form() {
        let om = r#"# HELP x Things.
# TYPE x counter
x_total{path="/a } # b"} 4 1700000000.5 # {trace="1"} 1.0
x_created{path="/a } # b"} 1699999999.0
# TYPE y unknown
y 7
# EOF
"#;
        let expected = r#"# HELP x_total Things.
# TYPE x_total counter
x_total{path="/a } # b"} 4 1700000000500
# TYPE y untyped
y 7
"#;
        assert_eq!(openmetrics_to_prometheus_text(om), expected);
    }

    /// What promtool's linter demands of every family, checked on the daemon's own registry
    /// with a child in every labelled family.
    #[test]
    fn every_daemon_metric_has_help_and_a_type_matching_its_samples() {
        let m = Metrics::new();
        m.urls_rejected
            .get_or_create(&l("reason", "bad-scheme"))
            .inc();
        m.robots_fetches.get_or_create(&l("outcome", "2xx")).inc();
        m.page_fetches.get_or_create(&l("class", "2xx")).inc();
        m.crawl_outcomes
            .get_or_create(&l("outcome", "fetched"))
            .inc();
        m.robots_state("fresh", 1);
        m.spool_files.get_or_create(&l("result", "ok")).inc();
        m.fetch_latency.observe(0.1);
        m.politeness_wait.observe(0.1);
        let text = m.encode(Format::PrometheusText);
        assert!(!text.contains("# EOF"), "{text}");
        let mut help = std::collections::HashSet::new();
        let mut kinds = std::collections::HashMap::new();
        for line in text.lines() {
            let mut w = line.split_whitespace();
            match (w.next(), w.next(), w.next()) {
                (Some("#"), Some("HELP"), Some(name)) => {
                    let text = line.splitn(4, ' ').nth(3).unwrap_or("");
                    assert!(text.len() > 3, "{name}: empty help");
                    help.insert(name.to_string());
                }
                (Some("#"), Some("TYPE"), Some(name)) => {
                    kinds.insert(name.to_string(), w.next().unwrap_or("").to_string());
                }
                _ => {
                    let name = &line[..line.find(['{', ' ']).unwrap_or(line.len())];
                    let family = kinds
                        .iter()
                        .find(|(f, k)| match k.as_str() {
                            "histogram" => ["_bucket", "_sum", "_count"]
                                .iter()
                                .any(|s| name == format!("{f}{s}")),
                            _ => name == f.as_str(),
                        })
                        .unwrap_or_else(|| panic!("sample {name} has no TYPE:\n{text}"));
                    assert!(help.contains(family.0), "{name}: no HELP");
                }
            }
        }
        for (name, kind) in &kinds {
            assert!(help.contains(name), "{name}: no HELP");
            assert_eq!(
                kind == "counter",
                name.ends_with("_total"),
                "{name} is a {kind}: counters, and only counters, end in _total"
            );
        }
        assert_eq!(
            kinds
                .get("frontierd_crawl_delays_clamped_total")
                .map(String::as_str),
            Some("counter")
        );
    }

    #[test]
    fn clamped_counter_follows_the_cumulative_count_once() {
        let m = Metrics::new();
        m.crawl_delays_clamped_total(2);
        m.crawl_delays_clamped_total(2);
        m.crawl_delays_clamped_total(5);
        // a stale (smaller) reading from a racing scrape adds nothing
        m.crawl_delays_clamped_total(3);
        assert_eq!(m.crawl_delay_clamped.get(), 5);
    }

    #[test]
    fn negotiation_follows_accept() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text")),
            Format::OpenMetrics
        );
        for plain in [
            None,
            Some(""),
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4"),
            Some("application/openmetrics-text;q=0.2, text/plain"),
            Some("application/openmetrics-text;q=0"),
            Some("application/json"),
        ] {
            assert_eq!(
                Format::negotiate(plain),
                Format::PrometheusText,
                "{plain:?}"
            );
        }
        assert!(Format::PrometheusText
            .content_type()
            .starts_with("text/plain; version=0.0.4"));
    }
}
