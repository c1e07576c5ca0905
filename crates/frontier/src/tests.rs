use crate::api::Frontier;
use crate::config::FrontierConfig;
use crate::store::*;
use crate::*;

const T0: u64 = 1_700_000_000_000;

fn open(dir: &std::path::Path, checkpoint_always: bool) -> Frontier {
    open_sliced(dir, checkpoint_always, 4096)
}

/// `slice`: host records a checkpoint writes per call.
fn open_sliced(dir: &std::path::Path, checkpoint_always: bool, slice: usize) -> Frontier {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(1);
    c.journal_checkpoint_slice = slice;
    if checkpoint_always {
        c.journal_checkpoint_bytes = 0;
    }
    Frontier::open(c).unwrap()
}

/// Host records survive reopening whether they were checkpointed to `H`, left only in
/// the journal, or evicted from memory in between; also when each checkpoint is written
/// over several calls (7 of the 30 host records per call), hosts leaving memory and coming
/// back while it is in progress.
#[test]
fn journal_and_checkpoints_keep_host_records() {
    for (checkpoint_always, slice) in [(false, 4096), (true, 4096), (true, 7)] {
        let dir = tempfile::tempdir().unwrap();
        let hosts: Vec<String> = (0..30).map(|h| format!("j{h}.test")).collect();
        let mut expected = Vec::new();
        {
            let f = open_sliced(dir.path(), checkpoint_always, slice);
            let outs: Vec<(String, RobotsFetchOutcome)> = hosts
                .iter()
                .map(|h| {
                    (
                        format!("http://{h}"),
                        RobotsFetchOutcome::ClientError { status: 404 },
                    )
                })
                .collect();
            let outs: Vec<(&str, RobotsFetchOutcome)> =
                outs.iter().map(|(o, r)| (o.as_str(), r.clone())).collect();
            f.set_robots(&outs, T0).unwrap();
            for round in 0..3 {
                let urls: Vec<String> = hosts
                    .iter()
                    .flat_map(|h| (0..3).map(move |i| format!("http://{h}/{round}/{i}")))
                    .collect();
                f.enqueue_batch(&urls, T0).unwrap();
                // dispatch and complete everything: hosts leave memory each round
                loop {
                    let items = f.next_batch(T0 + round, 1000).unwrap();
                    if items.is_empty() {
                        break;
                    }
                    let done: Vec<(LeaseId, PageOutcome)> = items
                        .into_iter()
                        .filter_map(|w| match w {
                            WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 7 })),
                            WorkItem::Robots(_) => None,
                        })
                        .collect();
                    f.complete_batch(&done, T0 + round).unwrap();
                }
            }
            assert_eq!(f.hosts_in_memory(), 0);
            // one more URL each, half of them leased and left in flight
            let urls: Vec<String> = hosts.iter().map(|h| format!("http://{h}/last")).collect();
            f.enqueue_batch(&urls, T0 + 10).unwrap();
            let items = f.next_batch(T0 + 10, 15).unwrap();
            assert_eq!(items.len(), 15);
            for h in &hosts {
                expected.push((h.clone(), f.host_record(h).unwrap().unwrap()));
            }
            let listed = f.hosts(None, 1000).unwrap();
            assert_eq!(listed.len(), hosts.len());
            // checkpointed after every batch, or never (16 MiB not reached); a checkpoint
            // in slices keeps its `J` records until its last slice
            if slice >= hosts.len() {
                assert_eq!(f.store.scan_prefix(b"J").count() == 0, checkpoint_always);
            }
        }
        // twice: the journal is kept at open (no checkpoint there), and a second
        // open over it must read the same
        for reopen in 0..2 {
            let f = open(dir.path(), false);
            assert_eq!(f.stats().recovered_leases, 15);
            if slice >= hosts.len() {
                assert_eq!(
                    f.store.scan_prefix(b"J").count() == 0,
                    checkpoint_always,
                    "reopen {reopen}"
                );
            }
            for (h, before) in &expected {
                let after = f.host_record(h).unwrap().unwrap();
                assert_eq!(after.id, before.id, "{h}");
                assert_eq!(after.in_flight, 0, "{h}");
                assert_eq!(after.counters.enqueued, 10, "{h}");
                assert_eq!(after.counters.completed, 9, "{h}");
                assert_eq!(after.counters.queued, 1, "{h}");
                assert_eq!(after.last_response_ms, 7, "{h}");
                assert_eq!(f.queued_urls(h).unwrap(), vec![format!("http://{h}/last")]);
            }
            assert_eq!(f.hosts(None, 1000).unwrap().len(), hosts.len());
        }
        let f = open(dir.path(), false);
        assert_eq!(f.hosts(Some("j5.test"), 3).unwrap().len(), 3);
        // page by page from the start, records stored, journaled and in memory alike: the
        // same hosts in the same order as one listing, each once
        let all: Vec<(String, u64)> = f
            .hosts(None, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|(k, r)| (k, r.id))
            .collect();
        assert_eq!(all.len(), hosts.len());
        let (mut paged, mut after) = (Vec::new(), None::<String>);
        loop {
            let page = f.hosts(after.as_deref(), 3).unwrap();
            assert!(page.len() <= 3);
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            paged.extend(page.into_iter().map(|(k, r)| (k, r.id)));
        }
        assert_eq!(paged, all);
    }
}

