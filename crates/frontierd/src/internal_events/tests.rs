//! Each event logs and counts, with the label its typed value maps to.

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crawl::{FetchClass, Outcome};

use super::admin::{AdminConnectionRefused, AdminTimedOut, AdminTimeout};
use super::fetch::{PageFetched, PageRetried, RobotsFetched};
use super::intake::{SpoolEntryKind, SpoolEntryRejected, SpoolFileIngested, UrlRejected};
use super::lifecycle::{JournalCheckpointed, LeasesReturned, RobotsTransition};
use super::output::{CrawlLogLinesWritten, CrawlLogWriteFailed, WarcWriteFailed};
use super::InternalEvent;
use crate::metrics::{Format, Metrics};

/// A log sink the test can read back.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Emits what `f` emits on fresh metrics; returns (log text, Prometheus text).
fn run(f: impl FnOnce(&Metrics)) -> (String, String) {
    let metrics = Metrics::new();
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || f(&metrics));
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    (log, metrics.encode(Format::PrometheusText))
}

fn has_sample(scrape: &str, sample: &str) -> bool {
    scrape.lines().any(|l| l == sample)
}

#[test]
fn fetch_classes_are_labelled_as_each_metric_documents_them() {
    let (log, scrape) = run(|m| {
        for class in [FetchClass::TooManyRequests, FetchClass::RedirectLimit] {
            PageFetched {
                url: "http://a.test/",
                class,
                bytes: 10,
                elapsed: Duration::from_millis(5),
            }
            .emit(m);
            RobotsFetched {
                origin: "http://a.test",
                class,
                bytes: 1,
                elapsed: Duration::from_millis(5),
            }
            .emit(m);
        }
    });
    // pages: 429 with 4xx, a redirect past the limit with 3xx; robots.txt: each its own
    for sample in [
        r#"frontierd_page_fetches_total{class="4xx"} 1"#,
        r#"frontierd_page_fetches_total{class="3xx"} 1"#,
        r#"frontierd_robots_fetches_total{outcome="429"} 1"#,
        r#"frontierd_robots_fetches_total{outcome="redirect-limit"} 1"#,
        "frontierd_fetched_bytes_total 22",
    ] {
        assert!(has_sample(&scrape, sample), "{sample} missing:\n{scrape}");
    }
    assert!(
        log.contains("class=\"4xx\"") && log.contains("robots.txt done"),
        "{log}"
    );
}

#[test]
fn a_retry_counts_its_failure_kind_and_a_final_answer_counts_none() {
    let (log, scrape) = run(|m| {
        let timed_out = frontier::PageOutcome::TimedOut {
            reason: "timeout: 30s".into(),
        };
        PageRetried {
            url: "http://a.test/x",
            attempt: 2,
            status: None,
            outcome: &timed_out,
        }
        .emit(m);
        PageRetried {
            url: "http://a.test/y",
            attempt: 1,
            status: Some(200),
            outcome: &frontier::PageOutcome::Done { response_ms: 1 },
        }
        .emit(m);
    });
    assert!(has_sample(
        &scrape,
        r#"frontierd_page_failures_total{kind="timed-out"} 1"#
    ));
    assert_eq!(
        scrape.matches("frontierd_page_failures_total{").count(),
        1,
        "{scrape}"
    );
    assert_eq!(log.matches("fetch to be retried").count(), 1, "{log}");
}

#[test]
fn failures_to_write_are_logged_and_counted() {
    let warc_error = warc::WarcError::InvalidTargetUri("a b".into());
    let io_error = io::Error::new(io::ErrorKind::StorageFull, "no space left");
    let (log, scrape) = run(|m| {
        // an episode: the first failure logged at ERROR, the next only counted
        for first_in_episode in [true, false] {
            WarcWriteFailed {
                url: "http://a.test/",
                error: &warc_error,
                first_in_episode,
            }
            .emit(m);
            CrawlLogWriteFailed {
                lines: 2,
                first_url: "http://a.test/",
                error: &io_error,
                first_in_episode,
            }
            .emit(m);
        }
        CrawlLogLinesWritten {
            outcomes: &[
                Outcome::BlockedByRobots,
                Outcome::Fetched,
                Outcome::BlockedByRobots,
            ],
        }
        .emit(m);
    });
    assert!(
        has_sample(&scrape, "frontierd_warc_write_failures_total 2"),
        "{scrape}"
    );
    assert!(has_sample(
        &scrape,
        "frontierd_crawl_log_write_failures_total 4"
    ));
    assert!(has_sample(
        &scrape,
        r#"frontierd_crawl_outcomes_total{outcome="blocked-by-robots"} 2"#
    ));
    assert!(has_sample(
        &scrape,
        r#"frontierd_crawl_outcomes_total{outcome="fetched"} 1"#
    ));
    assert!(
        log.contains("WARC write failed") && log.contains("WARC-Target-URI"),
        "{log}"
    );
    assert!(log.contains("crawl log write failed") && log.contains("no space left"));
    assert_eq!(
        log.matches("ERROR").count(),
        2,
        "one ERROR line per output per episode: {log}"
    );
}

