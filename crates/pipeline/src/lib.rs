//! Between the frontier and the fetch workers: one dispatcher task leases work for the
//! idle workers (one `next_batch` for all of them, on the blocking pool) and puts each
//! item straight into one idle worker's slot (handoff.rs); one completer task reports page and robots.txt outcomes in batches
//! (one `complete_batch` and one `complete_robots_batch`, so one flush each, per batch).
//! The runtime threads never wait on the frontier's lock or a disk flush, and a flush is
//! shared by every outcome of a batch.

use crate::internal_events::daemon::FrontierCall;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use frontier::{
    Frontier, FrontierError, LeaseId, PageOutcome, RobotsFetchOutcome, RobotsLease, Visit, WorkItem,
};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::daemon::handoff::Handoff;
use crate::daemon::now_ms;

/// At most this many leases per `next_batch` call.
const MAX_DISPATCH: usize = 256;
/// At most this many completions (pages and robots.txt) per batch.
const MAX_COMPLETIONS: usize = 512;
/// A batch of completions waits at most this long for more after its first one.
const COMPLETION_LINGER: Duration = Duration::from_millis(2);
/// Completions waiting to be applied, at most (workers wait beyond that).
const COMPLETION_QUEUE: usize = 4096;

/// Where a fetch connected: the host's address (its IP group) and when the request began.
#[derive(Debug, Clone, Copy)]
pub struct Connected {
    pub ip: std::net::IpAddr,
    pub started_ms: u64,
}

enum Completion {
    /// A page's outcome, with what its answer means for the recrawl schedule and where
    /// its fetch connected.
    Page(LeaseId, PageOutcome, Option<Visit>, Option<Connected>),
    /// A robots.txt fetch's outcome (with its response time in ms) and where it connected.
    Robots(RobotsLease, RobotsFetchOutcome, u64, Option<Connected>),
    /// Apply everything before this, then answer and end.
    Close(oneshot::Sender<()>),
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
    observer: Arc<Observer>,
}

/// What runs the pipeline: spawned by [`Pipeline::start`], ended by [`Tasks::finish`].
pub struct Tasks {
    dispatcher: tokio::task::JoinHandle<()>,
    completer: tokio::task::JoinHandle<()>,
}

/// [`Observer::failed`].
pub type CallFailed = Box<dyn Fn(FrontierCall, &dyn std::fmt::Display, usize) + Send + Sync>;

/// Counts the pipeline reports (to metrics, by the caller's closure).
pub struct Observer {
    /// Called after each `next_batch` (with the items leased) on the blocking pool; the
    /// daemon takes the frontier's events there.
    pub after_dispatch: Box<dyn Fn(usize) + Send + Sync>,
    /// Called after each batch of completions with its size (pages and robots.txt).
    pub after_completions: Box<dyn Fn(usize) + Send + Sync>,
    /// A host's fetch connected to an address it was not known at: (host id, the address
    /// before, the new one).
    pub address_changed: Box<dyn Fn(u64, Option<std::net::IpAddr>, std::net::IpAddr) + Send + Sync>,
    /// New hosts to resolve before their first robots.txt ([`Frontier::take_resolves`]):
    /// called on the runtime, it must not block (the answers go to
    /// [`Frontier::resolved`]).
    pub resolve: Box<dyn Fn(Vec<frontier::ResolveRequest>) + Send + Sync>,
    /// A frontier call failed: (which, the error, how many items it carried).
    pub failed: CallFailed,
}

