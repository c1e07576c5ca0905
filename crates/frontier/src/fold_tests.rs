//! Queue segments are keyed by fold first (`q` keys): each fold's segments sort after
//! every earlier fold's, also across a reopen, and the queues read back whole and in order.
//! Hosts with only a few entries at a fold share packs (`p` keys) instead, so these fold
//! 48 URLs a host.

use std::collections::HashMap;

use crate::store::keys;
use crate::*;

const T0: u64 = 1_700_000_000_000;

fn open(dir: &std::path::Path) -> Frontier {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.seed = Some(5);
    // fold after every batch
    c.intake_buffer_bytes = 1;
    c.max_in_flight_per_host = 64;
    Frontier::open(c).unwrap()
}

/// (fold, host id, first sequence) of every stored segment, in key order.
fn segment_keys(f: &Frontier) -> Vec<(u32, u64, u64)> {
    f.store
        .scan_prefix(b"q")
        .map(|kv| keys::parse_segment(&kv.unwrap().0).unwrap())
        .collect()
}

/// Keys the folds wrote: segments (`q`) and packs (`p`).
fn stored_parts(f: &Frontier) -> usize {
    f.store.scan_prefix(b"q").count() + f.store.scan_prefix(b"p").count()
}

/// robots.txt known (404: no rules) for hosts `h0.test` .. `h<hosts-1>.test`.
fn robots_known(f: &Frontier, hosts: usize) {
    let robots: Vec<String> = (0..hosts).map(|h| format!("http://h{h}.test")).collect();
    let robots: Vec<(&str, RobotsFetchOutcome)> = robots
        .iter()
        .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&robots, T0).unwrap();
}

/// robots.txt known (404) for hosts `h0.test` .. `h<hosts-1>.test`, then every URL leased
/// and completed: their URLs in the order they were leased.
fn crawl_all(f: &Frontier, hosts: usize) -> Vec<String> {
    robots_known(f, hosts);
    let mut got = Vec::new();
    for t in 0..500 {
        if !crawl_round(f, T0 + t, 1000, &mut got) {
            break;
        }
    }
    got
}

/// One lease call of up to `max` items at `now`, every page completed as done, its URLs
/// added to `got`; false if nothing was handed out.
fn crawl_round(f: &Frontier, now: u64, max: usize, got: &mut Vec<String>) -> bool {
    let items = f.next_batch(now, max).unwrap();
    if items.is_empty() {
        return false;
    }
    let mut done = Vec::new();
    for w in items {
        if let WorkItem::Page(p) = w {
            got.push(p.url.clone());
            done.push((p.id, PageOutcome::Done { response_ms: 1 }));
        }
    }
    f.complete_batch(&done, now).unwrap();
    true
}

#[test]
fn each_fold_writes_after_every_earlier_one_also_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = 40;
    let url = |k: usize| format!("http://h{}.test/p/{k}", k % hosts);
    let batch = |from: usize| (from..from + 48 * hosts).map(url).collect::<Vec<String>>();
    {
        let f = open(dir.path());
        for b in 0..3 {
            let r = f.enqueue_batch(&batch(b * 48 * hosts), T0).unwrap();
            assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
        }
        let segs = segment_keys(&f);
        // one segment per host per fold, in fold order
        assert_eq!(segs.len(), 3 * hosts);
        // and each host's list of them holds no room it does not use
        assert!(f
            .inner
            .lock()
            .sched
            .hosts()
            .all(|(_, h)| h.segs.len() == 3 && h.segs.capacity() == 3));
        let folds: Vec<u32> = segs.iter().map(|s| s.0).collect();
        assert_eq!(
            folds
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        assert!(folds.windows(2).all(|w| w[0] <= w[1]));
    }
    let before = segment_keys(&open(dir.path()));
    let last_fold = before.iter().map(|s| s.0).max().unwrap();
    let f = open(dir.path());
    for b in 3..5 {
        f.enqueue_batch(&batch(b * 48 * hosts), T0).unwrap();
    }
    let after = segment_keys(&f);
    let new: Vec<&(u32, u64, u64)> = after.iter().filter(|s| !before.contains(s)).collect();
    assert_eq!(new.len(), 2 * hosts);
    assert!(
        new.iter().all(|s| s.0 > last_fold),
        "folds after the reopen continue the numbering: {new:?}"
    );
    // every URL comes back once, each host's in the order given
    let mut got: HashMap<String, Vec<usize>> = HashMap::new();
    for url in crawl_all(&f, hosts) {
        let (host, k) = url.rsplit_once("/p/").unwrap();
        got.entry(host.to_string())
            .or_default()
            .push(k.parse().unwrap());
    }
    assert_eq!(got.len(), hosts);
    for (host, ks) in &got {
        let h: usize = host
            .trim_start_matches("http://h")
            .trim_end_matches(".test")
            .parse()
            .unwrap();
        let want: Vec<usize> = (0..5 * 48 * hosts).filter(|k| k % hosts == h).collect();
        assert_eq!(ks, &want, "{host}");
    }
    let store = f.store.clone();
    drop(f);
    assert_eq!(
        store.scan_prefix(b"q").count(),
        0,
        "consumed segments deleted"
    );
}

