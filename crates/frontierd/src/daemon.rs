//! `frontierd run`: fetch workers, WARC, crawl log, stats, and the shutdown sequence (URL
//! lists come in through intake.rs). Every decision is the library crates'; this is wiring.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use fetcher::Fetcher;
use frontier::{EnqueueItem, EnqueueResult, Frontier, FrontierEvent, PolicyRobots};
use tokio::sync::Notify;

use crawl::{Archived, FollowRules, Found, LogLine, Outcome};

use crate::config::Settings;
use crate::metrics::Metrics;
use warc::{recover_open_files, Exchange, WarcConfig, WarcWriter};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn rfc3339_ms(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

/// One submitted URL's fate, for API answers and rejected-line files.
#[derive(Debug, Clone)]
pub struct SubmitSummary {
    pub accepted: u64,
    pub duplicate: u64,
    /// (index in the input, url, reason)
    pub rejected: Vec<(usize, String, String)>,
}

/// State shared by every task.
pub struct Shared {
    pub frontier: Arc<Frontier>,
    pub settings: Settings,
    pub fetcher: Fetcher,
    pub warc: Mutex<Option<WarcWriter>>,
    pub crawl_log: Mutex<std::io::LineWriter<fs::File>>,
    pub metrics: Metrics,
    pub wake: Notify,
    pub shutdown: Notify,
    pub stopping: AtomicBool,
    pub in_flight: AtomicU64,
    pub pages_done: AtomicU64,
    /// What a fetched page leads to (`[scope]`).
    pub follow: FollowRules,
    pub token: Option<String>,
    pub started: Instant,
}

impl Shared {
    fn lock_log(&self) -> std::sync::MutexGuard<'_, std::io::LineWriter<fs::File>> {
        self.crawl_log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one crawl log line about a submitted URL that was not fetched (rejected).
    pub fn log_outcome(
        &self,
        url: &str,
        outcome: Outcome,
        status: Option<u16>,
        bytes: u64,
        duration_ms: u64,
        reason: &str,
    ) {
        self.log_line(&LogLine {
            status,
            bytes,
            duration_ms,
            ..LogLine::unfetched(url, outcome, reason, Found::SUBMITTED)
        });
    }

    /// Append one crawl log line (fields: docs/crawl-log.md).
    pub fn log_line(&self, line: &LogLine<'_>) {
        let json = line.to_json(&rfc3339_ms(now_ms()));
        self.metrics.outcome(line.outcome.as_str());
        let mut w = self.lock_log();
        if let Err(e) = writeln!(w, "{json}") {
            tracing::error!(error = %e, "crawl log write failed");
        }
    }

    /// Offer URLs (durable on return). `depth` is the link depth of every URL (0 for seeds),
    /// stored with it in the frontier; `log_rejects` writes rejected ones to the crawl log
    /// (submitted URLs, not discovered links).
    pub async fn submit(
        self: &Arc<Self>,
        urls: Vec<String>,
        depth: u32,
        log_rejects: bool,
    ) -> Result<SubmitSummary> {
        let items = urls
            .into_iter()
            .map(|url| EnqueueItem {
                url,
                depth,
                via: None,
                hops: String::new(),
            })
            .collect();
        self.submit_items(items, log_rejects).await
    }

    /// Offer URLs with where each came from (durable on return); `log_rejects` as in
    /// [`Shared::submit`] (for submitted URLs: their lines say seed).
    pub async fn submit_items(
        self: &Arc<Self>,
        items: Vec<EnqueueItem>,
        log_rejects: bool,
    ) -> Result<SubmitSummary> {
        let sh = self.clone();
        let (items, results) = tokio::task::spawn_blocking(move || {
            let results = sh.frontier.enqueue_items(&items, now_ms());
            (items, results)
        })
        .await
        .context("enqueue task")?;
        let results = results.context("enqueue")?;
        let mut summary = SubmitSummary {
            accepted: 0,
            duplicate: 0,
            rejected: Vec::new(),
        };
        for (i, (item, r)) in items.iter().zip(results).enumerate() {
            let url = &item.url;
            match r {
                EnqueueResult::Queued => {
                    summary.accepted += 1;
                    self.metrics.urls_accepted.inc();
                }
                EnqueueResult::Duplicate => {
                    summary.duplicate += 1;
                    self.metrics.urls_duplicate.inc();
                }
                EnqueueResult::Rejected(rej) => {
                    let reason = rej.code().to_string();
                    self.metrics.rejected(&reason);
                    if log_rejects {
                        // the URL may be a 1 MB line: echoed cut, with its length
                        let input = crate::intake::echo(url);
                        self.log_outcome(&input, Outcome::Rejected, None, 0, 0, &reason);
                    }
                    summary.rejected.push((i, url.clone(), reason));
                }
            }
        }
        if summary.accepted > 0 {
            self.wake.notify_waiters();
        }
        Ok(summary)
    }

    /// Take the frontier's events: drops go to the crawl log (then acknowledged, so they
    /// are not reported again after a crash), robots transitions and returned leases are
    /// logged.
    pub(crate) fn drain_events(&self) {
        let mut drops = Vec::new();
        for event in self.frontier.drain_events() {
            match event {
                FrontierEvent::Dropped(d) => drops.push(d),
                FrontierEvent::RobotsTransition { origin, from, to } => {
                    tracing::info!(%origin, from, to, "robots state changed");
                }
                FrontierEvent::LeasesReturned { count } => {
                    tracing::info!(
                        count,
                        "leases in flight at the last stop returned to their queues"
                    );
                }
            }
        }
        for d in &drops {
            let outcome = Outcome::of_drop(d.reason);
            let reason = format!("{}: {}", d.reason.code(), d.detail);
            let found = Found {
                depth: d.depth,
                via: d.via.as_deref(),
                hops: &d.hops,
            };
            self.log_line(&LogLine::unfetched(&d.url, outcome, &reason, found));
        }
        // logged (the crawl log is line-buffered): not to be reported again after a crash
        if let Err(e) = self.frontier.drops_logged(&drops) {
            tracing::error!(error = %e, "recording logged drops failed");
        }
    }

    /// Archive one exchange; where its response record went (None if not written).
    pub(crate) fn write_warc(&self, ex: &Exchange<'_>) -> Option<Archived> {
        let mut guard = self.warc.lock().unwrap_or_else(|e| e.into_inner());
        let w = guard.as_mut()?;
        match w.write_exchange(ex) {
            Ok(written) => {
                self.metrics.warc_bytes.inc_by(written.bytes);
                Some(Archived {
                    file: written
                        .file
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    offset: written.response_offset,
                    payload_digest: written.payload_digest,
                })
            }
            Err(e) => {
                tracing::error!(error = %e, url = ex.target_uri, "WARC write failed");
                None
            }
        }
    }

    /// Refresh gauges that are computed from the store.
    pub fn refresh_gauges(&self) {
        let now = now_ms();
        let mut queued = 0u64;
        let mut backoff = 0i64;
        let mut paused = 0i64;
        if let Ok(hosts) = self.frontier.hosts(None, usize::MAX) {
            for (key, rec) in hosts {
                queued += rec.counters.queued;
                if rec.backoff_until_ms > now {
                    backoff += 1;
                }
                if self.frontier.is_paused(&key) {
                    paused += 1;
                }
            }
        }
        self.metrics.urls_queued.set(queued as i64);
        match self.frontier.queue_breakdown(now) {
            Ok(b) => {
                self.metrics.queued_by_reason("eligible", b.eligible as i64);
                self.metrics
                    .queued_by_reason("politeness", b.politeness as i64);
                self.metrics.queued_by_reason("paused", b.paused as i64);
                for k in robots_policy::state::RobotsStateKind::ALL {
                    let n = b.robots.get(k.as_str()).copied().unwrap_or(0);
                    self.metrics
                        .queued_by_reason(&format!("robots-{}", k.as_str()), n as i64);
                }
            }
            Err(e) => tracing::warn!(error = %e, "queue breakdown failed"),
        }
        self.metrics.hosts_backoff.set(backoff);
        self.metrics.hosts_paused.set(paused);
        let mut by_state: BTreeMap<&'static str, i64> = BTreeMap::new();
        for k in robots_policy::state::RobotsStateKind::ALL {
            by_state.insert(k.as_str(), 0);
        }
        if let Ok(counts) = self.frontier.robots_state_counts(now) {
            for (kind, n) in counts {
                *by_state.entry(kind).or_default() += n as i64;
            }
        }
        for (k, n) in by_state {
            self.metrics.robots_state(k, n);
        }
        self.metrics
            .crawl_delays_clamped_total(self.frontier.stats().crawl_delay_clamped);
        self.metrics
            .in_flight
            .set(self.in_flight.load(Ordering::Relaxed) as i64);
        if let Ok(size) = self.frontier.size_on_disk() {
            self.metrics.store_size.set(size as i64);
        }
    }

    /// Stats as JSON (API and the periodic line).
    pub fn stats_json(&self) -> serde_json::Value {
        self.refresh_gauges();
        let s = self.frontier.stats();
        let m = &self.metrics;
        serde_json::json!({
            "uptime_s": self.started.elapsed().as_secs(),
            "stopping": self.stopping.load(Ordering::Relaxed),
            "queued": m.urls_queued.get(),
            "queued_by_reason": self.queued_by_reason_json(),
            "in_flight": self.in_flight.load(Ordering::Relaxed),
            "accepted": m.urls_accepted.get(),
            "duplicate": m.urls_duplicate.get(),
            "rejected": s.rejected,
            "pages_fetched": self.pages_done.load(Ordering::Relaxed),
            "dispatched": s.dispatched,
            "robots_fetches": s.robots_fetches,
            "completed": s.completed,
            "dropped": s.dropped,
            "given_up": s.given_up,
            "retried": s.retried,
            "crawl_delay_clamped": s.crawl_delay_clamped,
            "rate_limited": s.rate_limited,
            "recovered_leases": s.recovered_leases,
            "hosts_in_backoff": m.hosts_backoff.get(),
            "hosts_paused": m.hosts_paused.get(),
            "bytes_fetched": m.fetched_bytes.get(),
            "warc_bytes": m.warc_bytes.get(),
            "store_bytes": m.store_size.get(),
        })
    }

    /// The queue breakdown: eligible now, waiting on politeness, paused, and held by
    /// robots.txt per state (every state listed, 0 included).
    fn queued_by_reason_json(&self) -> serde_json::Value {
        let b = match self.frontier.queue_breakdown(now_ms()) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "queue breakdown failed");
                return serde_json::Value::Null;
            }
        };
        let robots: serde_json::Map<String, serde_json::Value> =
            robots_policy::state::RobotsStateKind::ALL
                .iter()
                .map(|k| {
                    let n = b.robots.get(k.as_str()).copied().unwrap_or(0);
                    (k.as_str().to_string(), serde_json::json!(n))
                })
                .collect();
        serde_json::json!({
            "eligible": b.eligible,
            "politeness": b.politeness,
            "paused": b.paused,
            "robots": robots,
        })
    }
}

