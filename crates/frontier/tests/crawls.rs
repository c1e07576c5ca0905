//! Crawls (url-frontier's crawlID) in one frontier: distinct URLs per crawl, politeness
//! per host across crawls, deletion of a crawl's queue or of a crawl, crawl limits; all
//! durable (`src/crawl.rs`).

use frontier::*;

const T0: u64 = 1_700_000_000_000;

fn cfg(dir: &std::path::Path, gap_ms: u64) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.min_delay_ms = gap_ms;
    c.max_delay_ms = gap_ms;
    c.max_in_flight_per_host = 10;
    c.seed = Some(7);
    c
}

fn open(dir: &std::path::Path, gap_ms: u64) -> Frontier {
    let f = Frontier::open(cfg(dir, gap_ms)).unwrap();
    f.set_robots(
        &[
            (
                "http://a.test",
                RobotsFetchOutcome::ClientError { status: 404 },
            ),
            (
                "http://b.test",
                RobotsFetchOutcome::ClientError { status: 404 },
            ),
        ],
        T0,
    )
    .unwrap();
    f
}

fn put(f: &Frontier, crawl: &str, urls: &[&str]) -> Vec<EnqueueResult> {
    let stored: Vec<String> = urls
        .iter()
        .map(|u| f.url_in_crawl(u, crawl).unwrap().1)
        .collect();
    f.note_crawls(&[crawl]).unwrap();
    f.enqueue_batch(&stored, T0).unwrap()
}

fn lease(f: &Frontier, now: u64, crawl: Option<&str>) -> Vec<PageLease> {
    lease_n(f, now, crawl, 100)
}

fn lease_n(f: &Frontier, now: u64, crawl: Option<&str>, max: usize) -> Vec<PageLease> {
    f.lease_in_crawl(now, max, 60_000, crawl, &mut |_: &str| true)
        .unwrap()
        .into_iter()
        .filter_map(|i| match i {
            WorkItem::Page(p) => Some(p),
            WorkItem::Robots(_) => None,
        })
        .collect()
}

fn crawl_of(url: &str) -> String {
    crawl::split_stored(url).crawl.into_owned()
}

fn queued(f: &Frontier, crawl: &str) -> u64 {
    f.crawl_queues(Some(crawl), None)
        .unwrap()
        .iter()
        .map(|q| q.queued)
        .sum()
}

#[test]
fn one_url_in_two_crawls_is_two_urls_sharing_the_hosts_politeness() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path(), 1_000);
    assert!(put(&f, "a", &["http://a.test/x"])
        .iter()
        .all(|r| *r == EnqueueResult::Queued));
    assert_eq!(
        put(&f, "b", &["http://a.test/x"]),
        vec![EnqueueResult::Queued],
        "the same URL in another crawl is a URL of its own"
    );
    assert_eq!(
        put(&f, "a", &["HTTP://A.test:80/x"]),
        vec![EnqueueResult::Duplicate]
    );
    assert_eq!(
        put(&f, "", &["http://a.test/x"]),
        vec![EnqueueResult::Queued]
    );
    assert_eq!(
        (queued(&f, "a"), queued(&f, "b"), queued(&f, "DEFAULT")),
        (1, 1, 1)
    );
    // one host queue: one URL per gap whatever the crawl
    let first = lease(&f, T0, None);
    assert_eq!(first.len(), 1);
    assert!(
        lease(&f, T0 + 999, None).is_empty(),
        "the gap holds across crawls"
    );
    let second = lease(&f, T0 + 1_000, None);
    assert_eq!(second.len(), 1);
    assert_ne!(crawl_of(&first[0].url), crawl_of(&second[0].url));
    // a caller of one crawl passes over a host whose next URL is another crawl's
    assert!(lease(&f, T0 + 2_000, Some("zzz")).is_empty());
    assert_eq!(
        lease(&f, T0 + 2_000, None).len(),
        1,
        "the host kept its turn"
    );
    drop(f);
    // durable: reopened, the three URLs are known, each in its crawl
    let f = open(dir.path(), 1_000);
    for c in ["a", "b", ""] {
        let (_, stored) = f.url_in_crawl("http://a.test/x", c).unwrap();
        assert!(f.is_seen(&stored).unwrap(), "{c}");
    }
    assert!(!f
        .is_seen(&f.url_in_crawl("http://a.test/x", "c").unwrap().1)
        .unwrap());
}