fn bucket_keys(f: &Frontier) -> Vec<u128> {
    let mut starts = vec![0];
    for kv in f.store.scan_prefix(b"B") {
        let (k, _) = kv.unwrap();
        starts.push(u128::from_be_bytes(k[1..17].try_into().unwrap()));
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// Opening lists the seen buckets from their directory (`b` keys written with each split),
/// not by reading every bucket; a store from before the directory is listed once. Either
/// way the seen-set answers as before.
#[test]
fn the_bucket_directory_lists_every_bucket_also_for_a_store_from_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let urls: Vec<String> = (0..3000)
        .map(|k| format!("http://s{}.test/{k}", k % 7))
        .collect();
    let starts = {
        let f = open(dir.path());
        for chunk in urls.chunks(500) {
            f.enqueue_batch(chunk, T0).unwrap();
        }
        let starts = bucket_keys(&f);
        assert!(starts.len() > 5, "the buckets split: {starts:?}");
        assert_eq!(f.inner.lock().seen.starts, starts);
        starts
    };
    let f = open(dir.path());
    assert_eq!(f.inner.lock().seen.starts, starts, "from the directory");
    // as a store from before the directory: no `b` keys, no marker
    let mut b = crate::store::Batch::new();
    for s in &starts[1..] {
        b.del(keys::bucket_start(*s));
    }
    b.del(keys::BUCKET_DIRECTORY.to_vec());
    f.store.apply(b).unwrap();
    f.store.flush().unwrap();
    drop(f);
    let f = open(dir.path());
    assert_eq!(f.inner.lock().seen.starts, starts, "from the buckets");
    assert!(f.store.contains(keys::BUCKET_DIRECTORY).unwrap());
    assert_eq!(f.store.scan_prefix(b"b").count(), starts.len() - 1);
    drop(f);
    let f = open(dir.path());
    assert_eq!(
        f.inner.lock().seen.starts,
        starts,
        "from the directory written then"
    );
    let again = f.enqueue_batch(&urls, T0).unwrap();
    assert!(
        again.iter().all(|r| *r != EnqueueResult::Queued),
        "a URL seen before the reopens was accepted again"
    );
}

/// Log bytes written before the batch that made the first segments, URLs going to
/// `hosts_of(k)`, with an intake buffer of `buffer` bytes.
fn logged_before_the_first_fold(buffer: u64, host_of: impl Fn(usize) -> usize) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let mut c = FrontierConfig::new(dir.path()).without_gaps();
    c.intake_buffer_bytes = buffer;
    let f = Frontier::open(c).unwrap();
    let mut k = 0;
    loop {
        let urls: Vec<String> = (k..k + 10)
            .map(|i| format!("http://h{}.test/p/{i}", host_of(i)))
            .collect();
        k += 10;
        let before = f.inner.lock().intake.bytes;
        let r = f.enqueue_batch(&urls, T0).unwrap();
        assert!(r.iter().all(|x| *x == EnqueueResult::Queued));
        if stored_parts(&f) > 0 {
            return before;
        }
        assert!(k < 200_000, "never folded");
    }
}

#[test]
fn a_fold_waits_while_it_would_make_segments_of_about_one_url() {
    let buffer = 20_000;
    // every URL on a host of its own: folding at the buffer would write a key per URL
    let thin = logged_before_the_first_fold(buffer, |i| i);
    assert!(
        (3 * buffer..4 * buffer).contains(&thin),
        "folded after {thin} logged bytes"
    );
    // two hosts: the fold comes at the buffer, as it always did
    let dense = logged_before_the_first_fold(buffer, |i| i % 2);
    assert!(dense < buffer, "folded after {dense} logged bytes");
}