fn done(items: Vec<WorkItem>) -> Vec<(LeaseId, PageOutcome, String)> {
    items
        .into_iter()
        .filter_map(|w| match w {
            WorkItem::Page(p) => Some((p.id, PageOutcome::Done { response_ms: 1 }, p.url)),
            WorkItem::Robots(_) => None,
        })
        .collect()
}

/// With the intake log folded after every batch, queues live in segments and the
/// seen-set in buckets (split as they grow); FIFO order, retries (behind the queue),
/// leases returned at open and duplicates all behave as before, and consumed segments
/// are deleted.
#[test]
fn folded_segments_and_seen_buckets_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mk = || {
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.seed = Some(3);
        c.intake_buffer_bytes = 1;
        c.max_in_flight_per_host = 4;
        Frontier::open(c).unwrap()
    };
    let hosts = 3;
    let urls: Vec<String> = (0..6000)
        .map(|k| format!("http://f{}.test/p/{k}", k % hosts))
        .collect();
    let mut completed: Vec<String> = Vec::new();
    let mut owed: Vec<String> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    {
        let f = mk();
        let outs: Vec<(String, RobotsFetchOutcome)> = (0..hosts)
            .map(|h| {
                (
                    format!("http://f{h}.test"),
                    RobotsFetchOutcome::ClientError { status: 404 },
                )
            })
            .collect();
        let outs: Vec<(&str, RobotsFetchOutcome)> =
            outs.iter().map(|(o, r)| (o.as_str(), r.clone())).collect();
        f.set_robots(&outs, T0).unwrap();
        for chunk in urls.chunks(500) {
            let r = f.enqueue_batch(chunk, T0).unwrap();
            assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
        }
        // the folded log is deleted by the reclaimer's thread: wait for it (5 s at most)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while f.store.scan_prefix(b"W").count() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(f.store.scan_prefix(b"W").count(), 0, "log folded");
        assert!(f.store.scan_prefix(b"B").count() > 1, "buckets split");
        assert_eq!(f.store.scan_prefix(b"S").count(), 0);
        // 12 batches x 3 hosts, one segment each
        assert_eq!(f.store.scan_prefix(b"q").count(), 36);
        let r = f.enqueue_batch(&urls[..50], T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Duplicate));
        // a round: complete some, fail some, leave some in flight
        let items = done(f.next_batch(T0, 100).unwrap());
        assert_eq!(items.len(), 12);
        let mut batch = Vec::new();
        for (n, (id, ok, url)) in items.into_iter().enumerate() {
            match n % 3 {
                0 => {
                    completed.push(url);
                    batch.push((id, ok));
                }
                1 => {
                    failed.push(url.clone());
                    owed.push(url);
                    batch.push((
                        id,
                        PageOutcome::Failed {
                            reason: "status 500".into(),
                        },
                    ));
                }
                _ => owed.push(url),
            }
        }
        f.complete_batch(&batch, T0).unwrap();
    }
    let f = mk();
    let r = f.enqueue_batch(&urls[5950..], T0).unwrap();
    assert!(r.iter().all(|x| *x == EnqueueResult::Duplicate));
    for u in &owed {
        let host = u.split('/').nth(2).unwrap();
        assert!(f.queued_urls(host).unwrap().contains(u), "{u} owed");
    }
    // everything not completed comes out exactly once; returned and retried URLs
    // first, then each host in FIFO order
    let mut got: Vec<String> = Vec::new();
    let mut now = T0 + 10_000_000;
    loop {
        let items = done(f.next_batch(now, 1000).unwrap());
        if items.is_empty() {
            break;
        }
        let batch: Vec<(LeaseId, PageOutcome)> =
            items.iter().map(|(id, o, _)| (*id, o.clone())).collect();
        got.extend(items.into_iter().map(|(_, _, u)| u));
        f.complete_batch(&batch, now).unwrap();
        now += 1;
    }
    let mut all: Vec<String> = got.iter().chain(&completed).cloned().collect();
    all.sort();
    let mut want = urls.clone();
    want.sort();
    assert_eq!(all, want);
    // leases left in flight come back first; URLs that failed on their own go
    // behind the queue
    for u in &owed {
        let pos = got.iter().position(|g| g == u).unwrap();
        if failed.contains(u) {
            let host = u.split('/').nth(2).unwrap();
            let last_queued = got
                .iter()
                .rposition(|g| g.split('/').nth(2) == Some(host) && !owed.contains(g))
                .unwrap();
            assert!(
                pos > last_queued,
                "{u} retried at {pos}, before {last_queued}"
            );
        } else {
            assert!(pos < 12, "{u} came back at {pos}");
        }
    }
    for h in 0..hosts {
        let idx: Vec<usize> = got
            .iter()
            .filter(|u| u.starts_with(&format!("http://f{h}.test/")) && !owed.contains(u))
            .map(|u| u.rsplit('/').next().unwrap().parse().unwrap())
            .collect();
        assert!(idx.windows(2).all(|w| w[0] < w[1]), "host {h} out of order");
    }
    assert_eq!(f.hosts_in_memory(), 0);
    assert_eq!(
        f.store.scan_prefix(b"T").count(),
        0,
        "retry entries deleted"
    );
    // consumed segments are deleted in the background: done once the frontier is
    // dropped (no reopen to clean up after it)
    let store = f.store.clone();
    drop(f);
    assert_eq!(
        store.scan_prefix(b"q").count(),
        0,
        "consumed segments deleted"
    );
}

