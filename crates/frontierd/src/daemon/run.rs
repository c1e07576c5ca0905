//! Start-up, the task set, and the shutdown sequence of `frontierd run`.

use std::fmt::Display;
use std::fs;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use anyhow::{Context, Result};
use fetcher::Fetcher;
use frontier::{Frontier, RobotsEngine};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use warc::{recover_open_files, WarcWriter};

use crate::config::Settings;
use crate::daemon::shared::Shared;
use crate::internal_events::cluster::ClusterJoined;
use crate::internal_events::daemon::{
    ConfigWarning, FrontierCallFailed, LeasesAbandoned, Listening, Running, StopCause, Stopped,
    Stopping, StoreClosed, StoreOpenWaiting, WarcClosed, WarcRecovered,
};
use crate::internal_events::fetch::CompletionsApplied;
use crate::internal_events::InternalEvent;
use crate::metrics::Metrics;
use frontierd_admin::AdminServer;
use frontierd_pipeline::{Hooks, Pipeline};

/// Open everything, run until SIGTERM/SIGINT, shut down cleanly.
pub async fn run(settings: Settings, seeds: Option<PathBuf>) -> Result<()> {
    // first: until then SIGHUP would end the process
    let mut signals = crate::daemon::signals::Signals::install()?;
    let metrics = Metrics::new();
    for warning in settings.warnings() {
        ConfigWarning { warning: &warning }.emit(&metrics);
    }
    let mut fetcher_config = settings.fetcher_config()?;
    // every socket is a file: before the first one
    match crate::daemon::open_files::raise_to_hard_limit() {
        Ok(limit) => {
            let now = limit.now;
            limit.emit(&metrics);
            if let Some(warning) = settings.open_files_warning(now) {
                ConfigWarning { warning: &warning }.emit(&metrics);
            }
            fetcher_config.max_pooled_connections = settings.max_pooled_within(now);
        }
        Err(e) => {
            let warning = format!("the open-files limit could not be read: {e}");
            ConfigWarning { warning: &warning }.emit(&metrics);
        }
    }
    let crawl_log = prepare_outputs(&settings, &metrics)?;
    let token = read_token(&settings)?;
    // bound first: while the store cannot be opened the address answers why
    let admin_listener = std::net::TcpListener::bind(settings.admin_listen)
        .with_context(|| format!("binding admin.listen {}", settings.admin_listen))?;
    // written before the store is opened, which may take what room is left on the disk
    let admin_addr = admin_listener.local_addr()?;
    fs::write(
        settings.data_dir.join("admin.addr"),
        format!("{admin_addr}\n"),
    )
    .ok();
    let frontier = open_frontier_when_writable(&settings, &admin_listener, &metrics).await?;
    // what a crash lost includes gaps just started: every host waits its gap from now
    frontier.hold_hosts_after_restart(crate::daemon::now_ms());
    let fetcher = Fetcher::new(fetcher_config).context("building the HTTP client")?;
    let warc = WarcWriter::new(settings.warc_config()).context("opening the WARC writer")?;
    let data_dir = settings.data_dir.clone();
    let cluster = match &settings.cluster {
        None => None,
        Some(c) => Some(Arc::new(
            cluster::Node::open(c.clone(), &data_dir, settings.frontier_config().max_url_len)
                .await?,
        )),
    };
    if let Some(node) = &cluster {
        ClusterJoined { node }.emit(&metrics);
        if !node.ownership.is_fixed() {
            // shard leases: nothing is dispatched for a shard before this node holds it
            frontier.set_dispatch_gate(Some(node.ownership.clone()));
            // and nothing is sent once it no longer does, however long ago the request was
            // handed out (a node frozen with requests in hand)
            let gate = Arc::new(crate::daemon::cluster::ShardSendGate(node.clone()));
            fetcher.set_send_gate(gate);
        }
    }

    let opened = Opened {
        frontier,
        fetcher,
        warc,
        crawl_log,
        token,
        metrics,
    };
    let (shared, pipeline_tasks) = build_shared(settings, opened, cluster)?;
    // before anything is fetched or taken in: a start on a full disk starts paused
    let mut disk_watch = disk_watch::DiskWatch::new(shared.settings.raw.disk.thresholds());
    crate::daemon::disk::check(&shared, &mut disk_watch);
    shared
        .metrics
        .config_warnings
        .set(shared.settings.warnings().len() as i64);

    let (admin, admin_addr, grpc_task) = start_listeners(&shared, admin_listener).await?;
    if let Some(seeds) = seeds {
        crate::daemon::intake::submit_seed_file(&shared, &seeds).await?;
    }
    crate::daemon::sitemaps::from_config(&shared).await;

    let tasks = start_tasks(&shared, disk_watch);
    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&format!("crawling; admin API on {admin_addr}")),
        ],
    );
    Running {
        workers: shared.settings.raw.fetch.workers,
    }
    .emit(&shared.metrics);

    let cluster_failed = async {
        match &shared.cluster {
            Some(node) => node.failed.notified().await,
            None => std::future::pending().await,
        }
    };
    let cause = tokio::select! {
        _ = signals.wait_for_stop(&shared) => StopCause::Signal,
        _ = cluster_failed => StopCause::ClusterFailed,
        _ = shared.disk.restart.notified() => StopCause::StoreFailed,
    };
    Stopping { cause }.emit(&shared.metrics);
    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status("stopping: finishing in-flight fetches"),
        ],
    );
    stop(shared, tasks, pipeline_tasks, admin, grpc_task).await
}