/// Open everything, run until SIGTERM/SIGINT, shut down cleanly.
pub async fn run(settings: Settings, seeds: Option<PathBuf>) -> Result<()> {
    // first: until then SIGHUP would end the process
    let mut signals = crate::signals::Signals::install()?;
    for warning in settings.warnings() {
        tracing::warn!("{warning}");
    }
    let data_dir = settings.data_dir.clone();
    fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating data directory {}", data_dir.display()))?;
    let spool = settings.spool_dir.clone();
    for sub in ["incoming", "done", "rejected", "tmp"] {
        fs::create_dir_all(spool.join(sub))
            .with_context(|| format!("creating {}", spool.join(sub).display()))?;
    }
    fs::create_dir_all(&settings.warc_dir)
        .with_context(|| format!("creating {}", settings.warc_dir.display()))?;
    for r in recover_open_files(&settings.warc_dir).context("recovering .open WARC files")? {
        tracing::warn!(result = %r, "WARC file left open by an earlier run recovered");
    }
    let crawl_log = crate::signals::open_crawl_log(&settings.crawl_log)?;

    let token = match &settings.token_file {
        None => None,
        Some(p) => Some(
            fs::read_to_string(p)
                .with_context(|| format!("reading admin.token_file {}", p.display()))?
                .trim()
                .to_string(),
        )
        .filter(|t| !t.is_empty()),
    };
    if token.is_none()
        && !crate::config_checks::is_loopback(settings.admin_listen)
        && !settings.raw.admin.allow_unauthenticated
    {
        // an empty token file: `config check` cannot see that
        return Err(crate::config_checks::unauthenticated_listener(settings.admin_listen).into());
    }

    let fcfg = settings.frontier_config();
    let backend = Arc::new(PolicyRobots {
        state_config: Arc::new(settings.robots_state_config()),
    });
    let store_path = fcfg.path.clone();
    let frontier = tokio::task::spawn_blocking(move || Frontier::open_with(fcfg, backend))
        .await
        .context("store open task")?
        .with_context(|| {
            format!(
                "opening the store at {} (see docs/operations.md, \"store will not open\")",
                store_path.display()
            )
        })?;
    let fetcher = Fetcher::new(settings.fetcher_config()?).context("building the HTTP client")?;
    let mut wcfg = WarcConfig::new(&settings.warc_dir);
    wcfg.prefix = settings.raw.warc.prefix.clone();
    wcfg.max_file_size = settings.raw.warc.max_file_size;
    if !settings.raw.warc.operator.is_empty() {
        wcfg.operator = Some(settings.raw.warc.operator.clone());
    }
    let warc = WarcWriter::new(wcfg).context("opening the WARC writer")?;
    let follow = settings.follow_rules();

    let shared = Arc::new(Shared {
        frontier: Arc::new(frontier),
        fetcher,
        warc: Mutex::new(Some(warc)),
        crawl_log: Mutex::new(std::io::LineWriter::new(crawl_log)),
        metrics: Metrics::new(),
        wake: Notify::new(),
        shutdown: Notify::new(),
        stopping: AtomicBool::new(false),
        in_flight: AtomicU64::new(0),
        pages_done: AtomicU64::new(0),
        follow,
        token,
        started: Instant::now(),
        settings,
    });
    shared
        .metrics
        .config_warnings
        .set(shared.settings.warnings().len() as i64);

    // admin listener
    let listener = tokio::net::TcpListener::bind(shared.settings.admin_listen)
        .await
        .with_context(|| format!("binding admin.listen {}", shared.settings.admin_listen))?;
    let admin_addr = listener.local_addr()?;
    // tell tools where we listen (useful with port 0)
    fs::write(data_dir.join("admin.addr"), format!("{admin_addr}\n")).ok();
    tracing::info!(%admin_addr, data_dir = %data_dir.display(), "admin API listening");
    let admin_task = tokio::spawn(crate::admin::serve(listener, shared.clone()));

    if let Some(seeds) = seeds {
        crate::intake::submit_seed_file(&shared, &seeds).await?;
    }

    let workers = shared.settings.raw.fetch.workers;
    let mut handles = Vec::new();
    for i in 0..workers {
        handles.push(tokio::spawn(crate::worker::worker(shared.clone(), i)));
    }
    let spool_task = tokio::spawn(crate::intake::spool_loop(shared.clone()));
    let stats_task = tokio::spawn(crate::progress::stats_loop(shared.clone()));
    let drain_task = tokio::spawn(crate::progress::drain_watch(shared.clone()));

    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("crawling; admin API on {admin_addr}")),
        ],
    );
    tracing::info!(workers, "frontierd running");

    signals.wait_for_stop(&shared).await;
    tracing::info!("stopping: no new URLs handed out, in-flight fetches finishing");
    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status("stopping: finishing in-flight fetches"),
        ],
    );
    shared.stopping.store(true, Ordering::SeqCst);
    shared.shutdown.notify_waiters();
    spool_task.abort();
    let grace = shared.settings.raw.fetch.shutdown_grace.0;
    let deadline = tokio::time::Instant::now() + grace;
    let mut abandoned = 0;
    for h in handles {
        match tokio::time::timeout_at(deadline, h).await {
            Ok(_) => {}
            Err(_) => abandoned += 1,
        }
    }
    if abandoned > 0 {
        tracing::warn!(
            abandoned,
            "grace period over: unfinished leases return to their queues at the next start"
        );
    }
    shared.drain_events();
    for task in [admin_task, stats_task, drain_task, spool_task] {
        task.abort();
        let _ = task.await; // gone, with its handle on `shared`
    }
    let writer = shared.warc.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(w) = writer {
        match w.close() {
            Ok(Some(p)) => tracing::info!(file = %p.display(), "WARC file closed"),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "closing the WARC file"),
        }
    }
    {
        let mut log = shared.lock_log();
        log.flush().ok();
        log.get_ref().sync_all().ok();
    }
    fs::remove_file(data_dir.join("admin.addr")).ok();
    close_store(shared).await;
    tracing::info!("frontierd stopped");
    Ok(())
}

/// Close the store as the last step of the stop, not at process exit: sled flushes and
/// fsyncs its file when its last handle goes, which can take a while on a real disk, and
/// done by the runtime's teardown it held the exit up to a second after "frontierd
/// stopped" (the runtime's shutdown timeout). Fetches abandoned after the grace period
/// still hold it: then it is left to the exit.
async fn close_store(shared: Arc<Shared>) {
    let started = Instant::now();
    let Some(frontier) = Arc::into_inner(shared).and_then(|sh| Arc::into_inner(sh.frontier)) else {
        tracing::debug!("store still in use by abandoned fetches: closed at exit");
        return;
    };
    if let Err(e) = tokio::task::spawn_blocking(move || drop(frontier)).await {
        tracing::error!(error = %e, "closing the store");
    }
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "store closed"
    );
}
