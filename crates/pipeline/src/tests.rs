//! Tests of the pipeline over a real frontier in a temporary directory: a worker's items,
//! outcomes applied in batches, a pause, a bad lease costing only itself, the stop.

use std::fmt::Display;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use frontier::{EnqueueItem, Frontier, FrontierConfig, LeaseId, PageOutcome, WorkItem};
use robots_policy::state::RobotsFetchResult;

use super::*;

/// What the pipeline reported, recorded.
#[derive(Default)]
struct Record {
    /// The frontier, to see what `before_completions` finds applied (where a test sets it).
    frontier: std::sync::OnceLock<Arc<Frontier>>,
    /// Each `before_completions`: the batch's size, the pages completed by then.
    before: Mutex<Vec<(usize, u64)>>,
    completions: Mutex<Vec<usize>>,
    failed: Mutex<Vec<(Call, String, usize)>>,
}

impl Hooks for Record {
    fn after_dispatch(&self, _leased: usize) {}
    fn before_completions(&self, size: usize) {
        if let Some(f) = self.frontier.get() {
            self.before
                .lock()
                .unwrap()
                .push((size, f.stats().completed));
        }
    }
    fn after_completions(&self, size: usize) {
        self.completions.lock().unwrap().push(size);
    }
    fn address_changed(&self, _host_id: u64, _before: Option<IpAddr>, _ip: IpAddr) {}
    fn resolve(&self, _asked: Vec<ResolveRequest>) {}
    fn failed(&self, call: Call, error: &dyn Display, items: usize) {
        self.failed
            .lock()
            .unwrap()
            .push((call, error.to_string(), items));
    }
}

fn frontier(dir: &std::path::Path, urls: &[&str]) -> Arc<Frontier> {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(1);
    let f = Frontier::open(c).unwrap();
    let items: Vec<_> = urls.iter().map(|u| EnqueueItem::seed(*u)).collect();
    f.enqueue_items(&items, now_ms()).unwrap();
    Arc::new(f)
}

async fn next(p: &Pipeline) -> WorkItem {
    tokio::time::timeout(Duration::from_secs(10), p.next_item())
        .await
        .expect("an item in time")
        .expect("not stopped")
}

fn allow_all() -> RobotsFetchResult {
    RobotsFetchResult::ClientError { status: 404 }
}

/// A host's robots.txt first, its page once the robots.txt outcome is applied; both
/// outcomes reach the frontier by the time `finish` returns, each batch announced to the
/// owner before it is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_first_then_the_page_then_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let fr = frontier(dir.path(), &["http://a.test/page"]);
    let hooks = Arc::new(Record::default());
    hooks.frontier.set(fr.clone()).ok();
    let (p, tasks) = Pipeline::start(fr.clone(), hooks.clone());
    let WorkItem::Robots(robots) = next(&p).await else {
        panic!("robots.txt first");
    };
    assert_eq!(robots.origin, "http://a.test");
    p.complete_robots(robots, allow_all(), 5, None).await;
    let WorkItem::Page(page) = next(&p).await else {
        panic!("then the page");
    };
    assert_eq!(page.url, "http://a.test/page");
    p.complete(page.id, PageOutcome::Done { response_ms: 5 }, None, None)
        .await;
    tasks.finish(&p).await;
    assert_eq!(fr.stats().completed, 1);
    let done: usize = hooks.completions.lock().unwrap().iter().sum();
    assert_eq!(done, 2, "one robots.txt and one page applied");
    assert_eq!(
        *hooks.before.lock().unwrap(),
        vec![(1, 0), (1, 0)],
        "each batch announced before it is applied (the page not completed yet)"
    );
    assert!(hooks.failed.lock().unwrap().is_empty());
    assert!(p.next_item().await.is_none(), "no item after the stop");
}

/// Paused, nothing is leased; resumed, the waiting worker gets its item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_holds_new_leases_until_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let fr = frontier(dir.path(), &["http://a.test/"]);
    let (p, tasks) = Pipeline::start(fr.clone(), Arc::new(Record::default()));
    p.set_paused(true);
    let held = tokio::time::timeout(Duration::from_millis(300), p.next_item()).await;
    assert!(held.is_err(), "nothing leased while paused");
    assert_eq!(fr.stats().robots_fetches, 0);
    p.set_paused(false);
    assert!(matches!(next(&p).await, WorkItem::Robots(_)));
    tasks.finish(&p).await;
}