/// What the start opened, for [`build_shared`].
struct Opened {
    frontier: Frontier,
    fetcher: Fetcher,
    warc: WarcWriter,
    crawl_log: fs::File,
    token: Option<String>,
    metrics: Metrics,
}

/// What the pipeline reports, logged and counted on the daemon's state (reached through a
/// weak reference: the state holds the pipeline).
struct PipelineHooks(Weak<Shared>);

impl Hooks for PipelineHooks {
    fn after_dispatch(&self, _leased: usize) {
        if let Some(sh) = self.0.upgrade() {
            sh.drain_events();
        }
    }

    fn before_completions(&self, _size: usize) {
        if let Some(sh) = self.0.upgrade() {
            sh.flush_crawl_log();
        }
    }

    fn after_completions(&self, size: usize) {
        if let Some(sh) = self.0.upgrade() {
            CompletionsApplied { size }.emit(&sh.metrics);
            sh.drain_events();
        }
    }

    fn address_changed(&self, host_id: u64, before: Option<IpAddr>, ip: IpAddr) {
        if let Some(sh) = self.0.upgrade() {
            sh.address_changed(host_id, before, ip);
        }
    }

    fn resolve(&self, asked: Vec<frontier::ResolveRequest>) {
        if let Some(sh) = self.0.upgrade() {
            sh.resolve_hosts(asked);
        }
    }

    fn failed(&self, call: frontierd_pipeline::Call, error: &dyn Display, items: usize) {
        if let Some(sh) = self.0.upgrade() {
            let call = call.into();
            FrontierCallFailed { call, error, items }.emit(&sh.metrics);
        }
    }
}

/// The state every task shares, with the dispatcher and the completer started on it.
fn build_shared(
    settings: Settings,
    opened: Opened,
    cluster: Option<Arc<cluster::Node>>,
) -> Result<(Arc<Shared>, frontierd_pipeline::Tasks)> {
    let Opened {
        frontier,
        fetcher,
        warc,
        crawl_log,
        token,
        metrics,
    } = opened;
    let follow = settings.follow_rules();
    let frontier = Arc::new(frontier);
    let mut pipeline_tasks = None;
    let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
        let hooks = Arc::new(PipelineHooks(weak.clone()));
        let (pipeline, tasks) = Pipeline::start(frontier.clone(), hooks);
        pipeline_tasks = Some(tasks);
        Shared {
            frontier,
            pipeline,
            fetcher,
            warc: frontierd_outputs::WarcOutput::new(Some(warc), settings.warc_config().deflate()),
            crawl_log: frontierd_outputs::CrawlLog::new(crawl_log),
            metrics,
            shutdown: Notify::new(),
            stopping: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
            follow,
            token,
            started: Instant::now(),
            cluster,
            disk: Default::default(),
            settings,
        }
    });
    let pipeline_tasks = pipeline_tasks.context("starting the dispatcher")?;
    Ok((shared, pipeline_tasks))
}