impl Pipeline {
    /// Start the dispatcher and the completer for `frontier`.
    pub fn start(frontier: Arc<Frontier>, observer: Observer) -> (Arc<Pipeline>, Tasks) {
        let (done_tx, done_rx) = mpsc::channel(COMPLETION_QUEUE);
        let observer = Arc::new(observer);
        let p = Arc::new(Pipeline {
            handoff: Handoff::default(),
            done: done_tx,
            kick: Notify::new(),
            stopping: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            observer: observer.clone(),
        });
        let dispatcher = tokio::spawn(dispatch_loop(p.clone(), frontier.clone(), observer.clone()));
        let completer = tokio::spawn(complete_loop(p.clone(), frontier, done_rx, observer));
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
            (self.observer.failed)(FrontierCall::AfterStop, &format!("page lease {lease:?}"), 1);
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
            (self.observer.failed)(
                FrontierCall::AfterStop,
                &format!("robots.txt of {origin}"),
                1,
            );
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

async fn dispatch_loop(p: Arc<Pipeline>, frontier: Arc<Frontier>, observer: Arc<Observer>) {
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
        let want = match left.is_empty() {
            true => p.handoff.idle(),
            false => 0,
        };
        if want == 0 {
            p.kick.notified().await;
            continue;
        }
        let fr = frontier.clone();
        let obs = observer.clone();
        let leased = tokio::task::spawn_blocking(move || {
            let r = fr.next_batch(now_ms(), want.min(MAX_DISPATCH));
            (obs.after_dispatch)(r.as_ref().map_or(0, Vec::len));
            // hosts that dispatch found new: their addresses first (answers kick us again)
            let asked = fr.take_resolves();
            (r.map(|items| (items, fr.next_ready_at())), asked)
        })
        .await;
        let leased = leased.map(|(r, asked)| {
            if !asked.is_empty() {
                (observer.resolve)(asked);
            }
            r
        });
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
                (observer.failed)(FrontierCall::NextBatch, &e, want);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                (observer.failed)(FrontierCall::Task, &e, want);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn complete_loop(
    p: Arc<Pipeline>,
    frontier: Arc<Frontier>,
    mut rx: mpsc::Receiver<Completion>,
    observer: Arc<Observer>,
) {
    let mut closing = None;
    while closing.is_none() {
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut b = Gathered::default();
        if let Some(tx) = b.take(first) {
            closing = Some(tx);
        }
        let deadline = tokio::time::Instant::now() + COMPLETION_LINGER;
        while closing.is_none() && b.len() < MAX_COMPLETIONS {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(c)) => {
                    if let Some(tx) = b.take(c) {
                        closing = Some(tx);
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        if b.len() > 0 {
            let n = b.len();
            let fr = frontier.clone();
            let obs = observer.clone();
            let res = tokio::task::spawn_blocking(move || {
                // the addresses first: the slots the fetches free are their addresses'
                note_addresses(&fr, &b.addresses, &obs);
                apply_robots(&fr, &b.robots, &obs);
                apply(&fr, &b.pages, &b.visits, &obs)
            })
            .await;
            if let Err(e) = res {
                (observer.failed)(FrontierCall::Task, &e, n);
            }
            (observer.after_completions)(n);
            p.kick();
        }
    }
    if let Some(tx) = closing {
        let _ = tx.send(());
    }
}

/// Completions gathered for one batch.
#[derive(Default)]
struct Gathered {
    pages: Vec<(LeaseId, PageOutcome)>,
    visits: Vec<Option<Visit>>,
    robots: Vec<(RobotsLease, RobotsFetchOutcome, u64)>,
    /// (host id, address, request start) of the fetches that connected
    addresses: Vec<(u64, std::net::IpAddr, u64)>,
}

impl Gathered {
    /// Add one completion; a `Close` is handed back instead.
    fn take(&mut self, c: Completion) -> Option<oneshot::Sender<()>> {
        let (host_id, connected) = match c {
            Completion::Page(l, o, v, a) => {
                self.pages.push((l, o));
                self.visits.push(v);
                (l.host_id, a)
            }
            Completion::Robots(l, o, ms, a) => {
                let host_id = l.host_id;
                self.robots.push((l, o, ms));
                (host_id, a)
            }
            Completion::Close(tx) => return Some(tx),
        };
        if let Some(a) = connected {
            self.addresses.push((host_id, a.ip, a.started_ms));
        }
        None
    }

    fn len(&self) -> usize {
        self.pages.len() + self.robots.len()
    }
}

/// Each host's address, as its fetch reported it (host id, address, request start),
/// before the outcomes are applied (so the freed slots are the address's).
fn note_addresses(
    frontier: &Frontier,
    reports: &[(u64, std::net::IpAddr, u64)],
    observer: &Observer,
) {
    if reports.is_empty() {
        return;
    }
    // one lock and one write for the whole batch
    match frontier.note_addresses(reports) {
        Ok(changed) => {
            for (host_id, before, ip) in changed {
                (observer.address_changed)(host_id, before, ip);
            }
        }
        Err(e) => (observer.failed)(FrontierCall::NoteAddresses, &e, reports.len()),
    }
}

/// One `complete_robots_batch` for the robots.txt outcomes gathered (one flush for all).
fn apply_robots(
    frontier: &Frontier,
    done: &[(RobotsLease, RobotsFetchOutcome, u64)],
    observer: &Observer,
) {
    if done.is_empty() {
        return;
    }
    match frontier.complete_robots_batch(done, now_ms()) {
        Ok(results) => {
            for ((lease, _, _), r) in done.iter().zip(results) {
                if let Err(e) = r {
                    let what = format!("{}: {e}", lease.origin);
                    (observer.failed)(FrontierCall::CompleteRobots, &what, 1);
                }
            }
        }
        Err(e) => (observer.failed)(FrontierCall::CompleteRobotsBatch, &e, done.len()),
    }
}

/// One `complete_batch`; if it names a lease it does not know (nothing applied then), the
/// others are applied one by one so one bad lease costs only itself.
fn apply(
    frontier: &Frontier,
    batch: &[(LeaseId, PageOutcome)],
    visits: &[Option<Visit>],
    observer: &Observer,
) {
    if batch.is_empty() {
        return;
    }
    match frontier.complete_visits(batch, visits, now_ms()) {
        Ok(()) => {}
        Err(e @ FrontierError::UnknownLease(_)) => {
            // nothing was applied: the others one by one, so one bad lease costs only itself
            (observer.failed)(FrontierCall::CompleteBatch, &e, batch.len());
            for (i, (lease, outcome)) in batch.iter().enumerate() {
                let one = [(*lease, outcome.clone())];
                let visit = [visits.get(i).cloned().flatten()];
                if let Err(e) = frontier.complete_visits(&one, &visit, now_ms()) {
                    (observer.failed)(FrontierCall::Complete, &e, 1);
                }
            }
        }
        Err(e) => (observer.failed)(FrontierCall::CompleteBatch, &e, batch.len()),
    }
}