/// A large enqueue is logged in records under the value target; the fold hands their
/// deletes to the reclaimer, and records whose delete a crash lost are replayed at open
/// into nothing new: every URL still comes back exactly once.
#[test]
fn intake_records_whose_delete_was_lost_queue_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = 7;
    let urls: Vec<String> = (0..600)
        .map(|k| format!("http://h{}.test/p/{k}/{}", k % hosts, "x".repeat(40)))
        .collect();
    let logged: Vec<(Vec<u8>, Vec<u8>)> = {
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.seed = Some(5);
        let f = Frontier::open(c).unwrap();
        f.enqueue_batch(&urls, T0).unwrap();
        f.store
            .scan_prefix(b"W")
            .map(|kv| {
                let kv = kv.unwrap();
                (kv.0.to_vec(), kv.1.to_vec())
            })
            .collect()
    };
    assert!(logged.len() > 3, "{} records", logged.len());
    assert!(logged
        .iter()
        .all(|(_, v)| v.len() <= crate::store::packed::VALUE_TARGET_BYTES));
    {
        // reopened with a fold after every batch: the next enqueue folds the log
        let f = open(dir.path());
        f.enqueue_batch(&["http://h0.test/last"], T0).unwrap();
        assert!(segment_keys(&f).len() >= hosts);
        let store = f.store.clone();
        drop(f);
        assert_eq!(store.scan_prefix(b"W").count(), 0, "the log was deleted");
        // a crash lost those deletes
        let mut batch = crate::store::Batch::new();
        for (k, v) in &logged {
            batch.put(k.clone(), v.clone());
        }
        store.apply(batch).unwrap();
        store.flush().unwrap();
    }
    let mut got = crawl_all(&open(dir.path()), hosts);
    let mut want = urls.clone();
    want.push("http://h0.test/last".into());
    got.sort();
    want.sort();
    assert_eq!(got.len(), want.len(), "every URL once");
    assert_eq!(got, want);
}

/// After a bulk submit spread too thin to fold, a crawl that queues nothing new for a
/// minute folds the log: the last entries of every host and their hashes leave memory,
/// the crawl goes on from the segments in the same order, a URL submitted again is still
/// a duplicate, and a reopen queues nothing twice.
#[test]
fn a_log_quiet_for_a_minute_is_folded_while_the_crawl_drains_it() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = 3000;
    // 6 URLs a host, 18 000 in all: about 2 MB of log, under the buffer
    let urls: Vec<String> = (0..6 * hosts)
        .map(|k| format!("http://h{}.test/p/{k}/{}", k % hosts, "x".repeat(60)))
        .collect();
    let open_big = || {
        let mut c = FrontierConfig::new(dir.path()).without_gaps();
        c.seed = Some(5);
        c.intake_buffer_bytes = 64 << 20;
        Frontier::open(c).unwrap()
    };
    let f = open_big();
    for chunk in urls.chunks(1000) {
        f.enqueue_batch(chunk, T0).unwrap();
    }
    let held = |f: &Frontier| -> (usize, usize) {
        let inner = f.inner.lock();
        let entries = inner.sched.hosts().map(|(_, h)| h.pending.len()).sum();
        (entries, inner.seen.recent.len() + inner.seen.folding.len())
    };
    assert_eq!(held(&f), (urls.len(), urls.len()), "nothing folded yet");
    assert!(f.inner.lock().intake.bytes >= crate::seen::QUIET_FOLD_MIN_BYTES);
    robots_known(&f, hosts);
    let mut got = Vec::new();
    // a second after the submit: still held
    crawl_round(&f, T0 + 1_000, 2000, &mut got);
    assert_eq!(stored_parts(&f), 0);
    assert!(held(&f).0 > 0);
    // a minute after it: folded by the completion
    crawl_round(&f, T0 + crate::seen::QUIET_FOLD_AFTER_MS, 2000, &mut got);
    assert_eq!(held(&f), (0, 0), "entries and hashes left memory");
    // (600 bytes a host: in packs, dozens of hosts a key)
    assert!(stored_parts(&f) >= (hosts - 2000) / 100);
    for t in 1..100 {
        crawl_round(
            &f,
            T0 + crate::seen::QUIET_FOLD_AFTER_MS + t,
            2000,
            &mut got,
        );
    }
    let mut want = urls.clone();
    let mut sorted = got.clone();
    sorted.sort();
    want.sort();
    assert_eq!(sorted, want, "every URL once");
    // each host's in the order given
    let mut last: HashMap<&str, usize> = HashMap::new();
    for u in &got {
        let (host, rest) = u.rsplit_once("/p/").unwrap();
        let k: usize = rest.split('/').next().unwrap().parse().unwrap();
        if let Some(prev) = last.insert(host, k) {
            assert!(prev < k, "{host}: {k} after {prev}");
        }
    }
    let again = f.enqueue_batch(&urls[..500], T0 + 100_000).unwrap();
    assert!(again.iter().all(|r| *r == EnqueueResult::Duplicate));
    drop(f);
    let f = open_big();
    let again = f.enqueue_batch(&urls[500..1000], T0 + 200_000).unwrap();
    assert!(again.iter().all(|r| *r == EnqueueResult::Duplicate));
    assert!(f.next_batch(T0 + 200_000, 100).unwrap().is_empty());
}