/// A store written by an earlier version (per-URL `S` and `Q` keys, a version-1 host
/// record with a lease list, an `L` lease key) opens as it is: nothing queued is lost,
/// leased URLs come back, and every URL it had seen is still a duplicate.
#[test]
fn store_of_an_earlier_version_opens_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let urls: Vec<String> = (0..5).map(|i| format!("http://old.test/{i}")).collect();
    {
        let store = SledStore::open(dir.path(), &crate::store::SledConfig::default()).unwrap();
        let mut b = Batch::new();
        // version 1: 18 fixed u64 fields (id 1, enqueued 5, queued 2), lease list [1]
        let mut rec = vec![1u8];
        for v in [1u64, 0, 1, 0, 0, 0, 0, 0, 5, 2] {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        rec.extend_from_slice(&[0u8; 8 * 8]);
        rec.extend_from_slice(&1u64.to_le_bytes());
        rec.extend_from_slice(&1u64.to_le_bytes());
        b.put(keys::host("old.test"), rec);
        b.put(keys::NEXT_HOST_ID.to_vec(), 2u64.to_le_bytes().to_vec());
        let v1 = |u: &str| {
            let mut e = vec![1u8];
            e.extend_from_slice(&0u32.to_le_bytes());
            e.extend_from_slice(u.as_bytes());
            e
        };
        // /0 was completed (its entry deleted), /1 leased, /2 and /3 queued, /4 leased
        // the older way (an `L` key)
        for seq in 1..4u64 {
            b.put(keys::queued(1, seq), v1(&urls[seq as usize]));
        }
        b.put(keys::leased(1, 4), v1(&urls[4]));
        for u in &urls {
            b.put(keys::seen(url_hash(u)), Vec::new());
        }
        store.apply(b).unwrap();
        store.flush().unwrap();
    }
    // folding every batch: the new URL's place in a pack (`p`: one URL is too few for a
    // segment of its own) sits next to the old `Q` ones
    let mut c = FrontierConfig::new(dir.path()).without_gaps();
    c.seed = Some(1);
    c.intake_buffer_bytes = 1;
    let f = Frontier::open(c).unwrap();
    f.set_robots(
        &[(
            "http://old.test",
            RobotsFetchOutcome::ClientError { status: 404 },
        )],
        T0,
    )
    .unwrap();
    let r = f.enqueue_batch(&urls, T0).unwrap();
    assert!(r.iter().all(|x| *x == EnqueueResult::Duplicate), "{r:?}");
    let r = f.enqueue_batch(&["http://old.test/new"], T0).unwrap();
    assert_eq!(r, vec![EnqueueResult::Queued]);
    assert_eq!(f.store.scan_prefix(b"p").count(), 1);
    let mut got = Vec::new();
    for t in 0..10 {
        let items = done(f.next_batch(T0 + t, 10).unwrap());
        let batch: Vec<(LeaseId, PageOutcome)> =
            items.iter().map(|(id, o, _)| (*id, o.clone())).collect();
        got.extend(items.into_iter().map(|(_, _, u)| u));
        f.complete_batch(&batch, T0 + t).unwrap();
    }
    let mut want: Vec<String> = urls[1..].to_vec();
    want.push("http://old.test/new".into());
    assert_eq!(got, want);
    drop(f);
    let f = open(dir.path(), false);
    assert_eq!(f.hosts_in_memory(), 0);
    assert!(f.is_seen("http://old.test/0").unwrap());
    assert!(f.is_seen("http://old.test/new").unwrap());
}

