//! URL lists in: one rule on every path (`run --seeds`, the spool, `POST /v1/urls`,
//! `frontierd submit`). A line that is not UTF-8 is rejected by its number and the others go
//! in; a file over the API's 64 MiB body limit is streamed in parts; `submit` exits 1 when
//! lines were rejected and shows progress on a terminal only; spool entries that are not
//! files are moved to `rejected/` with a reason (a symlink to a file is followed); a 1 MB
//! line is echoed cut, with its length.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use frontierd_e2e::{http, logged, metric, wait_until, Env, Reply, Req, Site};

fn page(req: &Req) -> Reply {
    if req.path == "/robots.txt" {
        return Reply::not_found();
    }
    Reply::html("leaf")
}

/// `base` + `/caf` + the latin-1 byte for é.
fn latin1(base: &str) -> Vec<u8> {
    let mut v = format!("{base}/caf").into_bytes();
    v.push(0xE9);
    v
}

/// A three-line list whose line 2 is latin-1.
fn list_with_latin1(base: &str) -> Vec<u8> {
    let mut v = format!("{base}/one\n").into_bytes();
    v.extend_from_slice(&latin1(base));
    v.extend_from_slice(format!("\n{base}/two\n").as_bytes());
    v
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_line_not_utf8_is_rejected_by_number_on_every_path() {
    let site = Site::start(page);
    let env = Env::new(&[]);
    let base = |name: &str| site.base(&format!("{name}.site.test"));

    // run --seeds: the daemon starts, line 2 is refused by number
    let seeds = env.dir.path().join("seeds.txt");
    std::fs::write(&seeds, list_with_latin1(&base("seeds"))).unwrap();
    let daemon = env.start_with(&[OsStr::new("--seeds"), seeds.as_os_str()]);

    // POST /v1/urls, plain text
    let (status, body) = http(
        &daemon.admin,
        "POST",
        "/v1/urls",
        &list_with_latin1(&base("api")),
    );
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["accepted"], 2, "{v}");
    assert_eq!(v["rejected"], 1, "{v}");
    assert_eq!(v["rejections"][0]["line"], 2, "{v}");
    let reason = v["rejections"][0]["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("not-utf8") && reason.contains("0xE9"),
        "{v}"
    );
    assert_eq!(
        v["rejections"][0]["url"],
        format!("{}/caf\\xE9", base("api")),
        "{v}"
    );

    // POST /v1/urls, a JSON array: a 400 naming the position
    let mut body = b"[\"".to_vec();
    body.extend_from_slice(&latin1(&base("json")));
    body.extend_from_slice(b"\"]");
    let (status, answer) = http(&daemon.admin, "POST", "/v1/urls", &body);
    assert_eq!(status, 400, "{answer}");
    let at = body.iter().position(|b| *b == 0xE9).unwrap();
    let error = json(&answer)["error"].as_str().unwrap_or("").to_string();
    assert!(
        error.contains("not UTF-8") && error.contains(&format!("offset {at}")),
        "{error}"
    );

    // the spool
    env.spool("latin1.txt", &list_with_latin1(&base("spool")));
    let spool = env.data.join("spool");
    wait_until("latin1.txt in spool/done", Duration::from_secs(30), || {
        spool.join("done/latin1.txt").exists()
    });
    let rejected = std::fs::read_to_string(spool.join("rejected/latin1.txt")).unwrap();
    assert!(
        rejected
            .lines()
            .any(|l| l.starts_with("2\tnot-utf8") && l.ends_with("/caf\\xE9")),
        "{rejected}"
    );

    // frontierd submit: line 2 named, exit 1
    let file = env.dir.path().join("submit.txt");
    std::fs::write(&file, list_with_latin1(&base("submit"))).unwrap();
    let out = env.cli("submit").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout.contains("line 2: ") && stdout.contains("not-utf8"),
        "{stdout}"
    );
    assert!(
        stdout.contains("accepted 2  duplicate 0  rejected 1"),
        "{stdout}"
    );

    // every good line of every path is crawled; the latin-1 line never is, in any spelling
    let good: Vec<String> = ["seeds", "api", "spool", "submit"]
        .iter()
        .flat_map(|n| [format!("{}/one", base(n)), format!("{}/two", base(n))])
        .collect();
    wait_until("every good line fetched", Duration::from_secs(60), || {
        let log = env.crawl_log();
        good.iter().all(|u| logged(&log, u, "fetched"))
    });
    let hits = site.hits();
    assert!(
        hits.iter().all(|h| !h.path.contains("caf")),
        "a rewritten URL was fetched: {:?}",
        hits.iter().map(|h| &h.path).collect::<Vec<_>>()
    );
    let log = env.crawl_log();
    for l in &log {
        let url = l["url"].as_str().unwrap_or("");
        assert!(
            !url.contains('\u{FFFD}') && !url.contains("%EF%BF%BD"),
            "rewritten URL in the crawl log: {l}"
        );
    }
    let refused: Vec<_> = log
        .iter()
        .filter(|l| {
            l["outcome"] == "rejected" && l["reason"].as_str().unwrap_or("").starts_with("not-utf8")
        })
        .collect();
    assert_eq!(refused.len(), 4, "one per path but JSON: {refused:?}");
    assert_eq!(
        metric(
            &daemon.metrics(),
            "frontierd_urls_rejected_total{reason=\"not-utf8\"}"
        ),
        Some(4.0)
    );
    let daemon_log = env.daemon_log();
    assert!(
        daemon_log
            .lines()
            .any(|l| l.contains("seed line rejected") && l.contains("line=2")),
        "{daemon_log}"
    );
}

