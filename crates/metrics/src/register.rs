//! Every metric registered with its HELP text (docs/metrics.md describes each), by area so
//! that no registration list grows past a screen; `Metrics::new` calls each once.

use prometheus_client::registry::Registry;

use super::Metrics;

impl Metrics {
    /// URLs offered and their verdicts, the gRPC API's calls, configuration warnings.
    pub(super) fn register_intake_and_grpc(&self, r: &mut Registry) {
        r.register(
            "grpc_urls_served",
            "URLs handed out by the url-frontier gRPC API's GetURLs (each leased for delay_requestable)",
            self.grpc_urls_served.clone(),
        );
        r.register(
            "grpc_acks",
            "PutURLs / PutDiscovered items acknowledged, by status (OK, SKIPPED, FAIL)",
            self.grpc_acks.clone(),
        );
        r.register(
            "grpc_leases_expired",
            "GetURLs leases not reported by PutURLs within delay_requestable: taken back (one attempt counted, the URL behind its host's queued URLs, given up after politeness.max_attempts)",
            self.grpc_leases_expired.clone(),
        );
        r.register(
            "grpc_rpc_errors",
            "gRPC calls answered with an error status, by rpc and code (Unimplemented, InvalidArgument, ...)",
            self.grpc_rpc_errors.clone(),
        );
        r.register(
            "grpc_unauthenticated",
            "gRPC calls refused for a missing or wrong bearer token",
            self.grpc_unauthenticated.clone(),
        );
        r.register(
            "grpc_urls_deleted",
            "Queued URLs removed by the url-frontier gRPC API, by rpc (DeleteQueue, DeleteCrawl, PurgeURLs)",
            self.grpc_urls_deleted.clone(),
        );
        r.register(
            "grpc_log_level_changes",
            "Log filter changes made by the url-frontier gRPC API's SetLogLevel",
            self.grpc_log_level_changes.clone(),
        );
        r.register(
            "urls_accepted",
            "URLs queued (submitted or discovered)",
            self.urls_accepted.clone(),
        );
        r.register(
            "urls_duplicate",
            "URLs refused as already seen",
            self.urls_duplicate.clone(),
        );
        r.register(
            "urls_rejected",
            "Submitted lines refused, by reason (canonicalizer code, not-utf8, too-long)",
            self.urls_rejected.clone(),
        );
        r.register(
            "urls_queued",
            "URLs waiting in the frontier",
            self.urls_queued.clone(),
        );
        r.register(
            "urls_queued_by_reason",
            "URLs waiting in the frontier by what they wait for: eligible (could go now), politeness (host gap, back-off, free slot, own retry back-off), paused (host paused), robots-<state> (held by their origin's robots.txt state)",
            self.urls_queued_by_reason.clone(),
        );
        r.register(
            "config_warnings",
            "Configuration values accepted but below what the open web should get (see the WARN lines at start)",
            self.config_warnings.clone(),
        );
    }

