//! Disk space, for real: the data directory (store, WARC, crawl log) on a 64 MiB tmpfs that
//! a filler file brings below `[disk] pause_below_bytes` during a crawl with intake going
//! on. Fetching pauses and new URLs are refused (507 from the API, spool files held) while
//! /healthz, /metrics and /v1/stats keep answering; once the filler is gone everything
//! resumes by itself and every URL acknowledged is fetched. Then the same daemon is killed
//! with SIGKILL while low and started again on the low disk: it starts, paused, and says
//! why.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use frontierd_e2e::fs_faults::{Ext4Loop, Tmpfs};
use frontierd_e2e::{http, metric, wait_until, Daemon, Env, Reply, Req, Site};

const MIB: u64 = 1 << 20;

fn page(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        return Reply::not_found();
    }
    Reply::html("<html><body>a page of the disk test</body></html>")
        .delayed(Duration::from_millis(20))
}

fn env() -> Env {
    Env::new(&[
        ("fetch", "workers", "2"),
        // one page at a time per host, 100 ms apart: the crawl is still going when the
        // disk fills
        ("politeness", "min_delay", "\"100ms\""),
        ("politeness", "max_delay", "\"100ms\""),
        ("disk", "pause_below_bytes", &(16 * MIB).to_string()),
        ("disk", "pause_below_percent", "0.0"),
        ("disk", "resume_above_bytes", &(24 * MIB).to_string()),
        ("disk", "resume_above_percent", "0.0"),
        ("disk", "check_every", "\"100ms\""),
        ("store", "cache_bytes", &(4 * MIB).to_string()),
    ])
}

/// GET `path`, which must answer within a second; its status and body.
fn answered(d: &Daemon, path: &str) -> (u16, String) {
    let t = Instant::now();
    let r = d.get(path);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "GET {path} took {:?}",
        t.elapsed()
    );
    r
}