/// The data, spool and WARC directories made, WARC files an earlier run left open
/// recovered, the crawl log opened.
fn prepare_outputs(settings: &Settings, metrics: &Metrics) -> Result<fs::File> {
    let data_dir = &settings.data_dir;
    fs::create_dir_all(data_dir)
        .with_context(|| format!("creating data directory {}", data_dir.display()))?;
    frontierd_spool::Spool::new(&settings.spool_dir).create()?;
    fs::create_dir_all(&settings.warc_dir)
        .with_context(|| format!("creating {}", settings.warc_dir.display()))?;
    for r in recover_open_files(&settings.warc_dir).context("recovering .open WARC files")? {
        WarcRecovered { result: &r }.emit(metrics);
    }
    crate::daemon::signals::open_crawl_log(&settings.crawl_log)
}

/// The admin API's bearer token, read from `admin.token_file` if set (the settings say
/// whether the API may go without one).
fn read_token(settings: &Settings) -> Result<Option<String>> {
    let file = match &settings.token_file {
        None => None,
        Some(p) => Some(
            fs::read_to_string(p)
                .with_context(|| format!("reading admin.token_file {}", p.display()))?,
        ),
    };
    Ok(settings.admin_token(file.as_deref())?)
}

/// The frontier, opened; a store that cannot be opened because its disk is full or
/// read-only (sled writes at open) is tried again every `[disk] check_every` until it can
/// be, meanwhile the admin address answers 503 with the reason (`admin/waiting.rs`) and
/// systemd is told ready with the reason as status, so a start on a full disk neither exits
/// into a restart loop nor hangs silently.
async fn open_frontier_when_writable(
    settings: &Settings,
    admin_listener: &std::net::TcpListener,
    metrics: &Metrics,
) -> Result<Frontier> {
    let first = match open_frontier(settings).await {
        Ok(f) => return Ok(f),
        Err(e) if disk_trouble(&e) => e,
        Err(e) => return Err(e),
    };
    let reason = |e: &anyhow::Error| format!("the store cannot be opened: {e:#}");
    let waiting = frontierd_admin::waiting::Waiting::start(admin_listener, reason(&first))?;
    StoreOpenWaiting::Began { error: &first }.emit(metrics);
    let _ = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&reason(&first)),
        ],
    );
    let started = Instant::now();
    loop {
        tokio::time::sleep(settings.raw.disk.check_every.0).await;
        // alive while waiting (WatchdogSec in the unit)
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
        match open_frontier(settings).await {
            Ok(f) => {
                StoreOpenWaiting::Ended {
                    waited: started.elapsed(),
                }
                .emit(metrics);
                drop(waiting);
                return Ok(f);
            }
            Err(e) if disk_trouble(&e) => waiting.set_reason(reason(&e)),
            Err(e) => return Err(e),
        }
    }
}

/// Whether opening the frontier failed because its disk is full or read-only.
fn disk_trouble(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<frontier::FrontierError>())
        .any(frontier::FrontierError::disk_unavailable)
}

/// The frontier on its store (opened off the runtime: recovery reads the whole store).
async fn open_frontier(settings: &Settings) -> Result<Frontier> {
    // robots.txt fetches capped beside the workers
    let fcfg = settings.daemon_frontier_config();
    let engine = RobotsEngine {
        state_config: Arc::new(settings.robots_state_config()),
    };
    let store_path = fcfg.path.clone();
    tokio::task::spawn_blocking(move || Frontier::open_with(fcfg, engine))
        .await
        .context("store open task")?
        .with_context(|| {
            format!(
                "opening the store at {} (see docs/operations.md, \"store will not open\")",
                store_path.display()
            )
        })
}