    /// Fetches and their outcomes, politeness waits and back-off, what is in flight, completion batches.
    pub(super) fn register_fetching(&self, r: &mut Registry) {
        r.register(
            "page_failures",
            "Page fetches that failed, by kind: throttled (429, 503, Retry-After) and unreachable (refused, reset, DNS, TLS) back the host off; failed (other 5xx, malformed) retries the URL behind the queue; timed-out does the latter, or the former once 2 different URLs of a host time out in a row",
            self.page_failures.clone(),
        );
        r.register(
            "robots_hosts",
            "Origins by robots.txt state",
            self.robots_hosts.clone(),
        );
        r.register(
            "robots_fetches",
            "robots.txt fetches by outcome",
            self.robots_fetches.clone(),
        );
        r.register(
            "page_fetches",
            "Page fetches by status class (2xx, 3xx, 4xx, 5xx, network)",
            self.page_fetches.clone(),
        );
        r.register(
            "crawl_outcomes",
            "Crawl log lines by outcome",
            self.crawl_outcomes.clone(),
        );
        r.register(
            "fetched_bytes",
            "Body bytes fetched (pages and robots.txt)",
            self.fetched_bytes.clone(),
        );
        r.register(
            "fetch_latency_seconds",
            "Time from request to the end of the body",
            self.fetch_latency.clone(),
        );
        r.register(
            "politeness_wait_seconds",
            "Per page: how long politeness (host gap, back-off, robots hold) held it back once it was at the head of its host queue with a free slot",
            self.politeness_wait.clone(),
        );
        r.register(
            "hosts_in_backoff",
            "Hosts backing off after 429/503/errors",
            self.hosts_backoff.clone(),
        );
        r.register(
            "hosts_paused",
            "Hosts paused by the operator",
            self.hosts_paused.clone(),
        );
        r.register(
            "fetch_open_connections",
            "HTTP connections open: kept for reuse, in use, or closing",
            self.open_connections.clone(),
        );
        r.register(
            "crawl_delays_clamped",
            "Crawl-delays clamped to politeness.max_crawl_delay since start",
            self.crawl_delay_clamped.clone(),
        );
        r.register(
            "warc_bytes_written",
            "Compressed WARC bytes written",
            self.warc_bytes.clone(),
        );
        r.register("in_flight", "Fetches in flight", self.in_flight.clone());
        r.register(
            "completion_batches",
            "Batches of page and robots.txt outcomes applied to the frontier (one flush for the pages, one for the robots.txt outcomes)",
            self.completion_batches.clone(),
        );
        r.register(
            "completion_batch_size",
            "Page and robots.txt outcomes per batch applied to the frontier",
            self.completion_batch_size.clone(),
        );
    }

    /// The store, the spool, sitemaps, the admin API, the crawl log and the WARC files, the robots states, recrawl.
    pub(super) fn register_store_and_outputs(&self, r: &mut Registry) {
        r.register(
            "store_size_bytes",
            "Frontier store size on disk",
            self.store_size.clone(),
        );
        r.register(
            "store_journal_checkpoints",
            "Checkpoints of the host journal ended: every host record changed since the one before written to the store",
            self.journal_checkpoints.clone(),
        );
        r.register(
            "store_journal_checkpoint_hosts",
            "Host records written by ended checkpoints of the host journal",
            self.journal_checkpoint_hosts.clone(),
        );
        r.register(
            "spool_files",
            "Spool entries handled, by result: ok, with-rejects, or rejected-* (moved to spool/rejected/: directory, fifo, socket, device, other, dangling-link, link-to-non-file, unreadable)",
            self.spool_files.clone(),
        );
        r.register(
            "sitemaps",
            "Sitemaps by result: parsed, nested-index (an index listed by an index, not followed), a cut (too-many-urls, too-large, malformed, bad-gzip, not-a-sitemap), not-2xx (no body to parse), or not fetched (out-of-scope, invalid-url: a robots.txt Sitemap line)",
            self.sitemaps.clone(),
        );
        r.register(
            "sitemap_urls",
            "Entries of fetched sitemaps by result: queued, duplicate, rejected (by the canonicalizer), invalid-url, out-of-scope, outside-sitemap-path, nested-index, over-limit (past sitemaps.max_urls_per_file)",
            self.sitemap_urls.clone(),
        );
        r.register(
            "sitemap_lastmod",
            "lastmod of sitemap entries already known, by what it did: due (later than the last fetch: refetched now), not-newer, not-scheduled (not waiting in the due index), in-future (ignored), rejected",
            self.sitemap_lastmod.clone(),
        );
        r.register(
            "redirect_chains_stopped",
            "Redirect chains cut at scope.max_redirect_hops (the Location past the limit was not queued)",
            self.redirect_chains_stopped.clone(),
        );
        r.register(
            "admin_connections",
            "Admin API connections open",
            self.admin_connections.clone(),
        );
        r.register(
            "admin_connections_refused",
            "Admin API connections refused with a 503 because admin.max_connections were open",
            self.admin_connections_refused.clone(),
        );
        r.register(
            "admin_timeouts",
            "Admin API requests cut off, by phase (header: admin.header_read_timeout, request: admin.request_timeout)",
            self.admin_timeouts.clone(),
        );
        r.register(
            "crawl_log_reopens",
            "Crawl log reopened on SIGHUP (log rotation)",
            self.crawl_log_reopens.clone(),
        );
        r.register(
            "crawl_log_write_failures",
            "Crawl log lines that could not be written (disk full, ...)",
            self.crawl_log_write_failures.clone(),
        );
        r.register(
            "crawl_drained",
            "Times the crawl drained: nothing queued, nothing in flight",
            self.crawl_drained.clone(),
        );
        r.register(
            "leases_returned",
            "Leases in flight when the last run ended, returned to their queues at start",
            self.leases_returned.clone(),
        );
        r.register(
            "robots_transitions",
            "robots.txt outcomes applied to an origin's state, by the state after (a refresh counts too)",
            self.robots_transitions.clone(),
        );
        r.register(
            "pages_completed",
            "Pages the frontier counted done: a final answer, whatever its status (pages_fetched in /v1/stats)",
            self.pages_completed.clone(),
        );
        r.register(
            "warc_write_failures",
            "Exchanges that could not be archived (disk full, ...): the crawl goes on without them",
            self.warc_write_failures.clone(),
        );
        r.register(
            "revisits",
            "Pages fetched again by the recrawl schedule, by what the visit found: changed, not-modified (a 304 to the conditional GET), identical-digest (same payload digest as the last capture)",
            self.revisits.clone(),
        );
        r.register(
            "revisits_due",
            "URLs whose revisit came due, moved from the due index back to their host queue",
            self.revisits_due.clone(),
        );
        r.register(
            "revisits_gone",
            "URLs that left the recrawl schedule after recrawl.gone_after 404/410 answers in a row",
            self.revisits_gone.clone(),
        );
    }

