//! A crawl-log batch cut short by the disk (here the file-size limit, `RLIMIT_FSIZE`,
//! which fails a write past it the way a full disk does) leaves no half line behind. Its
//! own test binary: the limit and the ignored `SIGXFSZ` hold for the whole process.

use crawl::{Found, LogLine, Outcome};
use frontierd_outputs::CrawlLog;

fn set_file_size_limit(bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain system calls on this process's own limit and signal disposition
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

fn hand_in(log: &CrawlLog, from: usize, n: usize) {
    for i in from..from + n {
        let url = format!("http://a.test/{i}/{}", "x".repeat(200));
        log.write(
            &LogLine::unfetched(&url, Outcome::Rejected, "bad", Found::SUBMITTED),
            0,
        );
    }
}

fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "a half line at the end"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_batch_the_disk_cuts_short_leaves_the_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crawl.log");
    let log = CrawlLog::open(&path).unwrap();
    set_file_size_limit(20_000);
    hand_in(&log, 0, 20);
    assert!(log.flush().unwrap().result.is_ok());
    let before = std::fs::metadata(&path).unwrap().len();
    assert!(before > 5_000 && before < 20_000, "{before}");
    // enough for part of the batch only: the write is cut short, then fails
    hand_in(&log, 20, 60);
    let failed = log.flush().unwrap();
    let (error, first_in_episode) = failed.result.unwrap_err();
    assert!(first_in_episode, "{error}");
    assert_eq!(failed.outcomes.len(), 60);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before, "undone");
    assert_eq!(lines(&path).len(), 20);
    // room again: the next batch follows the last whole line
    set_file_size_limit(libc::RLIM_INFINITY);
    hand_in(&log, 80, 5);
    assert!(matches!(log.flush().unwrap().result, Ok(true)), "resumed");
    let all = lines(&path);
    assert_eq!(all.len(), 25);
    assert!(all[20]["url"]
        .as_str()
        .unwrap()
        .starts_with("http://a.test/80/"));
}