#[test]
fn spool_and_intake_events_carry_their_result_label() {
    let (log, scrape) = run(|m| {
        SpoolEntryRejected {
            file: "pipe",
            kind: SpoolEntryKind::Fifo,
            reason: "a FIFO (named pipe), not a file of URLs",
            moved_to: Path::new("/spool/rejected/pipe"),
        }
        .emit(m);
        SpoolFileIngested {
            file: "list.txt",
            link_to: None,
            lines: 3,
            accepted: 2,
            duplicate: 0,
            rejected: 1,
        }
        .emit(m);
        UrlRejected {
            input: "ftp://x",
            code: "bad-scheme",
        }
        .emit(m);
    });
    for sample in [
        r#"frontierd_spool_files_total{result="rejected-fifo"} 1"#,
        r#"frontierd_spool_files_total{result="with-rejects"} 1"#,
        r#"frontierd_urls_rejected_total{reason="bad-scheme"} 1"#,
    ] {
        assert!(has_sample(&scrape, sample), "{sample} missing:\n{scrape}");
    }
    assert!(log.contains("spool entry rejected") && log.contains("spool file ingested"));
}

#[test]
fn admin_refusals_are_all_counted_and_logged_when_asked() {
    let peer = "127.0.0.1:9".parse().unwrap();
    let (log, scrape) = run(|m| {
        for log in [true, false, false] {
            AdminConnectionRefused {
                peer,
                max_connections: 4,
                log,
            }
            .emit(m);
        }
        AdminTimedOut {
            peer,
            timeout: &AdminTimeout::Header,
            path: "",
            limit: Duration::from_secs(10),
        }
        .emit(m);
    });
    assert!(has_sample(
        &scrape,
        "frontierd_admin_connections_refused_total 3"
    ));
    assert!(has_sample(
        &scrape,
        r#"frontierd_admin_timeouts_total{phase="header"} 1"#
    ));
    assert_eq!(log.matches("admin connection refused").count(), 1, "{log}");
}

#[test]
fn robots_transitions_returned_leases_and_checkpoints_are_counted_once_and_logged_once() {
    let (log, scrape) = run(|m| {
        RobotsTransition {
            origin: "http://a.test",
            from: "unknown",
            to: "fresh",
        }
        .emit(m);
        LeasesReturned { count: 3 }.emit(m);
        JournalCheckpointed {
            hosts: 1000,
            journal_bytes: 268_435_600,
        }
        .emit(m);
        JournalCheckpointed {
            hosts: 24,
            journal_bytes: 9000,
        }
        .emit(m);
    });
    assert!(has_sample(
        &scrape,
        r#"frontierd_robots_transitions_total{to="fresh"} 1"#
    ));
    assert!(has_sample(&scrape, "frontierd_leases_returned_total 3"));
    assert_eq!(log.matches("robots state changed").count(), 1, "{log}");
    assert!(log.contains("returned to their queues"));
    assert!(has_sample(
        &scrape,
        "frontierd_store_journal_checkpoints_total 2"
    ));
    assert!(has_sample(
        &scrape,
        "frontierd_store_journal_checkpoint_hosts_total 1024"
    ));
    assert_eq!(log.matches("host journal checkpointed").count(), 2, "{log}");
}