/// A store that keeps two copies: what was applied (read by the frontier) and what a crash
/// would keep (what was applied before the last flush, in order).
#[derive(Default)]
pub(crate) struct CrashSim {
    pub(crate) live: MemStore,
    pub(crate) unflushed: parking_lot::Mutex<Vec<Batch>>,
    pub(crate) durable: std::sync::Arc<MemStore>,
}

impl Store for CrashSim {
    crate::store::delegate_store_reads!(live);
    fn apply(&self, batch: Batch) -> std::result::Result<(), StoreError> {
        // under the lock: the order of the unflushed list is the order of the log
        let mut unflushed = self.unflushed.lock();
        unflushed.push(batch.clone());
        self.live.apply(batch)
    }
    fn flush(&self) -> std::result::Result<(), StoreError> {
        for b in self.unflushed.lock().drain(..) {
            self.durable.apply(b)?;
        }
        Ok(())
    }
}

fn open_sim(store: std::sync::Arc<dyn Store>) -> Frontier {
    let mut c = FrontierConfig::new("/nonexistent-crash-sim").without_gaps();
    c.seed = Some(1);
    Frontier::open_store(c, store, RobotsEngine::default()).unwrap()
}

/// Every host's robots.txt answered 404 (allow all); `hosts` are names (`a.test`).
pub(crate) fn allow_all(f: &Frontier, hosts: &[impl AsRef<str>], now: u64) {
    let origins: Vec<String> = hosts
        .iter()
        .map(|h| format!("http://{}", h.as_ref()))
        .collect();
    let outs: Vec<(&str, RobotsFetchOutcome)> = origins
        .iter()
        .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&outs, now).unwrap();
}

pub(crate) fn pages(items: Vec<WorkItem>) -> Vec<PageLease> {
    items
        .into_iter()
        .filter_map(|w| match w {
            WorkItem::Page(p) => Some(p),
            WorkItem::Robots(_) => None,
        })
        .collect()
}

