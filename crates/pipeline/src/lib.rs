//! Between a frontier and the fetch workers that serve it: one dispatcher task leases work
//! for the idle workers (one `next_batch` for all of them, on the blocking pool) and puts
//! each item straight into one idle worker's slot (handoff.rs); one completer task applies
//! page and robots.txt outcomes in batches (one `complete_batch` and one
//! `complete_robots_batch`, so one flush each, per batch). The runtime threads never wait
//! on the frontier's lock or a disk flush, and a flush is shared by every outcome of a
//! batch.
//!
//! Owns: when to lease and for how many workers, which worker gets an item, how
//! completions are gathered into batches and applied (a batch that names an unknown lease
//! applied one by one), and the order of a stop (no new leases, every completion sent
//! applied), and when the crawl counts as drained for its announcement (drain.rs). It reads
//! the wall clock for the frontier's calls.
//!
//! Must never: fetch, log or count on its own (what happens goes to the caller's
//! [`Hooks`]), decide what a fetch outcome means (the caller hands outcomes in), or hand
//! out an item other than through the frontier's `next_batch`.

mod complete;
pub mod drain;
mod handoff;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt::Display;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use frontier::{
    Frontier, LeaseId, PageOutcome, ResolveRequest, RobotsFetchOutcome, RobotsLease, Visit,
    WorkItem,
};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::complete::{complete_loop, Completion};
use crate::handoff::Handoff;

/// At most this many leases per `next_batch` call.
const MAX_DISPATCH: usize = 256;
/// With fewer idle workers than this the dispatcher yields (up to [`GATHER_YIELDS`] times)
/// before leasing: each lease call is a hop to the blocking pool and a frontier lock, dear
/// when calls serve a few workers each (docs/benchmarks.md, "Daemon throughput").
const GATHER_IDLE: usize = 32;
/// Yields to wait for more idle workers, at most.
const GATHER_YIELDS: usize = 8;
/// At most this many completions (pages and robots.txt) per batch.
const MAX_COMPLETIONS: usize = 512;
/// A batch of completions waits at most this long for more after its first one, while
/// every idle worker got an item: each batch costs a flush (an fdatasync and sled's I/O
/// threads woken), and the workers, not the hosts, are the limit then (docs/benchmarks.md,
/// "Daemon throughput").
const COMPLETION_LINGER: Duration = Duration::from_millis(16);
/// The linger while the dispatcher is starving (idle workers, nothing it may lease): hosts
/// are the limit then, and a host's next page waits for its completion to be applied.
const COMPLETION_LINGER_STARVING: Duration = Duration::from_millis(2);
/// Completions waiting to be applied, at most (workers wait beyond that).
const COMPLETION_QUEUE: usize = 4096;

/// Where a fetch connected: the host's address (its IP group) and when the request began.
#[derive(Debug, Clone, Copy)]
pub struct Connected {
    pub ip: IpAddr,
    pub started_ms: u64,
}

/// Which frontier call of the pipeline failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Leasing work for the idle workers.
    NextBatch,
    /// Applying a batch of page outcomes.
    CompleteBatch,
    /// Applying one page outcome (after a batch named an unknown lease).
    Complete,
    /// Applying a batch of robots.txt outcomes.
    CompleteRobotsBatch,
    /// Applying one origin's robots.txt outcome.
    CompleteRobots,
    /// Recording where hosts' fetches connected.
    NoteAddresses,
    /// A blocking task that ran one of these died.
    Task,
    /// An outcome arrived after the completer ended (only during a stop): its URL or
    /// robots.txt is fetched again after the restart.
    AfterStop,
}

impl Call {
    /// Its stable name (the `call` label of the owner's failure counter).
    pub fn as_str(self) -> &'static str {
        match self {
            Call::NextBatch => "next-batch",
            Call::CompleteBatch => "complete-batch",
            Call::Complete => "complete",
            Call::CompleteRobotsBatch => "complete-robots-batch",
            Call::CompleteRobots => "complete-robots",
            Call::NoteAddresses => "note-addresses",
            Call::Task => "task",
            Call::AfterStop => "after-stop",
        }
    }
}