#[test]
fn sitemap_events_log_the_sitemap_and_count_each_result() {
    use super::sitemap::{SitemapNotParsed, SitemapParsed, SitemapRefused, SitemapUrlsOffered};
    use crawl::sitemap::{Cut, Dropped, SitemapReport, SitemapType};
    let report = SitemapReport {
        kind: Some(SitemapType::UrlSet),
        gzip: true,
        bytes: 4096,
        admitted: 3,
        dropped: [1, 2, 0, 0],
        over_limit: 7,
        cut: Some(Cut::TooManyUrls { limit: 3, over: 7 }),
        body_truncated: false,
    };
    let (log, scrape) = run(|m| {
        SitemapParsed {
            url: "http://a.test/s.xml.gz",
            report: &report,
            elapsed: Duration::from_millis(12),
        }
        .emit(m);
        SitemapNotParsed {
            url: "http://a.test/gone.xml",
            status: Some(404),
        }
        .emit(m);
        SitemapUrlsOffered {
            url: "http://a.test/s.xml.gz",
            queued: 2,
            duplicate: 1,
            rejected: 0,
        }
        .emit(m);
        SitemapRefused {
            named_by: "http://a.test/robots.txt",
            sitemap: "http://b.test/s.xml",
            why: Dropped::OutOfScope,
        }
        .emit(m);
    });
    assert!(
        log.contains("WARN")
            && log.contains("sitemap=http://a.test/s.xml.gz")
            && log.contains("parse_ms=12")
            && log.contains("sitemap cut: sitemap urlset (gzip): 4096 bytes, 3 queued"),
        "{log}"
    );
    assert!(log.contains("sitemap=http://b.test/s.xml"), "{log}");
    for sample in [
        "frontierd_sitemaps_total{result=\"too-many-urls\"} 1",
        "frontierd_sitemaps_total{result=\"not-2xx\"} 1",
        "frontierd_sitemaps_total{result=\"out-of-scope\"} 1",
        "frontierd_sitemap_urls_total{result=\"invalid-url\"} 1",
        "frontierd_sitemap_urls_total{result=\"out-of-scope\"} 2",
        "frontierd_sitemap_urls_total{result=\"over-limit\"} 7",
        "frontierd_sitemap_urls_total{result=\"queued\"} 2",
        "frontierd_sitemap_urls_total{result=\"duplicate\"} 1",
    ] {
        assert!(has_sample(&scrape, sample), "{sample} not in\n{scrape}");
    }
    assert!(!scrape.contains("result=\"rejected\""));
}

#[test]
fn a_broker_pause_is_logged_counted_and_held_in_the_gauge_until_resumed() {
    use super::cluster::{BrokerPaused, BrokerResumed, ShardBatchCommitted};
    let error = io::Error::new(io::ErrorKind::ConnectionRefused, "broker gone");
    let (log, scrape) = run(|m| {
        for first in [true, false] {
            BrokerPaused {
                activity: "intake",
                what: "shard 3",
                error: &error,
                retry_in: Duration::from_millis(200),
                first,
            }
            .emit(m);
        }
        ShardBatchCommitted {
            shard: 3,
            messages: 4,
            redeliveries: 1,
            urls: 40,
            handed_off: 7,
        }
        .emit(m);
    });
    assert!(
        log.contains("cluster activity paused by a broker error"),
        "{log}"
    );
    assert!(log.contains("broker gone"), "{log}");
    assert!(
        has_sample(&scrape, "frontierd_cluster_handoff_urls_received_total 7"),
        "{scrape}"
    );
    assert!(
        has_sample(
            &scrape,
            "frontierd_cluster_pauses_total{activity=\"intake\"} 2"
        ),
        "{scrape}"
    );
    // two errors of one run: one paused activity
    assert!(
        has_sample(&scrape, "frontierd_cluster_paused{activity=\"intake\"} 1"),
        "{scrape}"
    );
    assert!(has_sample(
        &scrape,
        "frontierd_cluster_deliveries_total{kind=\"redelivery\"} 1"
    ));
    assert!(has_sample(
        &scrape,
        "frontierd_cluster_deliveries_total{kind=\"first\"} 3"
    ));
    assert!(has_sample(
        &scrape,
        "frontierd_cluster_urls_received_total 40"
    ));
    let (log, scrape) = run(|m| {
        BrokerPaused {
            activity: "routing",
            what: "outbox",
            error: &error,
            retry_in: Duration::from_millis(100),
            first: true,
        }
        .emit(m);
        BrokerResumed {
            activity: "routing",
            what: "outbox",
            paused_for: Duration::from_secs(3),
        }
        .emit(m);
    });
    assert!(log.contains("cluster activity resumed"), "{log}");
    assert!(
        has_sample(&scrape, "frontierd_cluster_paused{activity=\"routing\"} 0"),
        "{scrape}"
    );
}

#[test]
fn a_rejected_broker_line_is_counted_by_its_reason_code() {
    use super::cluster::BrokerLineRejected;
    let parsed = cluster::parse_batch(b"http://a.test/\nhttp://b.test/caf\xe9\n{\"url\": 1}\n");
    assert_eq!(parsed.rejected.len(), 2);
    let (log, scrape) = run(|m| {
        for e in &parsed.rejected {
            BrokerLineRejected {
                source: "shard 1",
                sequence: 9,
                error: e,
            }
            .emit(m);
        }
    });
    assert!(log.contains("line=2"), "{log}");
    assert!(log.contains("line=3"), "{log}");
    assert!(
        has_sample(
            &scrape,
            "frontierd_cluster_lines_rejected_total{reason=\"not-utf8\"} 1"
        ),
        "{scrape}"
    );
    assert!(
        has_sample(
            &scrape,
            "frontierd_cluster_lines_rejected_total{reason=\"bad-json\"} 1"
        ),
        "{scrape}"
    );
}