#[test]
fn an_oversized_body_is_answered_413_before_it_is_sent() {
    let env = Env::new(&[]);
    let daemon = env.start();
    let mut s = TcpStream::connect(&daemon.admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let len = (64u64 << 20) + 1;
    write!(
        s,
        "POST /v1/urls HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\nhttp://a.site.test/\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    // the answer comes, and the connection ends, without the other 64 MiB
    let read = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "{read:?}: {answer}");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("64 MiB limit"), "{answer}");
}

/// Peak RSS (KiB) and exit status of a child, reaped with wait4(2).
fn wait_rusage(child: &std::process::Child) -> (std::process::ExitStatus, i64) {
    let mut status = 0;
    // SAFETY: plain wait4(2) on our own child, with out-parameters we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(r, child.id() as libc::pid_t, "wait4");
    (std::process::ExitStatus::from_raw(status), usage.ru_maxrss)
}

#[test]
fn submit_streams_a_file_over_the_body_limit_in_parts() {
    let site = Site::start(page);
    // hardly any fetching while 70 000 URLs go in
    let env = Env::new(&[
        ("politeness", "min_delay", "\"60s\""),
        ("politeness", "max_delay", "\"60s\""),
    ]);
    let daemon = env.start();
    let base = site.base("big.site.test");
    let padding = "x".repeat(1000);
    let (n, latin1_line, bad_line) = (70_000usize, 50_001usize, 69_999usize);
    let path = env.dir.path().join("big.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 1..=n {
            if i == latin1_line {
                f.write_all(&latin1(&base)).unwrap();
            } else if i == bad_line {
                f.write_all(b"not a url").unwrap();
            } else {
                write!(f, "{base}/p{i:06}/{padding}").unwrap();
            }
            f.write_all(b"\n").unwrap();
        }
    }
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 64 << 20, "{size} bytes: not over the limit");

    let stdout_path = env.dir.path().join("submit.out");
    let stderr_path = env.dir.path().join("submit.err");
    // reaped by wait_rusage (wait4), which also gives its peak RSS
    #[allow(clippy::zombie_processes)]
    let child = env
        .cli("submit")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let (status, max_rss_kib) = wait_rusage(&child);
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    eprintln!("submit of {size} bytes: peak RSS {max_rss_kib} KiB\n{stdout}{stderr}");
    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    // rejections by their line numbers in the file, across batches
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("  line {latin1_line}: ")) && l.contains("not-utf8")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| *l == format!("  line {bad_line}: not a url (unparsable)")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("accepted {}  duplicate 0  rejected 2", n - 2)),
        "{stdout}"
    );
    // stderr is not a terminal: no progress, and no error
    assert_eq!(stderr, "");
    // the file was never in memory whole
    assert!(
        max_rss_kib < 48 * 1024,
        "submit peak RSS {max_rss_kib} KiB for a {size}-byte file"
    );
    let (_, stats) = daemon.get("/v1/stats");
    assert_eq!(json(&stats)["accepted"], (n - 2) as u64, "{stats}");
}