/// What the pipeline tells its owner, which logs and counts (the pipeline does neither).
pub trait Hooks: Send + Sync + 'static {
    /// After each `next_batch` (with the items leased), on the blocking pool: the owner
    /// takes the frontier's events there.
    fn after_dispatch(&self, leased: usize);
    /// Before each batch of completions is applied, with its size, on the blocking pool:
    /// the owner writes what must be on disk before the outcomes are stored (the crawl
    /// log lines the workers handed in with them).
    fn before_completions(&self, size: usize);
    /// After each batch of completions, with its size (pages and robots.txt).
    fn after_completions(&self, size: usize);
    /// A host's fetch connected to an address it was not known at: (host id, the address
    /// before, the new one).
    fn address_changed(&self, host_id: u64, before: Option<IpAddr>, ip: IpAddr);
    /// New hosts to resolve before their first robots.txt ([`Frontier::take_resolves`]):
    /// called on the runtime, it must not block (the answers go to
    /// [`Frontier::resolved`], then [`Pipeline::kick`]).
    fn resolve(&self, asked: Vec<ResolveRequest>);
    /// A frontier call failed: which, the error, how many items it carried.
    fn failed(&self, call: Call, error: &dyn Display, items: usize);
}

/// The dispatcher's and completer's shared ends, held by the workers.
pub struct Pipeline {
    /// Idle workers, each waiting for the item the dispatcher gives it.
    handoff: Handoff,
    done: mpsc::Sender<Completion>,
    /// Something changed that may let the dispatcher lease more: a worker became idle, a
    /// completion or robots outcome made a host ready, URLs were queued.
    kick: Notify,
    stopping: AtomicBool,
    /// No new leases while set (free space low); fetches under way finish.
    paused: AtomicBool,
    /// The last lease call left idle workers without an item (hosts are the limit):
    /// completions are applied sooner then ([`COMPLETION_LINGER_STARVING`]).
    starving: AtomicBool,
    /// Notified when `starving` is set, so a lingering batch goes at once.
    starved: Notify,
    hooks: Arc<dyn Hooks>,
}

/// What runs the pipeline: spawned by [`Pipeline::start`], ended by [`Tasks::finish`].
pub struct Tasks {
    dispatcher: tokio::task::JoinHandle<()>,
    completer: tokio::task::JoinHandle<()>,
}

/// The frontier's clock (unix ms that do not step with the wall clock).
use frontierd_clock::now_ms;

impl Pipeline {
    /// Start the dispatcher and the completer for `frontier`, reporting to `hooks`.
    pub fn start(frontier: Arc<Frontier>, hooks: Arc<dyn Hooks>) -> (Arc<Pipeline>, Tasks) {
        let (done_tx, done_rx) = mpsc::channel(COMPLETION_QUEUE);
        let p = Arc::new(Pipeline {
            handoff: Handoff::default(),
            done: done_tx,
            kick: Notify::new(),
            stopping: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            starving: AtomicBool::new(false),
            starved: Notify::new(),
            hooks: hooks.clone(),
        });
        let dispatcher = tokio::spawn(dispatch_loop(p.clone(), frontier.clone(), hooks.clone()));
        let completer = tokio::spawn(complete_loop(p.clone(), frontier, done_rx, hooks));
        (
            p,
            Tasks {
                dispatcher,
                completer,
            },
        )
    }

    /// The next item for a worker; `None` once the pipeline stops.
    pub async fn next_item(&self) -> Option<WorkItem> {
        // (closed by `stop`: no slot then, or the slot answers Err)
        let slot = self.handoff.wait()?;
        self.kick.notify_one();
        slot.await.ok()
    }

    /// Report a page's outcome (and the visit, for the recrawl schedule, and where its
    /// fetch connected, for the host's IP group); applied with others in one batch, soon.
    pub async fn complete(
        &self,
        lease: LeaseId,
        outcome: PageOutcome,
        visit: Option<Visit>,
        connected: Option<Connected>,
    ) {
        if self
            .done
            .send(Completion::Page(lease, outcome, visit, connected))
            .await
            .is_err()
        {
            // the completer is gone (only after a stop): the lease returns at the next open
            self.hooks
                .failed(Call::AfterStop, &format!("page lease {lease:?}"), 1);
        }
    }