/// Dispatches leave the hosts they lease unsettled (nothing written) only up to
/// `UNSETTLED_MAX` hosts: leases an external fetcher never completes cannot grow that set
/// without bound; past it, a dispatch writes every unsettled host's record.
#[test]
fn leases_never_completed_are_written_past_the_unsettled_bound() {
    use crate::store::journal::UNSETTLED_MAX;
    let sim = std::sync::Arc::new(CrashSim::default());
    let f = open_sim(sim.clone());
    let hosts: Vec<String> = (0..UNSETTLED_MAX + 100)
        .map(|i| format!("h{i}.test"))
        .collect();
    allow_all(&f, &hosts, T0);
    let urls: Vec<String> = hosts.iter().map(|h| format!("http://{h}/page")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    sim.unflushed.lock().clear();
    let first = pages(f.next_batch(T0, 1000).unwrap());
    assert_eq!(first.len(), 1000);
    assert!(
        sim.unflushed.lock().is_empty(),
        "under the bound nothing is written"
    );
    assert_eq!(f.inner.lock().journal.unsettled.len(), 1000);
    let mut leased = first.len();
    while leased < hosts.len() {
        let more = pages(f.next_batch(T0, 1000).unwrap());
        assert!(!more.is_empty(), "{leased} of {} leased", hosts.len());
        leased += more.len();
        assert!(f.inner.lock().journal.unsettled.len() <= UNSETTLED_MAX);
    }
    assert!(
        !sim.unflushed.lock().is_empty(),
        "past the bound the leases are written"
    );
}

/// Handing out leases does not flush; a crash before any later flush loses the leases only:
/// every acknowledged URL is handed out again. A completion's flush carries the leases
/// before it, so after a crash then the completed URL stays done and the others return.
#[test]
fn lease_not_flushed_is_served_again_after_crash() {
    let sim = std::sync::Arc::new(CrashSim::default());
    let f = open_sim(sim.clone());
    let hosts = ["a.test", "b.test", "c.test"];
    allow_all(&f, &hosts, T0);
    // one URL per host: one lease each at once
    let urls: Vec<String> = hosts.iter().map(|h| format!("http://{h}/page")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let flushes = f.flushes();
    let leased = pages(f.next_batch(T0, 10).unwrap());
    assert_eq!(leased.len(), 3, "all three URLs handed out");
    assert_eq!(f.flushes(), flushes, "handing out leases does not flush");
    assert!(
        sim.unflushed.lock().is_empty(),
        "the leases wait in memory for the next write"
    );

    // crash now: what was flushed is the state before the leases
    let after_crash: std::sync::Arc<dyn Store> = std::sync::Arc::new(MemStore::new());
    {
        let mut b = Batch::new();
        for (k, v) in sim.durable.scan_prefix(b"").map(|kv| kv.unwrap()) {
            b.put(k, v);
        }
        after_crash.apply(b).unwrap();
    }
    let g = open_sim(after_crash);
    let mut again: Vec<String> = pages(g.next_batch(T0 + 10, 10).unwrap())
        .into_iter()
        .map(|p| p.url)
        .collect();
    again.sort();
    assert_eq!(again, urls, "every URL is served again, none lost");

    // in the first frontier, one completion: its flush carries all three leases
    f.complete(leased[0].id, PageOutcome::Done { response_ms: 5 }, T0 + 3)
        .unwrap();
    assert!(sim.unflushed.lock().is_empty());
    let g = open_sim(sim.durable.clone());
    assert_eq!(g.stats().recovered_leases, 2);
    let mut back: Vec<String> = pages(g.next_batch(T0 + 10, 10).unwrap())
        .into_iter()
        .map(|p| p.url)
        .collect();
    back.sort();
    let mut expected: Vec<String> = leased[1..].iter().map(|p| p.url.clone()).collect();
    expected.sort();
    assert_eq!(
        back, expected,
        "the completed URL stays done, the two in flight return"
    );
}

/// A store whose flushes can be held (a slow disk) or fail (a bad disk), on demand.
#[derive(Default)]
pub(crate) struct HeldFlush {
    inner: MemStore,
    // set: every write fails (a disk gone bad; unlike a failed flush, not sticky)
    pub(crate) failing: std::sync::atomic::AtomicBool,
    // (held, flushes waiting)
    state: parking_lot::Mutex<(bool, usize)>,
    cv: parking_lot::Condvar,
}

impl HeldFlush {
    fn hold(&self, on: bool) {
        self.state.lock().0 = on;
        self.cv.notify_all();
    }
    fn waiting(&self) -> usize {
        self.state.lock().1
    }
}

impl Store for HeldFlush {
    crate::store::delegate_store_reads!(inner);
    fn apply(&self, batch: Batch) -> std::result::Result<(), StoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError {
                op: "apply",
                source: "disk gone bad (test)".into(),
            });
        }
        self.inner.apply(batch)
    }
    fn flush(&self) -> std::result::Result<(), StoreError> {
        let mut st = self.state.lock();
        st.1 += 1;
        while st.0 {
            self.cv.wait(&mut st);
        }
        st.1 -= 1;
        Ok(())
    }
}