/// A fold goes a slice at a time (here a host's segment or a bucket a call): the call that
/// starts it writes one host's segments only, and between slices a URL submitted again is
/// a duplicate and the crawl hands out every URL once, each host's in order, from
/// segments or memory; once the last slice is done the log is deleted. A stop in the middle
/// of a fold (the log whole, some hosts folded) queues nothing twice and loses nothing.
#[test]
fn a_fold_in_slices_answers_between_them_and_a_stop_midway_loses_and_doubles_nothing() {
    let hosts = 200;
    let urls: Vec<String> = (0..10 * hosts)
        .map(|k| format!("http://h{}.test/p/{k}/{}", k % hosts, "x".repeat(40)))
        .collect();
    let open_sliced = |dir: &std::path::Path| {
        let mut c = FrontierConfig::new(dir).without_gaps();
        c.seed = Some(5);
        // the submit below (about 200 KB of log) starts a fold; each call then writes
        // a host's segment, or merges 16 hashes into the store's one bucket (split as it
        // grows)
        c.intake_buffer_bytes = 100 << 10;
        c.fold_slice_bytes = 256;
        c.max_in_flight_per_host = 64;
        Frontier::open(c).unwrap()
    };
    let in_order = |got: &[String]| {
        let mut last: HashMap<&str, usize> = HashMap::new();
        for u in got {
            let (host, rest) = u.rsplit_once("/p/").unwrap();
            let k: usize = rest.split('/').next().unwrap().parse().unwrap();
            if let Some(prev) = last.insert(host, k) {
                assert!(prev < k, "{host}: {k} after {prev}");
            }
        }
    };
    let mut want = urls.clone();
    want.sort();

    // whole run, slice by slice
    let dir = tempfile::tempdir().unwrap();
    let f = open_sliced(dir.path());
    f.enqueue_batch(&urls, T0).unwrap();
    assert!(f.folding(), "the submit started a fold");
    assert_eq!(stored_parts(&f), 1, "the first slice folded one host");
    let again = f.enqueue_batch(&urls[..300], T0 + 1).unwrap();
    assert!(again.iter().all(|r| *r == EnqueueResult::Duplicate));
    robots_known(&f, hosts);
    let mut got = Vec::new();
    let mut rounds_while_folding = 0;
    for t in 0..2000 {
        if f.folding() {
            rounds_while_folding += 1;
            // submitted again between slices (hosts or hashes being folded): duplicates
            let k = (t as usize * 37) % urls.len();
            let again = f.enqueue_batch(&urls[k..(k + 3).min(urls.len())], T0 + 10 + t);
            assert!(again
                .unwrap()
                .iter()
                .all(|r| *r == EnqueueResult::Duplicate));
        }
        if !crawl_round(&f, T0 + 10 + t, 5, &mut got) {
            break;
        }
    }
    assert!(
        rounds_while_folding > 100,
        "the fold went on over {rounds_while_folding} calls"
    );
    assert!(!f.folding(), "the fold finished");
    in_order(&got);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, want, "every URL once");
    let store = f.store.clone();
    drop(f);
    assert_eq!(store.scan_prefix(b"W").count(), 0, "the log was deleted");

    // stopped midway: a third of the hosts folded, some pages crawled
    let dir = tempfile::tempdir().unwrap();
    let f = open_sliced(dir.path());
    f.enqueue_batch(&urls, T0).unwrap();
    robots_known(&f, hosts);
    let mut got = Vec::new();
    while stored_parts(&f) < hosts / 3 {
        assert!(crawl_round(&f, T0 + 10, 5, &mut got));
    }
    assert!(f.folding());
    drop(f);
    let f = open_sliced(dir.path());
    let again = f.enqueue_batch(&urls[300..600], T0 + 20).unwrap();
    assert!(again.iter().all(|r| *r == EnqueueResult::Duplicate));
    for t in 0..2000 {
        if !crawl_round(&f, T0 + 30 + t, 50, &mut got) {
            break;
        }
    }
    in_order(&got);
    got.sort();
    assert_eq!(got, want, "every URL once across the stop");
}
