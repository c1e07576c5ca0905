//! Scenario 3: SIGKILL at random moments during ingest (API and spool) and crawl, 5 times,
//! restarting each time. In the end every acknowledged URL has a terminal crawl-log line
//! (a page's line reaches the file before its outcome is stored, so a kill between the two
//! costs a second fetch, never the line), and a URL was requested twice only if a kill fell
//! between the two requests (it could have been in flight).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frontierd_e2e::{
    crawl_log, require_warcio, try_http, warc_files, warc_records, Env, Reply, Rng, Site,
};

const HOSTS: u64 = 10;
const KILLS: usize = 5;
/// The server stamps a request when its task has read it: a request sent just before a
/// kill may be stamped just after it.
const RECORD_LAG: Duration = Duration::from_millis(250);
const TERMINAL: [&str; 5] = [
    "fetched",
    "redirected",
    "blocked-by-robots",
    "given-up",
    "rejected",
];

fn url(site: &Site, n: u64) -> String {
    let host = format!("c{}.site.test", n % HOSTS);
    if n.is_multiple_of(17) {
        format!("{}/blocked/{n}", site.base(&host))
    } else {
        format!("{}/p{n}", site.base(&host))
    }
}

#[test]
fn sigkill_five_times_loses_nothing() {
    require_warcio();
    let mut rng = Rng::new();
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            Reply::text("User-agent: *\nDisallow: /blocked\n")
        } else {
            Reply::html(format!("{} {}", req.host, req.path)).delayed(Duration::from_millis(20))
        }
    });
    let env = Env::new(&[
        ("fetch", "workers", "8"),
        ("politeness", "min_delay", "\"50ms\""),
        ("politeness", "max_delay", "\"1s\""),
        ("intake", "batch_size", "25"),
        ("intake", "poll_interval", "\"50ms\""),
    ]);
    let acked: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let mut spooled: Vec<String> = Vec::new();
    let mut next = 1u64;
    let mut kills: Vec<Instant> = Vec::new();
    let t0 = Instant::now();

    let mut starts: Vec<Instant> = Vec::new();
    let mut mid_spool = 0;
    for round in 0..=KILLS {
        starts.push(Instant::now());
        let daemon = env.start();
        if round == KILLS {
            eprintln!("last start after {:?}", t0.elapsed());
            // the last run: let it finish
            let all: Vec<String> = acked
                .lock()
                .unwrap()
                .iter()
                .chain(&spooled)
                .cloned()
                .collect();
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let log = crawl_log(&env.crawl_log_path());
                let done: HashSet<&str> = log
                    .iter()
                    .filter(|l| TERMINAL.contains(&l["outcome"].as_str().unwrap_or("")))
                    .filter_map(|l| l["url"].as_str())
                    .collect();
                let left: Vec<&String> =
                    all.iter().filter(|u| !done.contains(u.as_str())).collect();
                let incoming = std::fs::read_dir(env.data.join("spool/incoming"))
                    .map(|d| d.count())
                    .unwrap_or(0);
                let hits = site.hits();
                let requested: HashSet<String> = hits
                    .iter()
                    .map(|h| format!("http://{}:{}{}", h.host, site.port, h.path))
                    .collect();
                let (_, stats) = daemon.get("/v1/stats");
                let sv: serde_json::Value = serde_json::from_str(&stats).unwrap();
                let idle = sv["queued"] == 0 && sv["in_flight"] == 0;
                // every outcome is checked below, after a clean stop (the WARC files and
                // the crawl log)
                if idle && incoming == 0 && left.iter().all(|u| requested.contains(u.as_str())) {
                    break;
                }
                if Instant::now() > deadline {
                    let requested: Vec<&&String> = left
                        .iter()
                        .filter(|u| requested.contains(u.as_str()))
                        .collect();
                    panic!(
                        "after 120 s, {} of {} accepted URLs have no outcome ({} of them requested), {incoming} spool files left; e.g. {:?}\nstats: {stats}\n{}",
                        left.len(),
                        all.len(),
                        requested.len(),
                        &left[..left.len().min(5)],
                        env.daemon_log().lines().filter(|l| !l.contains("progress")).take(60).collect::<Vec<_>>().join("\n")
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let mut daemon = daemon;
            daemon.signal(libc::SIGTERM);
            let status = daemon
                .wait_exit(Duration::from_secs(30))
                .expect("exit after SIGTERM");
            assert!(status.success(), "{status}\n{}", env.daemon_log());
            break;
        }
        // a spool file each round, ingested in batches of 25: mostly disallowed URLs (cheap
        // to finish: dropped, not fetched), so that kills also land mid-file
        let urls: Vec<String> = (next..next + 600)
            .map(|n| {
                if n % 10 == 0 {
                    url(&site, n)
                } else {
                    format!(
                        "{}/blocked/s{n}",
                        site.base(&format!("c{}.site.test", n % HOSTS))
                    )
                }
            })
            .collect();
        next += 600;
        env.spool(
            &format!("seeds-{round}.txt"),
            (urls.join("\n") + "\n").as_bytes(),
        );
        spooled.extend(urls);
        // the API, until the kill
        let stop = Arc::new(AtomicBool::new(false));
        let poster = {
            let stop = stop.clone();
            let acked = acked.clone();
            let admin = daemon.admin.clone();
            let batches: Vec<Vec<String>> = (0..200)
                .map(|b| (0..10).map(|i| url(&site, next + b * 10 + i)).collect())
                .collect();
            next += 2000;
            std::thread::spawn(move || {
                for batch in batches {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let body = serde_json::to_vec(&batch).unwrap();
                    match try_http(&admin, "POST", "/v1/urls", &body) {
                        Ok((200, text)) => {
                            let v: serde_json::Value = match serde_json::from_str(&text) {
                                Ok(v) => v,
                                Err(_) => return, // cut short by the kill
                            };
                            assert_eq!(v["rejected"], 0, "{text}");
                            acked.lock().unwrap().extend(batch);
                        }
                        _ => return,
                    }
                    std::thread::sleep(Duration::from_millis(80));
                }
            })
        };
        std::thread::sleep(rng.ms(300, 1500));
        kills.push(Instant::now());
        daemon.kill9();
        if env
            .data
            .join(format!("spool/incoming/seeds-{round}.txt"))
            .exists()
        {
            mid_spool += 1;
        }
        stop.store(true, Ordering::Relaxed);
        poster.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    eprintln!(
        "{} kills ({mid_spool} while a spool file was being read), {} URLs acknowledged by the API, {} spooled, done after {:?}",
        kills.len(),
        acked.len(),
        spooled.len(),
        t0.elapsed()
    );
    assert!(kills.len() >= KILLS);
    assert!(
        acked.len() >= 50,
        "too few URLs acknowledged to mean anything"
    );

    // what the WARC files hold, and the crawl log
    let (closed, open) = warc_files(&env.warc_dir());
    assert!(open.is_empty(), "{open:?}");
    let mut in_warc = HashSet::new();
    for f in &closed {
        for (kind, uri) in warc_records(f) {
            if kind == "response" {
                in_warc.insert(uri);
            }
        }
    }
    let log = crawl_log(&env.crawl_log_path());
    let terminal: HashSet<&str> = log
        .iter()
        .filter(|l| TERMINAL.contains(&l["outcome"].as_str().unwrap_or("")))
        .filter_map(|l| l["url"].as_str())
        .collect();
    let missing: Vec<&String> = acked
        .iter()
        .chain(&spooled)
        .filter(|u| !in_warc.contains(u.as_str()) && !terminal.contains(u.as_str()))
        .collect();
    let unlogged = acked
        .iter()
        .chain(&spooled)
        .filter(|u| !terminal.contains(u.as_str()))
        .count();
    assert!(
        missing.is_empty(),
        "{} accepted URLs lost: {missing:?}",
        missing.len()
    );
    assert_eq!(
        unlogged, 0,
        "URLs completed without a crawl-log line (their outcome stored before their line was in the file)"
    );
    for u in acked.iter().chain(&spooled) {
        if u.contains("/blocked/") {
            assert!(
                terminal.contains(u.as_str()),
                "{u}: no blocked-by-robots line"
            );
        }
    }

    // twice only across a kill
    let mut by_url: BTreeMap<(String, String), Vec<Instant>> = BTreeMap::new();
    for h in site.hits() {
        if h.path != "/robots.txt" {
            by_url.entry((h.host, h.path)).or_default().push(h.start);
        }
    }
    let mut refetched = 0;
    for ((host, path), times) in &by_url {
        assert!(
            !path.starts_with("/blocked"),
            "{host}{path}: disallowed URL requested"
        );
        for w in times.windows(2) {
            refetched += 1;
            let rel = |t: &Instant| t.saturating_duration_since(t0);
            let u = format!("http://{host}:{}{path}", site.port);
            assert!(
                kills.iter().any(|k| *k + RECORD_LAG >= w[0] && *k <= w[1]),
                "{u} requested twice with no kill in between: at {:?} and {:?}; kills at {:?}; crawl log: {:?}; starts at {:?}",
                rel(&w[0]),
                rel(&w[1]),
                kills.iter().map(rel).collect::<Vec<_>>(),
                log.iter().filter(|l| l["url"] == u.as_str()).collect::<Vec<_>>(),
                starts.iter().map(rel).collect::<Vec<_>>(),
            );
        }
    }
    eprintln!("{refetched} refetches, each across a kill");
}
