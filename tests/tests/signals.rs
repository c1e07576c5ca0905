//! Signals as an operator sends them: SIGHUP after logrotate moved the crawl log (the
//! daemon keeps running and continues in a new file), and SIGTERM to an idle daemon (it
//! exits promptly, also with admin API connections open).

use std::time::{Duration, Instant};

use frontierd_e2e::{crawl_log, logged, wait_until, Daemon, Env, Reply, Site};

#[test]
fn sighup_reopens_the_crawl_log_after_rotation() {
    let site = Site::start(|req| {
        if req.path == "/robots.txt" {
            Reply::not_found()
        } else {
            Reply::html("page")
        }
    });
    let env = Env::new(&[]);
    let mut daemon = env.start();
    let first = format!("{}/first", site.base("www.site.test"));
    let second = format!("{}/second", site.base("www.site.test"));

    daemon.submit(std::slice::from_ref(&first));
    wait_until(
        "the first URL in the crawl log",
        Duration::from_secs(30),
        || logged(&env.crawl_log(), &first, "fetched"),
    );

    // logrotate: move the file, then SIGHUP
    let rotated = env.crawl_log_path().with_extension("jsonl.1");
    std::fs::rename(env.crawl_log_path(), &rotated).unwrap();
    daemon.signal(libc::SIGHUP);
    wait_until(
        "the reopen in the daemon log",
        Duration::from_secs(30),
        || env.daemon_log().contains("SIGHUP: crawl log reopened"),
    );
    assert!(
        daemon.running(),
        "SIGHUP ended the daemon\n{}",
        env.daemon_log()
    );
    assert!(env.crawl_log_path().exists(), "no new crawl log file");

    daemon.submit(std::slice::from_ref(&second));
    wait_until(
        "the second URL in the new crawl log",
        Duration::from_secs(30),
        || logged(&env.crawl_log(), &second, "fetched"),
    );
    let old = crawl_log(&rotated);
    assert!(logged(&old, &first, "fetched"), "{old:?}");
    assert!(
        !logged(&old, &second, "fetched"),
        "written to the moved file"
    );
    assert!(!logged(&env.crawl_log(), &first, "fetched"));
    let m = daemon.metrics();
    assert!(
        m.contains("frontierd_crawl_log_reopens_total 1"),
        "reopen not counted:\n{m}"
    );

    // a second rotation works the same way
    std::fs::rename(
        env.crawl_log_path(),
        env.crawl_log_path().with_extension("jsonl.2"),
    )
    .unwrap();
    daemon.signal(libc::SIGHUP);
    wait_until("the second reopen", Duration::from_secs(30), || {
        env.daemon_log_count("SIGHUP: crawl log reopened") == 2
    });
    assert!(daemon.running());
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(30)).expect("no exit");
    assert!(status.success(), "{status:?}\n{}", env.daemon_log());
}

/// A daemon started on the default test config, its first crawl drained.
fn settled_daemon(env: &Env) -> Daemon {
    let daemon = env.start();
    wait_until("the daemon to settle", Duration::from_secs(30), || {
        env.daemon_log().contains("crawl drained")
    });
    daemon
}

/// SIGTERM, a clean exit, and "store closed" logged before "frontierd stopped" (`unclosed`
/// says what a missing "store closed" line means); the daemon's log and the position of
/// "frontierd stopped" in it.
fn stop_closing_the_store(env: &Env, mut daemon: Daemon, unclosed: &str) -> (String, usize) {
    let term = Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(30)).expect("no exit");
    eprintln!("daemon exited {:?} after SIGTERM", term.elapsed());
    assert!(status.success(), "{status:?}\n{}", env.daemon_log());
    let log = env.daemon_log();
    let closed = log
        .find("store closed")
        .unwrap_or_else(|| panic!("{unclosed}:\n{log}"));
    let stopped = log
        .find("frontierd stopped")
        .expect("no \"frontierd stopped\" line");
    assert!(closed < stopped, "store closed after \"stopped\":\n{log}");
    (log, stopped)
}

/// The store is closed (sled flushes and fsyncs its file) inside the stop sequence, before
/// "frontierd stopped", not by the runtime's teardown after it, which held the exit for up
/// to its 1 s shutdown timeout.
#[test]
fn idle_daemon_closes_its_store_before_saying_stopped() {
    let env = Env::new(&[]);
    let daemon = settled_daemon(&env);
    let (log, stopped) = stop_closing_the_store(&env, daemon, "no \"store closed\" line");
    assert_eq!(
        log[stopped..].lines().count(),
        1,
        "\"frontierd stopped\" is the last line:\n{log}"
    );
}

/// The admin API runs on a thread of its own; the stop must still end its connections and
/// let go of the store: a kept-alive connection that has answered a request and one that
/// is in the middle of a POST body do not hold the exit or the store open.
#[test]
fn open_admin_connections_do_not_hold_the_stop() {
    use std::io::{Read, Write};
    let env = Env::new(&[]);
    let daemon = settled_daemon(&env);
    // a kept-alive connection, after one answered request
    let mut kept = std::net::TcpStream::connect(&daemon.admin).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(kept, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = [0u8; 512];
    let n = kept.read(&mut answer).unwrap();
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer[..n])
    );
    // a POST that announced 1 000 bytes and sent 10
    let mut half = std::net::TcpStream::connect(&daemon.admin).unwrap();
    write!(
        half,
        "POST /v1/urls HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nhttp://a."
    )
    .unwrap();
    half.flush().unwrap();
    stop_closing_the_store(&env, daemon, "the admin connections kept the store open");
    drop((kept, half));
}