/// A robots.txt outcome waiting for its flush does not stop the scheduler: other hosts'
/// pages are handed out meanwhile; the host whose rules are being made durable gets none
/// until they are, then its pages flow.
#[test]
fn robots_outcome_flush_does_not_hold_the_scheduler() {
    let store = std::sync::Arc::new(HeldFlush::default());
    let f = std::sync::Arc::new(open_sim(store.clone()));
    f.set_robots(
        &[(
            "http://known.test",
            RobotsFetchOutcome::ClientError { status: 404 },
        )],
        T0,
    )
    .unwrap();
    let urls = ["http://new.test/a", "http://known.test/a"];
    f.enqueue_batch(&urls, T0).unwrap();
    let items = f.next_batch(T0, 10).unwrap();
    let robots = items
        .iter()
        .find_map(|w| match w {
            WorkItem::Robots(r) => Some(r.clone()),
            WorkItem::Page(_) => None,
        })
        .expect("new.test needs its robots.txt");
    let known: Vec<PageLease> = pages(items);
    assert_eq!(known.len(), 1);
    f.complete(known[0].id, PageOutcome::Done { response_ms: 1 }, T0)
        .unwrap();
    f.enqueue_batch(&["http://known.test/b"], T0).unwrap();

    store.hold(true);
    let completer = {
        let f = f.clone();
        std::thread::spawn(move || {
            f.complete_robots(
                &robots,
                &RobotsFetchOutcome::ClientError { status: 404 },
                1,
                T0 + 1,
            )
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.waiting() == 0 {
        assert!(std::time::Instant::now() < deadline, "no flush started");
        std::thread::yield_now();
    }
    // the flush is held: dispatch must still answer (run on a thread, so a blocked call
    // fails the test instead of hanging it)
    let (tx, rx) = std::sync::mpsc::channel();
    let dispatcher = {
        let f = f.clone();
        std::thread::spawn(move || {
            let _ = tx.send(f.next_batch(T0 + 2, 10).map(pages));
        })
    };
    let during = rx.recv_timeout(std::time::Duration::from_secs(10));
    store.hold(false);
    completer.join().unwrap().unwrap();
    dispatcher.join().unwrap();
    let during: Vec<String> = during
        .expect("dispatch waited for a robots.txt flush")
        .unwrap()
        .into_iter()
        .map(|p| p.url)
        .collect();
    assert_eq!(during, vec!["http://known.test/b".to_string()]);
    let after: Vec<String> = pages(f.next_batch(T0 + 3, 10).unwrap())
        .into_iter()
        .map(|p| p.url)
        .collect();
    assert_eq!(after, vec!["http://new.test/a".to_string()]);
}

/// A batch of completions with one unknown lease applies none of them: the others stay
/// leased and can be completed afterwards (a batching caller retries them one by one).
#[test]
fn complete_batch_with_an_unknown_lease_changes_nothing() {
    let f = open_sim(std::sync::Arc::new(MemStore::new()));
    let hosts = ["http://a.test", "http://b.test"];
    let robots: Vec<(&str, RobotsFetchOutcome)> = hosts
        .iter()
        .map(|h| (*h, RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&robots, T0).unwrap();
    let urls: Vec<String> = hosts.iter().map(|h| format!("{h}/x")).collect();
    f.enqueue_batch(&urls, T0).unwrap();
    let leased = pages(f.next_batch(T0, 10).unwrap());
    assert_eq!(leased.len(), 2);
    let stale = LeaseId {
        host_id: leased[1].id.host_id,
        seq: leased[1].id.seq + 100,
    };
    let done = PageOutcome::Done { response_ms: 1 };
    let batch = vec![
        (leased[0].id, done.clone()),
        (stale, done.clone()),
        (leased[1].id, done.clone()),
    ];
    assert!(matches!(
        f.complete_batch(&batch, T0),
        Err(FrontierError::UnknownLease(l)) if l == stale
    ));
    // the same lease twice is refused too
    assert!(f
        .complete_batch(
            &[(leased[0].id, done.clone()), (leased[0].id, done.clone())],
            T0
        )
        .is_err());
    for p in &leased {
        f.complete(p.id, done.clone(), T0).unwrap();
    }
}

/// With `max_robots_in_flight`, many new hosts do not take every robots.txt slot at once:
/// pages of a host whose rules are known go out beside them, and each completed robots.txt
/// frees a slot for the next host in line, until every host got its robots.txt.
#[test]
fn robots_fetches_are_capped_and_pages_flow_beside_them() {
    let mut c = FrontierConfig::new("/nonexistent-robots-cap").without_gaps();
    c.seed = Some(1);
    c.max_robots_in_flight = Some(2);
    let f = Frontier::open_store(
        c,
        std::sync::Arc::new(MemStore::new()),
        RobotsEngine::default(),
    )
    .unwrap();
    // ten new hosts queued first (older ready times), then one with known rules
    let new: Vec<String> = (0..10).map(|i| format!("http://n{i}.test/p")).collect();
    f.enqueue_batch(&new, T0).unwrap();
    f.set_robots(
        &[(
            "http://known.test",
            RobotsFetchOutcome::ClientError { status: 404 },
        )],
        T0,
    )
    .unwrap();
    let known: Vec<String> = (0..3).map(|i| format!("http://known.test/{i}")).collect();
    f.enqueue_batch(&known, T0 + 1).unwrap();

    let mut robots_done = std::collections::BTreeSet::new();
    let mut pages_done = Vec::new();
    for now in T0 + 2..T0 + 102 {
        let items = f.next_batch(now, 100).unwrap();
        if items.is_empty() {
            break;
        }
        let mut robots_out = 0;
        let mut leases = Vec::new();
        for w in items {
            match w {
                WorkItem::Robots(r) => {
                    robots_out += 1;
                    f.complete_robots(&r, &RobotsFetchOutcome::ClientError { status: 404 }, 1, now)
                        .unwrap();
                    robots_done.insert(r.origin);
                }
                WorkItem::Page(p) => leases.push(p),
            }
        }
        assert!(
            robots_out <= 2,
            "at most two robots.txt at once, got {robots_out}"
        );
        for p in leases {
            f.complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                .unwrap();
            pages_done.push(p.url);
        }
    }
    // the known host's first page went out in the first round, beside two robots.txt
    assert_eq!(
        pages_done.first().map(String::as_str),
        Some("http://known.test/0")
    );
    assert_eq!(robots_done.len(), 10, "every new host got its robots.txt");
    assert_eq!(pages_done.len(), 13, "every page was fetched");
}

/// A robots.txt outcome that cannot be made durable gives its slot and its host back:
/// with one robots.txt slot, the next host still gets its robots.txt, and the failed host's
/// robots.txt is fetched again after the pause instead of never.
#[test]
fn robots_outcome_store_error_frees_the_slot_and_the_host() {
    let store = std::sync::Arc::new(HeldFlush::default());
    let mut c = FrontierConfig::new("/nonexistent-robots-store-error").without_gaps();
    c.seed = Some(1);
    c.max_robots_in_flight = Some(1);
    let f = Frontier::open_store(c, store.clone(), RobotsEngine::default()).unwrap();
    f.enqueue_batch(&["http://a.test/p", "http://b.test/p"], T0)
        .unwrap();
    let robots_of = |items: Vec<WorkItem>| -> Vec<RobotsLease> {
        items
            .into_iter()
            .filter_map(|w| match w {
                WorkItem::Robots(r) => Some(r),
                WorkItem::Page(_) => None,
            })
            .collect()
    };
    let first = robots_of(f.next_batch(T0, 10).unwrap());
    assert_eq!(first.len(), 1, "one robots.txt slot");
    store
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let allow = RobotsFetchOutcome::ClientError { status: 404 };
    assert!(f.complete_robots(&first[0], &allow, 1, T0 + 1).is_err());
    store
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // the slot is free again: the other host's robots.txt goes out
    let second = robots_of(f.next_batch(T0 + 2, 10).unwrap());
    assert_eq!(second.len(), 1, "the slot came back");
    assert_ne!(second[0].origin, first[0].origin);
    f.complete_robots(&second[0], &allow, 1, T0 + 3).unwrap();
    // the failed host's robots.txt comes again after the pause, then its page
    let mut fetched = Vec::new();
    let mut again = None;
    for now in [T0 + 4, T0 + 5_000, T0 + 6_000, T0 + 7_000] {
        for w in f.next_batch(now, 10).unwrap() {
            match w {
                WorkItem::Robots(r) => {
                    assert!(
                        now >= T0 + 1 + 5_000,
                        "robots.txt retried only after the pause"
                    );
                    f.complete_robots(&r, &allow, 1, now).unwrap();
                    again = Some(r.origin);
                }
                WorkItem::Page(p) => {
                    f.complete(p.id, PageOutcome::Done { response_ms: 1 }, now)
                        .unwrap();
                    fetched.push(p.url);
                }
            }
        }
    }
    assert_eq!(again.as_deref(), Some(first[0].origin.as_str()));
    fetched.sort();
    assert_eq!(fetched, vec!["http://a.test/p", "http://b.test/p"]);
}

/// The gauges' totals come from the hosts with work: URLs queued over all hosts, hosts
/// backing off after a 503, paused keys; a host whose last URL is done adds nothing.
#[test]
fn host_totals_count_queued_backoff_and_paused() {
    let f = open_sim(std::sync::Arc::new(MemStore::new()));
    let hosts = ["http://a.test", "http://b.test", "http://c.test"];
    let robots: Vec<(&str, RobotsFetchOutcome)> = hosts
        .iter()
        .map(|h| (*h, RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&robots, T0).unwrap();
    f.enqueue_batch(
        &[
            "http://a.test/1",
            "http://a.test/2",
            "http://b.test/1",
            "http://c.test/1",
        ],
        T0,
    )
    .unwrap();
    assert_eq!(f.host_totals(T0).queued, 4);
    assert!(f.pause("c.test").unwrap());
    let leased = pages(f.next_batch(T0, 10).unwrap());
    assert_eq!(leased.len(), 2, "a and b; c is paused");
    assert_eq!(f.host_totals(T0).in_flight, 2);
    for p in leased {
        let outcome = if p.url.starts_with("http://a.test") {
            PageOutcome::Throttled {
                status: 503,
                retry_after: Some(std::time::Duration::from_secs(60)),
                response_ms: 1,
            }
        } else {
            PageOutcome::Done { response_ms: 1 }
        };
        f.complete(p.id, outcome, T0 + 1).unwrap();
    }
    let t = f.host_totals(T0 + 2);
    // a: both URLs queued again (one retried) and backing off; b: done; c: paused
    assert_eq!(
        t,
        HostTotals {
            queued: 3,
            in_flight: 0,
            in_backoff: 1,
            paused: 1
        }
    );
    // the back-off ends
    assert_eq!(f.host_totals(T0 + 120_000).in_backoff, 0);
}

/// An external fetcher's lease completed with no next date marks its URL done for good
/// (kept across a reopen); queueing it again with a date unmarks it, also across a reopen.
#[test]
fn done_for_good_survives_a_reopen_and_a_requeue_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || {
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.seed = Some(1);
        c
    };
    let urls = ["http://d.test/a", "http://d.test/b"];
    {
        let f = Frontier::open(cfg()).unwrap();
        allow_all(&f, &["d.test"], T0);
        f.enqueue_batch(&urls, T0).unwrap();
        // one at a time (one in flight per host): /a, then /b stays out
        let a = pages(f.lease_for(T0, 10, 60_000, &mut |_| true).unwrap());
        assert_eq!(a[0].url, urls[0]);
        f.complete_visits(
            &[(a[0].id, PageOutcome::Done { response_ms: 0 })],
            &[None],
            T0,
        )
        .unwrap();
        let b = pages(f.lease_for(T0 + 1, 10, 60_000, &mut |_| true).unwrap());
        assert_eq!(b[0].url, urls[1]);
        assert!(f.fetcher_done(urls[0]).unwrap());
        assert!(!f.fetcher_done(urls[1]).unwrap(), "still out, not done");
    }
    let f = Frontier::open(cfg()).unwrap();
    assert!(f.fetcher_done(urls[0]).unwrap(), "kept across the reopen");
    let again = EnqueueItem {
        refetch_at_ms: Some(T0 + 3_600_000),
        ..EnqueueItem::seed(urls[0].to_string())
    };
    assert_eq!(
        f.enqueue_again(&[again], T0 + 1).unwrap(),
        vec![EnqueueResult::Queued]
    );
    assert!(!f.fetcher_done(urls[0]).unwrap(), "queued again");
    drop(f);
    let f = Frontier::open(cfg()).unwrap();
    assert!(
        !f.fetcher_done(urls[0]).unwrap(),
        "still queued after a reopen"
    );
}

/// After `hold_hosts_after_restart(T)` a host with queued URLs is not served before its gap
/// from T (what a crash lost may include a request that just ended), then it is.
#[test]
fn hosts_wait_their_gap_from_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || {
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.min_delay_ms = 1000;
        c.max_delay_ms = 1000;
        c.seed = Some(1);
        c
    };
    {
        let f = Frontier::open(cfg()).unwrap();
        allow_all(&f, &["r.test"], T0);
        f.enqueue_batch(&["http://r.test/a"], T0).unwrap();
    }
    let f = Frontier::open(cfg()).unwrap();
    let restart = T0 + 10_000;
    f.hold_hosts_after_restart(restart);
    assert!(pages(f.next_batch(restart + 999, 10).unwrap()).is_empty());
    let served = pages(f.next_batch(restart + 1000, 10).unwrap());
    assert_eq!(
        served.len(),
        1,
        "served once its gap from the restart is over"
    );
}
