//! The one Prometheus registry of the daemon (`GET /metrics`). See `docs/metrics.md`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub type Labels = Vec<(String, String)>;

fn l(k: &str, v: &str) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

/// Every metric, registered once.
pub struct Metrics {
    registry: Registry,
    pub urls_accepted: Counter,
    pub urls_duplicate: Counter,
    pub urls_rejected: Family<Labels, Counter>,
    pub urls_queued: Gauge,
    pub robots_hosts: Family<Labels, Gauge>,
    pub robots_fetches: Family<Labels, Counter>,
    pub page_fetches: Family<Labels, Counter>,
    pub crawl_outcomes: Family<Labels, Counter>,
    pub fetched_bytes: Counter,
    pub fetch_latency: Histogram,
    pub politeness_wait: Histogram,
    pub hosts_backoff: Gauge,
    pub hosts_paused: Gauge,
    pub crawl_delay_clamped: Gauge,
    pub warc_bytes: Counter,
    pub in_flight: Gauge,
    pub store_size: Gauge,
    pub spool_files: Family<Labels, Counter>,
    pub redirect_chains_stopped: Counter,
    pub admin_connections: Gauge,
    pub admin_connections_refused: Counter,
    pub admin_timeouts: Family<Labels, Counter>,
    pub crawl_log_reopens: Counter,
    pub crawl_drained: Counter,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("frontierd");
        let m = Metrics {
            urls_accepted: Counter::default(),
            urls_duplicate: Counter::default(),
            urls_rejected: Family::default(),
            urls_queued: Gauge::default(),
            robots_hosts: Family::default(),
            robots_fetches: Family::default(),
            page_fetches: Family::default(),
            crawl_outcomes: Family::default(),
            fetched_bytes: Counter::default(),
            fetch_latency: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            politeness_wait: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            hosts_backoff: Gauge::default(),
            hosts_paused: Gauge::default(),
            crawl_delay_clamped: Gauge::default(),
            warc_bytes: Counter::default(),
            in_flight: Gauge::default(),
            store_size: Gauge::default(),
            spool_files: Family::default(),
            redirect_chains_stopped: Counter::default(),
            admin_connections: Gauge::default(),
            admin_connections_refused: Counter::default(),
            admin_timeouts: Family::default(),
            crawl_log_reopens: Counter::default(),
            crawl_drained: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "urls_accepted",
            "URLs queued (submitted or discovered)",
            m.urls_accepted.clone(),
        );
        registry.register(
            "urls_duplicate",
            "URLs refused as already seen",
            m.urls_duplicate.clone(),
        );
        registry.register(
            "urls_rejected",
            "Submitted lines refused, by reason (canonicalizer code, not-utf8, too-long)",
            m.urls_rejected.clone(),
        );
        registry.register(
            "urls_queued",
            "URLs waiting in the frontier",
            m.urls_queued.clone(),
        );
        registry.register(
            "robots_hosts",
            "Origins by robots.txt state",
            m.robots_hosts.clone(),
        );
        registry.register(
            "robots_fetches",
            "robots.txt fetches by outcome",
            m.robots_fetches.clone(),
        );
        registry.register(
            "page_fetches",
            "Page fetches by status class (2xx, 3xx, 4xx, 5xx, network)",
            m.page_fetches.clone(),
        );
        registry.register(
            "crawl_outcomes",
            "Crawl log lines by outcome",
            m.crawl_outcomes.clone(),
        );
        registry.register(
            "fetched_bytes",
            "Body bytes fetched (pages and robots.txt)",
            m.fetched_bytes.clone(),
        );
        registry.register(
            "fetch_latency_seconds",
            "Time from request to the end of the body",
            m.fetch_latency.clone(),
        );
        registry.register(
            "politeness_wait_seconds",
            "Per page: how long politeness (host gap, back-off, robots hold) held it back once it was at the head of its host queue with a free slot",
            m.politeness_wait.clone(),
        );
        registry.register(
            "hosts_in_backoff",
            "Hosts backing off after 429/503/errors",
            m.hosts_backoff.clone(),
        );
        registry.register(
            "hosts_paused",
            "Hosts paused by the operator",
            m.hosts_paused.clone(),
        );
        registry.register(
            "crawl_delays_clamped",
            "Crawl-delays clamped to politeness.max_crawl_delay since start",
            m.crawl_delay_clamped.clone(),
        );
        registry.register(
            "warc_bytes_written",
            "Compressed WARC bytes written",
            m.warc_bytes.clone(),
        );
        registry.register("in_flight", "Fetches in flight", m.in_flight.clone());
        registry.register(
            "store_size_bytes",
            "Frontier store size on disk",
            m.store_size.clone(),
        );
        registry.register(
            "spool_files",
            "Spool entries handled, by result: ok, with-rejects, or rejected-* (moved to spool/rejected/: directory, fifo, socket, device, other, dangling-link, link-to-non-file, unreadable)",
            m.spool_files.clone(),
        );
        registry.register(
            "redirect_chains_stopped",
            "Redirect chains cut at scope.max_redirect_hops (the Location past the limit was not queued)",
            m.redirect_chains_stopped.clone(),
        );
        registry.register(
            "admin_connections",
            "Admin API connections open",
            m.admin_connections.clone(),
        );
        registry.register(
            "admin_connections_refused",
            "Admin API connections refused with a 503 because admin.max_connections were open",
            m.admin_connections_refused.clone(),
        );
        registry.register(
            "admin_timeouts",
            "Admin API requests cut off, by phase (header: admin.header_read_timeout, request: admin.request_timeout)",
            m.admin_timeouts.clone(),
        );
        registry.register(
            "crawl_log_reopens",
            "Crawl log reopened on SIGHUP (log rotation)",
            m.crawl_log_reopens.clone(),
        );
        registry.register(
            "crawl_drained",
            "Times the crawl drained: nothing queued, nothing in flight",
            m.crawl_drained.clone(),
        );
        Metrics { registry, ..m }
    }

    pub fn rejected(&self, reason: &str) {
        self.urls_rejected.get_or_create(&l("reason", reason)).inc();
    }
    pub fn robots_fetch(&self, outcome: &str) {
        self.robots_fetches
            .get_or_create(&l("outcome", outcome))
            .inc();
    }
    pub fn page_fetch(&self, class: &str) {
        self.page_fetches.get_or_create(&l("class", class)).inc();
    }
    pub fn outcome(&self, outcome: &str) {
        self.crawl_outcomes
            .get_or_create(&l("outcome", outcome))
            .inc();
    }
    pub fn robots_state(&self, state: &str, n: i64) {
        self.robots_hosts.get_or_create(&l("state", state)).set(n);
    }
    pub fn admin_timeout(&self, phase: &str) {
        self.admin_timeouts.get_or_create(&l("phase", phase)).inc();
    }
    pub fn spool_file(&self, result: &str) {
        self.spool_files.get_or_create(&l("result", result)).inc();
    }

    /// Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