/// The admin API and, with `[grpc]`, the gRPC API listening, each address written to the
/// data directory for tools (useful with port 0) and refused to the fetcher.
async fn start_listeners(
    shared: &Arc<Shared>,
    listener: std::net::TcpListener,
) -> Result<(AdminServer, std::net::SocketAddr, Option<JoinHandle<()>>)> {
    let data_dir = &shared.settings.data_dir;
    let admin_addr = listener.local_addr()?;
    // a page linking to our own API must never make us read it (before any worker runs)
    shared.fetcher.add_own_listener(admin_addr);
    let limits = &shared.settings.raw.admin;
    let limits = frontierd_admin::Limits {
        max_connections: limits.max_connections as usize,
        header_read_timeout: limits.header_read_timeout.0,
        request_timeout: limits.request_timeout.0,
        token: shared.token.clone(),
    };
    let backend = Arc::new(crate::admin::backend::DaemonBackend(shared.clone()));
    let admin =
        AdminServer::start(listener, backend, limits).context("starting the admin API's thread")?;
    // tell tools where we listen (useful with port 0)
    fs::write(data_dir.join("admin.addr"), format!("{admin_addr}\n")).ok();
    Listening::Admin {
        addr: admin_addr,
        data_dir,
    }
    .emit(&shared.metrics);

    let grpc_task = match shared.settings.grpc.clone() {
        None => None,
        Some(g) => {
            let (addr, task) = crate::grpc::start(shared, &g).await?;
            shared.fetcher.add_own_listener(addr);
            fs::write(data_dir.join("grpc.addr"), format!("{addr}\n")).ok();
            Listening::Grpc { addr }.emit(&shared.metrics);
            Some(task)
        }
    };

    Ok((admin, admin_addr, grpc_task))
}

/// The fetch workers and the background tasks.
fn start_tasks(shared: &Arc<Shared>, disk_watch: disk_watch::DiskWatch) -> Tasks {
    let workers = shared.settings.raw.fetch.workers;
    let mut handles = Vec::new();
    for i in 0..workers {
        handles.push(tokio::spawn(crate::daemon::worker::worker(
            shared.clone(),
            i,
        )));
    }
    let spool_task = tokio::spawn(crate::daemon::intake::spool_loop(shared.clone()));
    let stats_task = tokio::spawn(crate::daemon::progress::stats_loop(shared.clone()));
    let drain_task = tokio::spawn(crate::daemon::progress::drain_watch(shared.clone()));
    let collect_task = tokio::spawn(frontierd_heap::collect_loop());
    let disk_task = tokio::spawn(crate::daemon::disk::watch(shared.clone(), disk_watch));
    let flush_task = tokio::spawn(crate::daemon::shared::crawl_log_flush_loop(shared.clone()));
    let cluster_task = shared
        .cluster
        .as_ref()
        .map(|node| crate::daemon::cluster::start(shared.clone(), node.clone()));

    Tasks {
        workers: handles,
        spool: spool_task,
        cluster: cluster_task,
        background: vec![stats_task, drain_task, collect_task, disk_task, flush_task],
    }
}

/// What runs between the start and the stop, ended by [`stop`].
struct Tasks {
    workers: Vec<JoinHandle<()>>,
    spool: JoinHandle<()>,
    cluster: Option<JoinHandle<()>>,
    background: Vec<JoinHandle<()>>,
}