#[test]
fn the_crawl_filter_serves_only_that_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path(), 0);
    put(&f, "a", &["http://a.test/1", "http://b.test/1"]);
    put(&f, "", &["http://a.test/2"]);
    let got = lease(&f, T0, Some("a"));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|p| crawl_of(&p.url) == "a"));
    let got = lease(&f, T0, Some(""));
    assert_eq!(got.len(), 1);
    assert_eq!(crawl::split_stored(&got[0].url).url, "http://a.test/2");
}

#[test]
fn a_deleted_crawl_queue_is_never_served_and_a_url_put_again_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path(), 0);
    put(
        &f,
        "a",
        &["http://a.test/1", "http://a.test/2", "http://b.test/1"],
    );
    put(&f, "b", &["http://a.test/1"]);
    assert_eq!(f.delete_crawl_queue("a", "a.test").unwrap(), 2);
    assert_eq!(queued(&f, "a"), 1, "b.test's URL stays");
    drop(f);
    let f = open(dir.path(), 0);
    assert_eq!(queued(&f, "a"), 1, "the deletion is durable");
    let got: Vec<String> = lease(&f, T0, None).into_iter().map(|p| p.url).collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.contains(&"http://b.test/1#~crawl:a".to_string()));
    assert!(got.contains(&"http://a.test/1#~crawl:b".to_string()));
    // put again after the deletion: a new URL, served
    assert_eq!(
        put(&f, "a", &["http://a.test/1"]),
        vec![EnqueueResult::Queued]
    );
    assert_eq!(queued(&f, "a"), 1);
    let again = lease(&f, T0 + 1, Some("a"));
    assert_eq!(again.len(), 1);
    assert_eq!(crawl::split_stored(&again[0].url).url, "http://a.test/1");
}

#[test]
fn a_deleted_crawl_goes_whole_and_the_others_stay() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path(), 0);
    put(&f, "a", &["http://a.test/1", "http://b.test/1"]);
    put(&f, "", &["http://a.test/1"]);
    assert_eq!(f.crawl_names(), vec!["a".to_string()]);
    assert_eq!(f.delete_crawl("a").unwrap(), 2);
    assert!(f.crawl_names().is_empty());
    assert_eq!(queued(&f, "a"), 0);
    drop(f);
    let f = open(dir.path(), 0);
    let got = lease(&f, T0, None);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].url, "http://a.test/1",
        "only the default crawl's URL"
    );
    assert_eq!(
        f.delete_crawl("").unwrap(),
        0,
        "the leased URL is not counted"
    );
    assert_eq!(
        put(&f, "DEFAULT", &["http://a.test/1"]),
        vec![EnqueueResult::Queued]
    );
}

#[test]
fn a_crawl_limit_stops_its_queue_only_and_lasts() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path(), 0);
    put(
        &f,
        "a",
        &["http://a.test/1", "http://a.test/2", "http://a.test/3"],
    );
    put(&f, "b", &["http://a.test/1"]);
    f.set_crawl_limit("a", "a.test", 1).unwrap();
    let first = lease_n(&f, T0, Some("a"), 1);
    assert_eq!(first.len(), 1);
    f.note_crawl_completions(&[("a", "a.test")]).unwrap();
    f.complete(first[0].id, PageOutcome::Done { response_ms: 1 }, T0)
        .unwrap();
    assert!(f.crawl_limit_reached("a", "a.test"));
    // crawl a is held at a.test; crawl b's URL behind its URLs still goes
    let rest = lease(&f, T0 + 1, None);
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].url, "http://a.test/1#~crawl:b");
    f.complete(rest[0].id, PageOutcome::Done { response_ms: 1 }, T0 + 1)
        .unwrap();
    drop(f);
    let f = open(dir.path(), 0);
    assert!(f.crawl_limit_reached("a", "a.test"), "durable");
    assert!(lease(&f, T0 + 2, None).is_empty());
    let q = f.crawl_queues(Some("a"), Some("a.test")).unwrap();
    assert_eq!((q[0].queued, q[0].completed, q[0].limit), (2, 1, 1));
    // raised: served again
    f.set_crawl_limit("a", "a.test", 0).unwrap();
    assert_eq!(lease(&f, T0 + 3, None).len(), 2);
}