#[test]
fn submit_shows_progress_on_a_terminal_and_exits_0_when_all_went_in() {
    let site = Site::start(page);
    let env = Env::new(&[]);
    let _daemon = env.start();
    let base = site.base("tty.site.test");
    let path = env.dir.path().join("urls.txt");
    let list: String = (0..25_000).map(|i| format!("{base}/{i}\n")).collect();
    std::fs::write(&path, list).unwrap();

    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty(3) with out-parameters we own; no name, default settings.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: fresh descriptors from openpty, owned here only.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = env
        .cli("submit")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    // the slave end is closed (the child is gone, ours went into Stdio): read to EIO
    let mut tty = Vec::new();
    let _ = std::fs::File::from(master).read_to_end(&mut tty);
    let tty = String::from_utf8_lossy(&tty);
    assert_eq!(status.code(), Some(0), "{stdout}{tty}");
    assert!(tty.contains("\r"), "not redrawn in place: {tty:?}");
    assert!(
        tty.contains("25000 lines sent, 25000 accepted, 0 duplicate, 0 rejected"),
        "{tty:?}"
    );
    assert!(tty.contains("lines/s"), "{tty:?}");
    assert!(
        stdout.contains("accepted 25000  duplicate 0  rejected 0"),
        "{stdout}"
    );
    // again: all duplicates, still exit 0
    let again = env.cli("submit").arg(&path).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("duplicate 25000"));
    let help = env.cli("submit").arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit status") && help.contains("1  some lines rejected"),
        "{help}"
    );
}

#[test]
fn spool_entries_that_are_not_files_are_rejected_and_links_to_files_followed() {
    let site = Site::start(page);
    let env = Env::new(&[]);
    let base = site.base("spool.site.test");
    let incoming = env.data.join("spool/incoming");
    std::fs::create_dir(incoming.join("a-dir")).unwrap();
    std::fs::write(
        incoming.join("a-dir/inside.txt"),
        format!("{base}/inside\n"),
    )
    .unwrap();
    let target = env.dir.path().join("list-elsewhere.txt");
    std::fs::write(&target, format!("{base}/via-link\n")).unwrap();
    std::os::unix::fs::symlink(&target, incoming.join("b-link")).unwrap();
    std::os::unix::fs::symlink(env.dir.path().join("nowhere"), incoming.join("c-dangling"))
        .unwrap();
    std::os::unix::fs::symlink(env.dir.path(), incoming.join("d-link-to-dir")).unwrap();
    let mkfifo = Command::new("mkfifo")
        .arg(incoming.join("e-fifo"))
        .status()
        .unwrap();
    assert!(mkfifo.success());
    // after the FIFO in name order: it must not block the spool
    std::fs::write(incoming.join("f-after.txt"), format!("{base}/after\n")).unwrap();
    let daemon = env.start();

    let spool = env.data.join("spool");
    wait_until("incoming emptied", Duration::from_secs(30), || {
        std::fs::read_dir(&incoming).unwrap().count() == 0
    });
    // the link, not its target, moved to done/
    let done_link = std::fs::symlink_metadata(spool.join("done/b-link")).unwrap();
    assert!(done_link.file_type().is_symlink());
    assert!(target.is_file(), "the link's target was moved");
    assert!(spool.join("done/f-after.txt").is_file());
    for (name, says, label) in [
        ("a-dir", "a directory", "rejected-directory"),
        ("c-dangling", "cannot be read", "rejected-dangling-link"),
        (
            "d-link-to-dir",
            "which is a directory",
            "rejected-link-to-non-file",
        ),
        ("e-fifo", "a FIFO", "rejected-fifo"),
    ] {
        assert!(
            std::fs::symlink_metadata(spool.join("rejected").join(name)).is_ok(),
            "{name} not in rejected/"
        );
        let reason = std::fs::read_to_string(spool.join("rejected").join(format!("{name}.reason")))
            .unwrap_or_else(|e| panic!("{name}.reason: {e}"));
        assert!(
            reason.starts_with(&format!("{name}: ")) && reason.contains(says),
            "{name}: {reason}"
        );
        assert_eq!(
            metric(
                &daemon.metrics(),
                &format!("frontierd_spool_files_total{{result=\"{label}\"}}")
            ),
            Some(1.0),
            "{label}"
        );
    }
    assert_eq!(
        metric(
            &daemon.metrics(),
            "frontierd_spool_files_total{result=\"ok\"}"
        ),
        Some(2.0)
    );
    wait_until(
        "the linked and the later file crawled",
        Duration::from_secs(30),
        || {
            let log = env.crawl_log();
            logged(&log, &format!("{base}/via-link"), "fetched")
                && logged(&log, &format!("{base}/after"), "fetched")
        },
    );
    assert!(
        site.hits().iter().all(|h| h.path != "/inside"),
        "a directory's content was read"
    );
    let log = env.daemon_log();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("spool entry rejected"))
            .count(),
        4,
        "{log}"
    );
}

