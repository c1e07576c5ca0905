//! The client commands as a shell user runs them: output into a pipe that closes early, and
//! the `hosts` table.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use frontierd_e2e::{frontierd_bin, Env, Reply, Site};

#[test]
fn stats_watch_into_a_closed_pipe_exits_quietly() {
    let env = Env::new(&[]);
    let _daemon = env.start();
    // `frontierd stats --watch | head -c 100`
    let mut child = Command::new(frontierd_bin())
        .args(["stats", "--watch", "--config"])
        .arg(&env.config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    // the next refresh (every 2 s) finds the pipe closed
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "stats --watch still running 30 s after its reader went away"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn config_default_into_a_closed_pipe_exits_quietly() {
    // `frontierd config default | head -1` with a pipe closed before the first write
    let mut child = Command::new(frontierd_bin())
        .args(["config", "default"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn hosts_table_columns_line_up() {
    let site = Site::start(|_| Reply::not_found());
    let env = Env::new(&[]);
    let daemon = env.start();
    // paused hosts keep their URLs queued: counts of different widths
    let hosts = [
        ("a.site.test", 1),
        ("a-much-longer-host-name.site.test", 12),
    ];
    let mut urls = Vec::new();
    for (host, n) in hosts {
        let (status, body) = daemon.post(&format!("/v1/hosts/{host}/pause?create=true"));
        assert_eq!(status, 200, "{body}");
        for i in 0..n {
            urls.push(format!("{}/p{i}", site.base(host)));
        }
    }
    daemon.submit(&urls);

    let out = env.cli("hosts").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let header = lines[0];
    // right-aligned numbers end where their header word ends; the other cells start where
    // theirs starts
    let queued_end = header.find("QUEUED").unwrap() + "QUEUED".len();
    let robots_start = header.find("ROBOTS").unwrap();
    let paused_start = header.find("PAUSED").unwrap();
    for (host, n) in hosts {
        let line = lines[1..]
            .iter()
            .find(|l| l.starts_with(&format!("{host} ")))
            .unwrap_or_else(|| panic!("no row for {host}:\n{text}"));
        assert!(
            line[..queued_end].ends_with(&format!(" {n}")),
            "QUEUED column of {host}:\n{text}"
        );
        assert!(line[robots_start..].starts_with("unknown"), "{text}");
        assert!(line[paused_start..].starts_with("true"), "{text}");
    }
}
