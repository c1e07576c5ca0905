//! The open-files limit: started from a shell whose soft limit is the usual 1 024, the daemon
//! raises it to the hard limit before it opens a socket (every fetch and every kept
//! connection is a file, and the default fetch settings may hold more than 1 024), and says
//! so; when even the hard limit is below what its settings may open, it warns.
//!
//! A test binary of its own: it lowers its own soft limit, which the daemon inherits.

use frontierd_e2e::{wait_until, Env};
use std::time::Duration;

fn limits_of(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files line");
    let fields: Vec<u64> = line
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    (fields[0], fields[1])
}

#[test]
fn the_daemon_raises_its_open_files_limit_to_the_hard_one_and_warns_below_what_it_needs() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given, nothing else.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let hard = lim.rlim_max;
    if hard <= 1024 {
        eprintln!("hard open-files limit {hard}: nothing to raise");
        return;
    }
    lim.rlim_cur = 1024;
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);

    // 4 workers: 16 384 kept connections (a cap raised for a crawl of slow hosts) want
    // 16 384 + 2 x 4 + 512 files; the most the config takes, 1 048 576, more than any hard
    // limit here
    let wanted = |pooled: u64| pooled + 2 * 4 + 512;
    for pooled in [16_384, 1 << 20] {
        let warned = hard < wanted(pooled);
        let pooled = pooled.to_string();
        let env = Env::new(&[
            ("fetch", "workers", "4"),
            ("fetch", "max_pooled_connections", &pooled),
        ]);
        let daemon = env.start();
        let (soft, now_hard) = limits_of(daemon.pid());
        assert_eq!(now_hard, hard);
        assert_eq!(soft, hard, "the soft limit raised to the hard one");
        wait_until("the limit logged", Duration::from_secs(10), || {
            env.daemon_log_count("open-files limit raised to the hard limit") == 1
        });
        let log = env.daemon_log();
        assert_eq!(
            log.contains("the open-files limit is"),
            warned,
            "max_pooled_connections = {pooled}, hard limit {hard}:\n{log}"
        );
        assert!(warned || pooled == "16384", "a hard limit above 1 049 096");
        if warned {
            // the pool gives way so that the workers' fetches keep their sockets
            let kept = hard - 2 * 4 - 512;
            assert!(
                log.contains(&format!("at most {kept} connections are kept for reuse")),
                "max_pooled_connections = {pooled}, hard limit {hard}:\n{log}"
            );
        }
    }
}