/// The stop: no new URLs handed out, workers given `[fetch] shutdown_grace`, every
/// completion applied, the listeners and tasks ended, the WARC file and the crawl log
/// closed, then the store.
async fn stop(
    shared: Arc<Shared>,
    tasks: Tasks,
    pipeline_tasks: frontierd_pipeline::Tasks,
    admin: AdminServer,
    grpc_task: Option<JoinHandle<()>>,
) -> Result<()> {
    shared.stopping.store(true, Ordering::SeqCst);
    shared.pipeline.stop();
    shared.shutdown.notify_waiters();
    tasks.spool.abort();
    if let Some(task) = tasks.cluster {
        // unacknowledged deliveries come back after the ack wait; the outbox is durable
        task.abort();
        let _ = task.await;
    }
    let grace = shared.settings.raw.fetch.shutdown_grace.0;
    let deadline = tokio::time::Instant::now() + grace;
    let mut abandoned = 0;
    for h in tasks.workers {
        match tokio::time::timeout_at(deadline, h).await {
            Ok(_) => {}
            Err(_) => abandoned += 1,
        }
    }
    if abandoned > 0 {
        LeasesAbandoned { count: abandoned }.emit(&shared.metrics);
    }
    // every completion the workers sent is applied (and flushed) before the store closes
    pipeline_tasks.finish(&shared.pipeline).await;
    shared.drain_events();
    if let Some(node) = &shared.cluster {
        // shard leases: the next owners take this node's shards and queued URLs at once
        crate::daemon::cluster::leases::hand_off_at_stop(&shared, node).await;
    }
    if let Some(t) = grpc_task {
        t.abort();
    }
    admin.stop().await;
    for task in tasks.background.into_iter().chain([tasks.spool]) {
        task.abort();
        let _ = task.await; // gone, with its handle on `shared`
    }
    let writer = shared.warc.lock().take();
    if let Some(w) = writer {
        match w.close() {
            Ok(Some(p)) => WarcClosed::Closed { file: &p }.emit(&shared.metrics),
            Ok(None) => {}
            Err(e) => WarcClosed::Failed { error: &e }.emit(&shared.metrics),
        }
    }
    shared.flush_crawl_log();
    shared.crawl_log.sync();
    fs::remove_file(shared.settings.data_dir.join("admin.addr")).ok();
    let fatal = shared.cluster.as_ref().and_then(|node| node.fatal());
    let store_failure = shared.frontier.store_write_failure();
    close_store(shared).await;
    if let Some(e) = store_failure {
        anyhow::bail!(
            "the store failed a write ({e}): what was acknowledged before is on disk; start frontierd again to open it (systemd does: Restart=on-failure)"
        );
    }
    match fatal {
        Some(reason) => anyhow::bail!("[cluster]: {reason}"),
        None => Ok(()),
    }
}

/// Close the store as the last step of the stop, not at process exit: sled flushes and
/// fsyncs its file when its last handle goes, which can take a while on a real disk, and
/// done by the runtime's teardown it held the exit up to a second after "frontierd
/// stopped" (the runtime's shutdown timeout). Fetches abandoned after the grace period
/// still hold it: then it is left to the exit.
async fn close_store(shared: Arc<Shared>) {
    let started = Instant::now();
    // the state's other parts are dropped at the end of this statement (the frontier's last
    // other handles among them); its metrics stay for the last events
    let (frontier, metrics) = match Arc::try_unwrap(shared) {
        Ok(Shared {
            frontier, metrics, ..
        }) => (frontier, metrics),
        Err(shared) => {
            StoreClosed::AtExit.emit(&shared.metrics);
            Stopped.emit(&shared.metrics);
            return;
        }
    };
    match Arc::try_unwrap(frontier) {
        Err(_) => StoreClosed::AtExit.emit(&metrics),
        Ok(frontier) => {
            if let Err(e) = tokio::task::spawn_blocking(move || drop(frontier)).await {
                StoreClosed::Failed { error: &e }.emit(&metrics);
            }
            StoreClosed::Closed {
                elapsed_ms: started.elapsed().as_millis() as u64,
            }
            .emit(&metrics);
        }
    }
    Stopped.emit(&metrics);
}
