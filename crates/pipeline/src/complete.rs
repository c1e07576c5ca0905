//! The completer: outcomes gathered into batches (up to `MAX_COMPLETIONS`, lingering
//! `COMPLETION_LINGER` after the first, `COMPLETION_LINGER_STARVING` while the dispatcher
//! has idle workers and nothing to lease), each batch applied with one call per kind (one
//! flush each): the addresses the fetches connected to first, then robots.txt outcomes,
//! then pages.

use std::net::IpAddr;
use std::sync::Arc;

use frontier::{
    Frontier, FrontierError, LeaseId, PageOutcome, RobotsFetchOutcome, RobotsLease, Visit,
};
use tokio::sync::{mpsc, oneshot};

use crate::{now_ms, Call, Connected, Hooks, Pipeline, MAX_COMPLETIONS};

/// What a worker hands the completer.
pub(crate) enum Completion {
    /// A page's outcome, with what its answer means for the recrawl schedule and where
    /// its fetch connected.
    Page(LeaseId, PageOutcome, Option<Visit>, Option<Connected>),
    /// A robots.txt fetch's outcome (with its response time in ms) and where it connected.
    Robots(RobotsLease, RobotsFetchOutcome, u64, Option<Connected>),
    /// Apply everything before this, then answer and end.
    Close(oneshot::Sender<()>),
}

pub(crate) async fn complete_loop(
    p: Arc<Pipeline>,
    frontier: Arc<Frontier>,
    mut rx: mpsc::Receiver<Completion>,
    hooks: Arc<dyn Hooks>,
) {
    let mut closing = None;
    // the last batch's vectors, emptied: a batch gathers without growing them again
    let mut spare = Gathered::default();
    while closing.is_none() {
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut b = std::mem::take(&mut spare);
        if let Some(tx) = b.take(first) {
            closing = Some(tx);
        }
        let started = tokio::time::Instant::now();
        let mut deadline = started + p.completion_linger();
        while closing.is_none() && b.len() < MAX_COMPLETIONS {
            tokio::select! {
                c = rx.recv() => match c {
                    Some(c) => {
                        if let Some(tx) = b.take(c) {
                            closing = Some(tx);
                        }
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                // the dispatcher began starving: the linger shortens (checked below)
                _ = p.starved.notified() => {}
            }
            deadline = deadline.min(started + p.completion_linger());
            if tokio::time::Instant::now() >= deadline {
                break;
            }
        }
        if b.len() > 0 {
            let n = b.len();
            let fr = frontier.clone();
            let obs = hooks.clone();
            let res = tokio::task::spawn_blocking(move || {
                obs.before_completions(n);
                // the addresses first: the slots the fetches free are their addresses'
                note_addresses(&fr, &b.addresses, &*obs);
                apply_robots(&fr, &b.robots, &*obs);
                apply(&fr, &b.pages, &b.visits, &*obs);
                b.clear();
                b
            })
            .await;
            match res {
                Ok(emptied) => spare = emptied,
                Err(e) => hooks.failed(Call::Task, &e, n),
            }
            hooks.after_completions(n);
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
    addresses: Vec<(u64, IpAddr, u64)>,
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

    /// Empty, keeping the vectors' room (at most a batch of [`MAX_COMPLETIONS`]).
    fn clear(&mut self) {
        self.pages.clear();
        self.visits.clear();
        self.robots.clear();
        self.addresses.clear();
    }
}

/// Each host's address, as its fetch reported it (host id, address, request start),
/// before the outcomes are applied (so the freed slots are the address's).
fn note_addresses(frontier: &Frontier, reports: &[(u64, IpAddr, u64)], hooks: &dyn Hooks) {
    if reports.is_empty() {
        return;
    }
    // one lock and one write for the whole batch
    match frontier.note_addresses(reports) {
        Ok(changed) => {
            for (host_id, before, ip) in changed {
                hooks.address_changed(host_id, before, ip);
            }
        }
        Err(e) => hooks.failed(Call::NoteAddresses, &e, reports.len()),
    }
}

/// One `complete_robots_batch` for the robots.txt outcomes gathered (one flush for all).
fn apply_robots(
    frontier: &Frontier,
    done: &[(RobotsLease, RobotsFetchOutcome, u64)],
    hooks: &dyn Hooks,
) {
    if done.is_empty() {
        return;
    }
    match frontier.complete_robots_batch(done, now_ms()) {
        Ok(results) => {
            for ((lease, _, _), r) in done.iter().zip(results) {
                if let Err(e) = r {
                    let what = format!("{}: {e}", lease.origin);
                    hooks.failed(Call::CompleteRobots, &what, 1);
                }
            }
        }
        Err(e) => hooks.failed(Call::CompleteRobotsBatch, &e, done.len()),
    }
}

/// One `complete_batch`; if it names a lease it does not know (nothing applied then), the
/// others are applied one by one so one bad lease costs only itself.
fn apply(
    frontier: &Frontier,
    batch: &[(LeaseId, PageOutcome)],
    visits: &[Option<Visit>],
    hooks: &dyn Hooks,
) {
    if batch.is_empty() {
        return;
    }
    match frontier.complete_visits(batch, visits, now_ms()) {
        Ok(()) => {}
        Err(e @ FrontierError::UnknownLease(_)) => {
            // nothing was applied: the others one by one, so one bad lease costs only itself
            hooks.failed(Call::CompleteBatch, &e, batch.len());
            for (i, (lease, outcome)) in batch.iter().enumerate() {
                let one = [(*lease, outcome.clone())];
                let visit = [visits.get(i).cloned().flatten()];
                if let Err(e) = frontier.complete_visits(&one, &visit, now_ms()) {
                    hooks.failed(Call::Complete, &e, 1);
                }
            }
        }
        Err(e) => hooks.failed(Call::CompleteBatch, &e, batch.len()),
    }
}