    /// Names and addresses: DNS, the address policy, IP groups; failed frontier calls.
    pub(super) fn register_network(&self, r: &mut Registry) {
        r.register(
            "dns_lookups",
            "Host name lookups by how they were answered: table ([resolve]), cached, cached-failure (negative cache), resolved, nxdomain (no such name or no address), failed (timeout, server failure)",
            self.dns_lookups.clone(),
        );
        r.register(
            "address_refusals",
            "Fetches not sent because the address policy ([addresses]) refuses the address their host is on, by fetch (robots, page) and rule (loopback, private, link-local, cgnat, deny, own-listener, ...)",
            self.address_refusals.clone(),
        );
        r.register(
            "frontier_call_failures",
            "Frontier calls of the daemon that failed, by call (next-batch, complete-batch, complete, complete-robots-batch, complete-robots, note-addresses, resolved, drops-logged, queue-gauges, enqueue-discovered, enqueue-sitemap, sitemap-lastmod, task, after-stop)",
            self.frontier_call_failures.clone(),
        );
        r.register(
            "dns_cache_entries",
            "Names in the DNS cache (answers and failures), at most dns.cache_entries",
            self.dns_cache_entries.clone(),
        );
        r.register(
            "fetch_dns_failures",
            "Fetches that failed because the host name did not resolve, by fetch (robots, page): the host backs off",
            self.fetch_dns_failures.clone(),
        );
        r.register(
            "ip_groups",
            "IP addresses with hosts in the frontier's memory (hosts sharing an address share its politeness budget)",
            self.ip_groups.clone(),
        );
        r.register(
            "ip_waits",
            "Times a host ready by its own rules waited for its IP address (politeness.max_in_flight_per_ip or politeness.ip_delay)",
            self.ip_waits.clone(),
        );
        r.register(
            "host_address_changes",
            "Hosts whose fetches connected to a new IP address (first seen, or moved): they joined that address's group",
            self.host_address_changes.clone(),
        );
        r.register(
            "host_resolutions",
            "New hosts resolved before their first robots.txt fetch (so that it waits for its IP group), by result: resolved, failed (the robots.txt fetch goes and reports the DNS failure)",
            self.host_resolutions.clone(),
        );
    }
}
