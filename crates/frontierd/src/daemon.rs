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
use fetcher::{Fetcher, Url};
use frontier::{DropReason, EnqueueItem, EnqueueResult, Frontier, PolicyRobots};
use tokio::sync::Notify;

use crate::config::{ScopeMode, Settings};
use crate::crawl_log::{Archived, Found, LogLine};
use crate::links::LinkConfig;
use crate::metrics::Metrics;
use crate::warc::{recover_open_files, Exchange, WarcConfig, WarcWriter};

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
    pub(crate) link_cfg: LinkConfig,
    pub token: Option<String>,
    pub started: Instant,
    last_clamped: AtomicU64,
}

impl Shared {
    fn lock_log(&self) -> std::sync::MutexGuard<'_, std::io::LineWriter<fs::File>> {
        self.crawl_log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one crawl log line about a submitted URL that was not fetched (rejected).
    pub fn log_outcome(
        &self,
        url: &str,
        outcome: &str,
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
        self.metrics.outcome(line.outcome);
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
                        self.log_outcome(&input, "rejected", None, 0, 0, &reason);
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

    pub(crate) fn drain_drops(&self) {
        let drops = self.frontier.take_drops();
        for d in &drops {
            let outcome = match d.reason {
                DropReason::RobotsDisallowed => "blocked-by-robots",
                DropReason::CrawlDelayTooLong => "blocked-by-robots",
                DropReason::GaveUp => "given-up",
            };
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
        self.metrics.hosts_backoff.set(backoff);
        self.metrics.hosts_paused.set(paused);
        let mut by_state: BTreeMap<&'static str, i64> = BTreeMap::new();
        for k in robots_policy::state::RobotsStateKind::ALL {
            by_state.insert(k.as_str(), 0);
        }
        let cfg = self.settings.robots_state_config();
        if let Ok(origins) = self.frontier.robots_records(usize::MAX) {
            for (_, bytes) in origins {
                if let Ok(o) = robots_policy::state::decode(&bytes) {
                    let kind = o.kind_at(&cfg, robots_policy::state::UnixMillis(now));
                    *by_state.entry(kind.as_str()).or_default() += 1;
                }
            }
        }
        for (k, n) in by_state {
            self.metrics.robots_state(k, n);
        }
        let stats = self.frontier.stats();
        self.last_clamped
            .store(stats.crawl_delay_clamped, Ordering::Relaxed);
        self.metrics
            .crawl_delay_clamped
            .set(stats.crawl_delay_clamped as i64);
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

    pub(crate) fn in_scope(&self, page: &Url, link: &Url) -> bool {
        if !matches!(link.scheme(), "http" | "https") {
            return false;
        }
        let (Some(ph), Some(lh)) = (page.host_str(), link.host_str()) else {
            return false;
        };
        let ok = match self.settings.scope_mode {
            ScopeMode::Any => true,
            ScopeMode::SameHost => ph.eq_ignore_ascii_case(lh),
            ScopeMode::SameDomain => {
                let pl = ph.to_ascii_lowercase();
                let ll = lh.to_ascii_lowercase();
                frontier::canon::politeness_key(&pl, frontier::PolitenessKeyMode::Domain)
                    == frontier::canon::politeness_key(&ll, frontier::PolitenessKeyMode::Domain)
            }
        };
        if !ok {
            return false;
        }
        let s = link.as_str();
        if !self.settings.include.is_empty() && !self.settings.include.iter().any(|r| r.is_match(s))
        {
            return false;
        }
        !self.settings.exclude.iter().any(|r| r.is_match(s))
    }
}

/// Open everything, run until SIGTERM/SIGINT, shut down cleanly.
pub async fn run(settings: Settings, seeds: Option<PathBuf>) -> Result<()> {
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
        tracing::warn!(?r, "WARC file left open by an earlier run recovered");
    }
    if let Some(parent) = settings.crawl_log.parent() {
        fs::create_dir_all(parent).ok();
    }
    let crawl_log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&settings.crawl_log)
        .with_context(|| format!("opening crawl log {}", settings.crawl_log.display()))?;

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
    let mut link_cfg = LinkConfig::new(settings.product_token.clone());
    link_cfg.keep_nofollow_links = settings.raw.scope.keep_nofollow_links;

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
        link_cfg,
        token,
        started: Instant::now(),
        last_clamped: AtomicU64::new(0),
        settings,
    });

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
    let stats_task = tokio::spawn(stats_loop(shared.clone()));

    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("crawling; admin API on {admin_addr}")),
        ],
    );
    tracing::info!(workers, "frontierd running");

    wait_for_signal().await;
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
    shared.drain_drops();
    admin_task.abort();
    stats_task.abort();
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
    tracing::info!("frontierd stopped");
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // cannot install handlers: run until ctrl-c the portable way
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

async fn stats_loop(sh: Arc<Shared>) {
    let every = sh.settings.raw.log.stats_interval.0;
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    let mut last_pages = 0u64;
    let mut last_bytes = 0u64;
    let mut watchdog_usec = 0u64;
    let watchdog = sd_notify::watchdog_enabled(false, &mut watchdog_usec);
    let wd_every = Duration::from_micros(watchdog_usec / 2).max(Duration::from_millis(500));
    let mut wd_tick = tokio::time::interval(wd_every);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let s = sh.stats_json();
                let pages = sh.pages_done.load(Ordering::Relaxed);
                let bytes = sh.metrics.fetched_bytes.get();
                let secs = every.as_secs_f64();
                let pps = (pages - last_pages) as f64 / secs;
                let bps = (bytes - last_bytes) as f64 / secs;
                last_pages = pages;
                last_bytes = bytes;
                tracing::info!(
                    pages_per_s = format!("{pps:.1}"),
                    kib_per_s = format!("{:.1}", bps / 1024.0),
                    queued = s["queued"].as_i64().unwrap_or(0),
                    in_flight = s["in_flight"].as_u64().unwrap_or(0),
                    fetched = pages,
                    accepted = s["accepted"].as_u64().unwrap_or(0),
                    dropped = s["dropped"].as_u64().unwrap_or(0),
                    given_up = s["given_up"].as_u64().unwrap_or(0),
                    hosts_in_backoff = s["hosts_in_backoff"].as_i64().unwrap_or(0),
                    warc_mib = format!("{:.1}", sh.metrics.warc_bytes.get() as f64 / 1048576.0),
                    "progress"
                );
                let status = format!(
                    "{pps:.1} pages/s, {} queued, {} fetched",
                    s["queued"].as_i64().unwrap_or(0), pages
                );
                let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Status(&status)]);
            }
            _ = wd_tick.tick(), if watchdog => {
                let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
            }
        }
    }
}