#[test]
fn a_1mb_line_is_echoed_cut_with_its_length() {
    let site = Site::start(page);
    let env = Env::new(&[]);
    let daemon = env.start();
    let base = site.base("long.site.test");
    let mut long = format!("{base}/").into_bytes();
    long.resize(1 << 20, b'a');
    let long = String::from_utf8(long).unwrap();
    let cut = "… (1048576 bytes)";
    let list = format!("{long}\n{base}/short\n");
    let echoed_ok =
        |s: &str| s.starts_with(&format!("{base}/aaa")) && s.ends_with(cut) && s.len() < 300;

    // the HTTP answer, plain text (refused while read) and JSON (refused by the frontier)
    let (status, body) = http(&daemon.admin, "POST", "/v1/urls", list.as_bytes());
    assert_eq!(status, 200);
    assert!(body.len() < 2000, "{} bytes answered", body.len());
    let v = json(&body);
    assert_eq!(
        (v["accepted"].clone(), v["rejections"][0]["line"].clone()),
        (1.into(), 1.into())
    );
    assert!(
        echoed_ok(v["rejections"][0]["url"].as_str().unwrap_or("")),
        "{v}"
    );
    let v = daemon.submit(std::slice::from_ref(&long));
    assert!(
        echoed_ok(v["rejections"][0]["url"].as_str().unwrap_or("")),
        "{v}"
    );
    assert_eq!(v["rejections"][0]["reason"], "too-long", "{v}");

    // the spool's rejected-lines file
    env.spool("long.txt", list.as_bytes());
    let rejected = env.data.join("spool/rejected/long.txt");
    wait_until("the rejected-lines file", Duration::from_secs(30), || {
        rejected.exists()
    });
    let text = std::fs::read_to_string(&rejected).unwrap();
    let row = text.lines().find(|l| l.starts_with("1\t")).unwrap_or("");
    assert!(echoed_ok(row.rsplit('\t').next().unwrap_or("")), "{text}");

    // the CLI
    let file = env.dir.path().join("long.txt");
    std::fs::write(&file, &list).unwrap();
    let out = env.cli("submit").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.len() < 1000 && stdout.contains(cut), "{stdout}");

    // the crawl log: one cut line per refusal in the daemon (HTTP text, JSON, spool; submit
    // refuses a line over 64 KiB itself rather than send it)
    wait_until("three rejected lines", Duration::from_secs(30), || {
        env.crawl_log()
            .iter()
            .filter(|l| l["outcome"] == "rejected")
            .count()
            >= 3
    });
    let log = env.crawl_log();
    let rejected: Vec<_> = log.iter().filter(|l| l["outcome"] == "rejected").collect();
    assert_eq!(rejected.len(), 3, "{rejected:?}");
    for l in rejected {
        assert!(echoed_ok(l["url"].as_str().unwrap_or("")), "{l}");
    }
    let size = std::fs::metadata(env.crawl_log_path()).unwrap().len();
    assert!(size < 10_000, "crawl log of {size} bytes");
}