/// A batch naming a lease the frontier does not know is applied one by one: the bad lease
/// is reported, the good one is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_lease_costs_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let fr = frontier(dir.path(), &["http://a.test/"]);
    let hooks = Arc::new(Record::default());
    let (p, tasks) = Pipeline::start(fr.clone(), hooks.clone());
    let WorkItem::Robots(robots) = next(&p).await else {
        panic!("robots.txt first");
    };
    p.complete_robots(robots, allow_all(), 5, None).await;
    let WorkItem::Page(page) = next(&p).await else {
        panic!("then the page");
    };
    let bogus = LeaseId {
        host_id: page.id.host_id + 1000,
        seq: 7,
    };
    let done = PageOutcome::Done { response_ms: 5 };
    // both sent before the completer's linger ends: one batch
    tokio::join!(
        p.complete(bogus, done.clone(), None, None),
        p.complete(page.id, done.clone(), None, None)
    );
    tasks.finish(&p).await;
    assert_eq!(fr.stats().completed, 1, "the good lease is applied");
    let failed = hooks.failed.lock().unwrap();
    let calls: Vec<Call> = failed.iter().map(|f| f.0).collect();
    assert!(calls.contains(&Call::Complete), "{failed:?}");
}

/// An outcome sent after the completer ended is reported as such, not lost silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_after_the_stop_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let fr = frontier(dir.path(), &[]);
    let hooks = Arc::new(Record::default());
    let (p, tasks) = Pipeline::start(fr, hooks.clone());
    tasks.finish(&p).await;
    let lease = LeaseId { host_id: 1, seq: 1 };
    p.complete(lease, PageOutcome::Done { response_ms: 1 }, None, None)
        .await;
    let failed = hooks.failed.lock().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, Call::AfterStop);
    assert!(failed[0].1.starts_with("page lease"), "{:?}", failed[0]);
}

/// Hands out a host's robots.txt, then its first page (applying the robots.txt outcome).
async fn first_page(p: &Pipeline) -> frontier::PageLease {
    let WorkItem::Robots(robots) = next(p).await else {
        panic!("robots.txt first");
    };
    p.complete_robots(robots, allow_all(), 5, None).await;
    let WorkItem::Page(page) = next(p).await else {
        panic!("then the page");
    };
    page
}

/// Wait (on the virtual clock, a millisecond at a time, at most a second) until the
/// dispatcher's verdict is `starving`.
async fn until_starving_is(p: &Pipeline, starving: bool) {
    for _ in 0..1000 {
        if p.starving.load(Ordering::SeqCst) == starving {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the dispatcher never judged starving = {starving}");
}

/// One host, no politeness gap, a worker waiting: the host's next page waits for the
/// last one's completion, so the completer applies it after the short linger, not the
/// long one (a single-host crawl is not slowed by batching). Virtual time: the clock
/// moves only by the timers the pipeline sets.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_starving_dispatcher_gets_completions_applied_soon() {
    let dir = tempfile::tempdir().unwrap();
    let fr = frontier(dir.path(), &["http://a.test/1", "http://a.test/2"]);
    let (p, tasks) = Pipeline::start(fr.clone(), Arc::new(Record::default()));
    let page = first_page(&p).await;
    let waiting = tokio::spawn({
        let p = p.clone();
        async move { next(&p).await }
    });
    // the waiting worker gets nothing while the host's page is out: the dispatcher starves
    until_starving_is(&p, true).await;
    assert!(!waiting.is_finished());
    let completed_at = tokio::time::Instant::now();
    p.complete(page.id, PageOutcome::Done { response_ms: 5 }, None, None)
        .await;
    let WorkItem::Page(second) = waiting.await.unwrap() else {
        panic!("the host's second page");
    };
    assert_eq!(second.url, "http://a.test/2");
    let waited = completed_at.elapsed();
    assert!(
        waited <= COMPLETION_LINGER_STARVING + Duration::from_millis(1),
        "the next page went {waited:?} after the completion"
    );
    tasks.finish(&p).await;
}

/// Every worker busy (none waiting for an item): completions that arrive within the long
/// linger are applied as one batch, one flush for both.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn completions_gather_while_every_worker_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let fr = frontier(dir.path(), &["http://a.test/", "http://b.test/"]);
    let hooks = Arc::new(Record::default());
    let (p, tasks) = Pipeline::start(fr.clone(), hooks.clone());
    let mut robots = Vec::new();
    for _ in 0..2 {
        let WorkItem::Robots(r) = next(&p).await else {
            panic!("robots.txt first");
        };
        robots.push(r);
    }
    for r in robots {
        p.complete_robots(r, allow_all(), 5, None).await;
    }
    let (a, b) = (next(&p).await, next(&p).await);
    let (WorkItem::Page(a), WorkItem::Page(b)) = (a, b) else {
        panic!("then the two pages");
    };
    // no worker waits now: the dispatcher is not starving
    until_starving_is(&p, false).await;
    let before = hooks.completions.lock().unwrap().len();
    let done = PageOutcome::Done { response_ms: 5 };
    p.complete(a.id, done.clone(), None, None).await;
    tokio::time::sleep(COMPLETION_LINGER / 2).await;
    assert_eq!(fr.stats().completed, 0, "the first waits for more");
    p.complete(b.id, done, None, None).await;
    tokio::time::sleep(COMPLETION_LINGER).await;
    assert_eq!(fr.stats().completed, 2);
    let batches = hooks.completions.lock().unwrap()[before..].to_vec();
    assert_eq!(batches, vec![2], "both pages in one batch");
    tasks.finish(&p).await;
}