/// Poll /healthz every 100 ms (each answer within a second) until `want`.
fn health_becomes(d: &Daemon, want: u16, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = answered(d, "/healthz");
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz still {status} {body:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn fetched_paths(site: &Site) -> BTreeSet<String> {
    site.hits()
        .into_iter()
        .filter(|h| h.path != "/robots.txt")
        .map(|h| h.path)
        .collect()
}

#[test]
fn a_low_disk_pauses_fetching_and_refuses_intake_until_space_is_freed_even_across_a_kill() {
    let env = env();
    let Some(fs) = Tmpfs::mount(&env.data, 64) else {
        return;
    };
    for sub in ["incoming", "tmp"] {
        std::fs::create_dir_all(env.data.join("spool").join(sub)).unwrap();
    }
    let site = Site::start(page);
    let base = site.base("disk.site.test");
    let first: Vec<String> = (0..40).map(|i| format!("{base}/a{i}")).collect();
    let d = env.start();
    assert_eq!(d.submit(&first)["accepted"], 40);
    wait_until("some pages fetched", Duration::from_secs(20), || {
        fetched_paths(&site).len() >= 5
    });

    // the disk fills (another writer), below the pause threshold
    let filler = fs.fill_leaving(8 * MIB);
    let body = health_becomes(&d, 503, Duration::from_secs(5));
    assert!(
        body.contains("disk space low") && body.contains("paused"),
        "{body}"
    );
    let (status, text) = http(
        &d.admin,
        "POST",
        "/v1/urls",
        format!("{base}/refused\n").as_bytes(),
    );
    assert_eq!(status, 507, "{text}");
    assert!(text.contains("nothing was queued"), "{text}");
    let (_, metrics) = answered(&d, "/metrics");
    assert_eq!(metric(&metrics, "frontierd_disk_low"), Some(1.0));
    assert_eq!(
        metric(
            &metrics,
            "frontierd_disk_intake_refused_total{door=\"api\"}"
        ),
        Some(1.0)
    );
    // a list dropped in the spool is held, not taken
    let held: Vec<String> = (0..5).map(|i| format!("{base}/s{i}")).collect();
    env.spool("held.txt", held.join("\n").as_bytes());
    // fetching pauses: at most the fetches under way when it paused (2 workers) end
    let paused_at = fetched_paths(&site).len();
    for _ in 0..10 {
        let (status, _) = answered(&d, "/healthz");
        assert_eq!(status, 503);
        assert_eq!(answered(&d, "/v1/stats").0, 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        fetched_paths(&site).len() <= paused_at + 2,
        "fetching went on while the disk was low: {} then {}",
        paused_at,
        fetched_paths(&site).len()
    );
    assert!(
        env.data.join("spool/incoming/held.txt").exists(),
        "spool file held"
    );
    let log = env.daemon_log();
    assert_eq!(
        log.matches("disk space low on").count(),
        1,
        "logged once per episode: {log}"
    );

    // killed while low, started again on the low disk: it starts paused and says why
    d.kill9();
    let d = env.start();
    let body = health_becomes(&d, 503, Duration::from_secs(10));
    assert!(body.contains("disk space low"), "{body}");
    assert_eq!(answered(&d, "/v1/stats").0, 200);

    // space is freed: everything resumes by itself
    std::fs::remove_file(&filler).unwrap();
    health_becomes(&d, 200, Duration::from_secs(5));
    let later: Vec<String> = (0..5).map(|i| format!("{base}/b{i}")).collect();
    assert_eq!(d.submit(&later)["accepted"], 5);
    let want: BTreeSet<String> = first
        .iter()
        .chain(&held)
        .chain(&later)
        .map(|u| u.trim_start_matches(&base).to_string())
        .collect();
    wait_until(
        "every acknowledged URL fetched",
        Duration::from_secs(60),
        || want.is_subset(&fetched_paths(&site)),
    );
    assert!(
        !fetched_paths(&site).contains("/refused"),
        "the refused URL was not stored"
    );
    let (_, metrics) = answered(&d, "/metrics");
    assert_eq!(metric(&metrics, "frontierd_disk_low"), Some(0.0));
    assert!(env.daemon_log().contains("disk space back above"));
    drop(d);
    drop(fs);
}

/// The WARC directory on a filesystem of its own that fills: the same pause and refusal
/// (naming that filesystem), and the crawl resumes by itself once it has room.
#[test]
fn a_full_warc_filesystem_of_its_own_pauses_and_resumes_the_crawl() {
    let warc_dir = tempfile::tempdir().unwrap();
    let warc_at = warc_dir.path().join("warc");
    let Some(fs) = Tmpfs::mount(&warc_at, 32) else {
        return;
    };
    let mut overrides = vec![
        ("fetch", "workers", "2"),
        ("politeness", "min_delay", "\"100ms\""),
        ("politeness", "max_delay", "\"100ms\""),
        ("disk", "pause_below_percent", "0.0"),
        ("disk", "resume_above_percent", "0.0"),
        ("disk", "check_every", "\"100ms\""),
    ];
    let (pause, resume) = ((8 * MIB).to_string(), (12 * MIB).to_string());
    let dir = format!("{:?}", warc_at.display().to_string());
    overrides.push(("disk", "pause_below_bytes", &pause));
    overrides.push(("disk", "resume_above_bytes", &resume));
    overrides.push(("warc", "dir", &dir));
    let env = Env::new(&overrides);
    let site = Site::start(page);
    let base = site.base("warcfs.site.test");
    let urls: Vec<String> = (0..30).map(|i| format!("{base}/w{i}")).collect();
    let d = env.start();
    d.submit(&urls);
    wait_until("some pages fetched", Duration::from_secs(20), || {
        fetched_paths(&site).len() >= 3
    });
    let filler = fs.fill_leaving(4 * MIB);
    let body = health_becomes(&d, 503, Duration::from_secs(5));
    assert!(body.contains(&warc_at.display().to_string()), "{body}");
    let (status, _) = http(
        &d.admin,
        "POST",
        "/v1/urls",
        format!("{base}/x\n").as_bytes(),
    );
    assert_eq!(status, 507);
    std::fs::remove_file(&filler).unwrap();
    health_becomes(&d, 200, Duration::from_secs(5));
    let want: BTreeSet<String> = urls
        .iter()
        .map(|u| u.trim_start_matches(&base).to_string())
        .collect();
    wait_until("every URL fetched", Duration::from_secs(60), || {
        want.is_subset(&fetched_paths(&site))
    });
    drop(d);
    drop(fs);
}

/// With the watch off, the store itself fills the disk while URLs are being submitted: the
/// batch that hits the limit gets an error and nothing acknowledged is lost. The daemon
/// never hangs: /healthz and /v1/stats answer, /healthz says the store failed a write; once
/// space is freed the daemon stops by itself (status 2, to be started again, as systemd's
/// `Restart=on-failure` does). Started again on a disk full to the last byte, it waits for
/// its store with its address answering why, and once space is freed it has exactly the
/// URLs acknowledged.
#[test]
fn a_store_that_fills_the_disk_never_hangs_the_daemon_and_loses_nothing_acknowledged() {
    // one worker: the URLs' hosts (port 9, nothing listens) only cost robots.txt attempts
    let env = Env::new(&[
        ("fetch", "workers", "1"),
        ("disk", "pause_below_bytes", "0"),
        ("disk", "pause_below_percent", "0.0"),
        ("disk", "resume_above_bytes", "0"),
        ("disk", "resume_above_percent", "0.0"),
        ("disk", "check_every", "\"100ms\""),
    ]);
    let Some(fs) = Tmpfs::mount(&env.data, 24) else {
        return;
    };
    for sub in ["incoming", "tmp"] {
        std::fs::create_dir_all(env.data.join("spool").join(sub)).unwrap();
    }
    // 12 MiB freed later: room for the store to open again (its recovery writes) and go on
    let filler = fs.fill_leaving(fs.available() - 12 * MIB);
    let mut d = env.start();
    let mut acknowledged = 0u64;
    let mut refusal = None;
    for batch in 0..60 {
        let list: String = (0..5000)
            .map(|i| format!("http://h{}.site.test:9/p{batch}/{i}\n", i % 500))
            .collect();
        let (status, text) = http(&d.admin, "POST", "/v1/urls", list.as_bytes());
        if status != 200 {
            refusal = Some((status, text));
            break;
        }
        acknowledged += 5000;
    }
    let (status, text) = refusal.expect("the disk filled");
    assert!(
        matches!(status, 500 | 507) && text.contains("No space left on device"),
        "{status} {text}"
    );
    let body = health_becomes(&d, 503, Duration::from_secs(5));
    assert!(body.contains("the store failed a write"), "{body}");
    let (status, stats) = answered(&d, "/v1/stats");
    assert_eq!(status, 200, "{stats}");
    let (status, metrics) = answered(&d, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(metric(&metrics, "frontierd_store_write_failed"), Some(1.0));
    // still low: it stays up, answering, and does not stop
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        d.running(),
        "stopped while its directory could not be written"
    );

    std::fs::remove_file(&filler).unwrap();
    let exit = d
        .wait_exit(Duration::from_secs(10))
        .expect("stops once it can write");
    assert_eq!(exit.code(), Some(2), "{}", env.daemon_log());
    assert!(env
        .daemon_log()
        .contains("start frontierd again to open it"));

    // started again on a disk filled to the last block by another writer (admin.addr's
    // block kept: the daemon rewrites it in place before opening the store, which writes
    // at open and cannot): the daemon waits, its address answering why
    std::fs::write(env.data.join("admin.addr"), "127.0.0.1:1\n").unwrap();
    let full = fs.fill_leaving(0);
    let mut d = env.start();
    let body = health_becomes(&d, 503, Duration::from_secs(5));
    // sled opens a store on a full disk or not, depending on what its recovery writes:
    // either way the daemon is up and says why
    let waiting = body.contains("the store cannot be opened");
    assert!(
        waiting || body.contains("the store failed a write"),
        "{body}"
    );
    std::fs::remove_file(&full).unwrap();
    let d = if waiting {
        health_becomes(&d, 200, Duration::from_secs(10));
        assert!(env
            .daemon_log()
            .contains("the store opened after waiting for its disk"));
        d
    } else {
        let exit = d
            .wait_exit(Duration::from_secs(10))
            .expect("stops once it can write");
        assert_eq!(exit.code(), Some(2), "{}", env.daemon_log());
        let d = env.start();
        health_becomes(&d, 200, Duration::from_secs(10));
        d
    };
    let (_, stats) = answered(&d, "/v1/stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(
        stats["queued"].as_u64(),
        Some(acknowledged),
        "every acknowledged URL, and only those"
    );
    drop(d);
    drop(fs);
}

/// The WARC directory removed while the daemon runs (an operator moving files away with
/// `rm -r`): no hang, an ERROR line naming the lost file, archiving goes on in a new file
/// in the directory made again, and the crawl completes.
#[test]
fn a_removed_warc_directory_is_made_again_and_archiving_goes_on() {
    let env = env();
    let site = Site::start(page);
    let base = site.base("gone.site.test");
    let first: Vec<String> = (0..5).map(|i| format!("{base}/a{i}")).collect();
    let d = env.start();
    d.submit(&first);
    wait_until("the first pages fetched", Duration::from_secs(20), || {
        fetched_paths(&site).len() >= 5
    });
    std::fs::remove_dir_all(env.warc_dir()).unwrap();
    wait_until("the lost file reported", Duration::from_secs(10), || {
        env.daemon_log()
            .contains("the open WARC file was removed while running")
    });
    assert_eq!(answered(&d, "/healthz").0, 200);
    let later: Vec<String> = (0..5).map(|i| format!("{base}/b{i}")).collect();
    d.submit(&later);
    wait_until("the later pages archived", Duration::from_secs(30), || {
        env.crawl_log()
            .iter()
            .filter(|l| {
                l["url"].as_str().is_some_and(|u| u.contains("/b"))
                    && l["warc_file"].as_str().is_some_and(|f| !f.is_empty())
            })
            .count()
            == 5
    });
    assert!(env.warc_dir().is_dir(), "the directory is made again");
    let (_, metrics) = answered(&d, "/metrics");
    assert_eq!(
        metric(&metrics, "frontierd_warc_files_lost_total"),
        Some(1.0)
    );
}

/// The data directory's filesystem turned read-only during a crawl, as the kernel does on an
/// I/O error: the store's next write fails; the daemon pauses, answers, says why, and stops
/// cleanly on SIGTERM. After the operator's repair (fsck, mount) the next start fetches
/// every URL acknowledged.
#[test]
fn a_data_directory_turned_read_only_pauses_answers_and_loses_no_url() {
    let env = env();
    let Some(fs) = Ext4Loop::mount(&env.data, 64) else {
        return;
    };
    for sub in ["incoming", "tmp"] {
        std::fs::create_dir_all(env.data.join("spool").join(sub)).unwrap();
    }
    let site = Site::start(page);
    let base = site.base("ro.site.test");
    let urls: Vec<String> = (0..30).map(|i| format!("{base}/r{i}")).collect();
    let mut d = env.start();
    assert_eq!(d.submit(&urls)["accepted"], 30);
    wait_until("some pages fetched", Duration::from_secs(20), || {
        fetched_paths(&site).len() >= 3
    });
    if !fs.fail() {
        return;
    }
    let body = health_becomes(&d, 503, Duration::from_secs(10));
    assert!(
        body.contains("the store failed a write") && body.contains("Read-only file system"),
        "{body}"
    );
    assert_eq!(answered(&d, "/v1/stats").0, 200);
    let (status, text) = http(
        &d.admin,
        "POST",
        "/v1/urls",
        format!("{base}/late\n").as_bytes(),
    );
    assert_eq!(status, 507, "{text}");
    assert!(d.running());
    d.signal(libc::SIGTERM);
    let exit = d
        .wait_exit(Duration::from_secs(20))
        .expect("stops on SIGTERM");
    assert!(
        !exit.success(),
        "the store had failed: {}",
        env.daemon_log()
    );
    fs.repair();
    let d = env.start();
    let want: BTreeSet<String> = urls
        .iter()
        .map(|u| u.trim_start_matches(&base).to_string())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !want.is_subset(&fetched_paths(&site)) {
        assert!(
            Instant::now() < deadline,
            "not fetched: {:?}\n{}",
            want.difference(&fetched_paths(&site)).collect::<Vec<_>>(),
            env.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(d);
    drop(fs);
}