    /// Report a robots.txt fetch's outcome (and where it connected); applied with others
    /// in one batch, soon: the host's pages may go once it is applied.
    pub async fn complete_robots(
        &self,
        lease: RobotsLease,
        outcome: RobotsFetchOutcome,
        response_ms: u64,
        connected: Option<Connected>,
    ) {
        let origin = lease.origin.clone();
        if self
            .done
            .send(Completion::Robots(lease, outcome, response_ms, connected))
            .await
            .is_err()
        {
            // the completer is gone (only after a stop): fetched again after a restart
            self.hooks
                .failed(Call::AfterStop, &format!("robots.txt of {origin}"), 1);
        }
    }

    /// Hosts may have become ready (URLs queued, a robots.txt answered): look again now.
    pub fn kick(&self) {
        self.kick.notify_one();
    }

    /// Pause (or resume) handing out leases: fetches under way finish, nothing new starts.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
        self.kick();
    }

    /// No new leases from now on; workers waiting for an item get `None`.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.handoff.close();
        self.kick.notify_one();
    }

    /// The dispatcher's verdict after a lease call: whether it left idle workers without
    /// an item. A lingering batch hears when starving begins.
    fn set_starving(&self, starving: bool) {
        let was = self.starving.swap(starving, Ordering::SeqCst);
        if starving && !was {
            self.starved.notify_one();
        }
    }

    /// How long a batch of completions may wait for more after its first one.
    fn completion_linger(&self) -> Duration {
        match self.starving.load(Ordering::SeqCst) {
            true => COMPLETION_LINGER_STARVING,
            false => COMPLETION_LINGER,
        }
    }
}

impl Tasks {
    /// After the workers are done: end the dispatcher, apply every completion sent so far
    /// and end the completer.
    pub async fn finish(self, p: &Pipeline) {
        p.stop();
        let _ = self.dispatcher.await;
        let (tx, rx) = oneshot::channel();
        if p.done.send(Completion::Close(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let _ = self.completer.await;
    }
}

async fn dispatch_loop(p: Arc<Pipeline>, frontier: Arc<Frontier>, hooks: Arc<dyn Hooks>) {
    // leased items no worker was waiting for (one stopped waiting): first in line
    let mut left: VecDeque<WorkItem> = VecDeque::new();
    while !p.stopping.load(Ordering::SeqCst) {
        if p.paused.load(Ordering::SeqCst) {
            // resumed (or stopped) by a kick
            p.kick.notified().await;
            continue;
        }
        if !left.is_empty() {
            left = p.handoff.give(std::mem::take(&mut left));
        }
        // every idle worker gets an item in this round (up to MAX_DISPATCH)
        let mut want = match left.is_empty() {
            true => p.handoff.idle(),
            false => 0,
        };
        // few idle: let the workers whose answers are being read finish first (each yield
        // runs the other ready tasks once; no timer), so one lease call serves more of them
        let mut yields = 0;
        while want > 0 && want < GATHER_IDLE && yields < GATHER_YIELDS {
            tokio::task::yield_now().await;
            want = p.handoff.idle();
            yields += 1;
        }
        if want == 0 {
            // every worker busy: the workers are the limit
            p.set_starving(false);
            p.kick.notified().await;
            continue;
        }
        let fr = frontier.clone();
        let obs = hooks.clone();
        let leased = tokio::task::spawn_blocking(move || {
            let r = fr.next_batch(now_ms(), want.min(MAX_DISPATCH));
            obs.after_dispatch(r.as_ref().map_or(0, Vec::len));
            // hosts that dispatch found new: their addresses first (answers kick us again)
            let asked = fr.take_resolves();
            (r.map(|items| (items, fr.next_ready_at())), asked)
        })
        .await;
        let leased = leased.map(|(r, asked)| {
            if !asked.is_empty() {
                hooks.resolve(asked);
            }
            r
        });
        if let Ok(Ok((batch, _))) = &leased {
            p.set_starving(batch.len() < want.min(MAX_DISPATCH));
        }
        match leased {
            Ok(Ok((batch, next_ready))) if batch.is_empty() => {
                // nothing may go now: wait until the first host is ready, or a kick
                let wait_ms =
                    next_ready.map_or(1000, |t| t.saturating_sub(now_ms()).clamp(1, 1000));
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(wait_ms)) => {}
                    _ = p.kick.notified() => {}
                }
            }
            Ok(Ok((batch, _))) => {
                left = p.handoff.give(batch);
            }
            Ok(Err(e)) => {
                hooks.failed(Call::NextBatch, &e, want);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                hooks.failed(Call::Task, &e, want);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
