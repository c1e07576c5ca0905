//! SIGKILL durability: a child process (this test binary re-executed) ingests, dispatches,
//! completes and records robots states, printing an acknowledgement only after each call
//! returned (i.e. after the durable flush). The parent kills it with SIGKILL at a random
//! moment, reopens the store and checks that nothing acknowledged was lost.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use frontier::*;

const CHILD_ENV: &str = "FRONTIER_CRASH_CHILD_DIR";
const ROUND_ENV: &str = "FRONTIER_CRASH_ROUND";
const HOSTS: usize = 40;
const T0: u64 = 1_700_000_000_000;

fn cfg(dir: &str) -> FrontierConfig {
    let mut c = FrontierConfig::new(dir).without_gaps();
    c.max_in_flight_per_host = 2;
    // odd rounds checkpoint the host-record journal as often as its ratio allows, even
    // rounds never: kills land in both regimes
    let round: u64 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    c.journal_checkpoint_bytes = if round % 2 == 1 { 0 } else { u64::MAX };
    // and every other checkpointing round writes each checkpoint over several calls (3 of
    // the 40 host records per call): kills land while one is half written
    c.journal_checkpoint_slice = if round % 4 == 1 { 3 } else { 4096 };
    // the intake log folds into segments after every batch, every few batches, or never
    // (the default buffer is never filled here): kills land in and between folds
    c.intake_buffer_bytes = [1, 16 * 1024, u64::MAX][(round % 3) as usize];
    c
}

/// The child's work loop; a no-op unless re-executed by `sigkill_loses_nothing_acknowledged`.
#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let f = Frontier::open(cfg(&dir)).unwrap();
    let out = std::io::stdout();
    let say = |line: String| {
        let mut o = out.lock();
        writeln!(o, "{line}").unwrap();
        o.flush().unwrap();
    };
    // robots states for this round's origins, acknowledged after the durable return
    let origins: Vec<String> = (0..HOSTS).map(|h| format!("http://h{h}.test")).collect();
    let outs: Vec<(&str, RobotsFetchOutcome)> = origins
        .iter()
        .map(|o| (o.as_str(), RobotsFetchOutcome::ClientError { status: 404 }))
        .collect();
    f.set_robots(&outs, T0).unwrap();
    for o in &origins {
        say(format!("ROBOTS {o}"));
    }
    let mut i = 0u64;
    let mut now = T0;
    loop {
        let urls: Vec<String> = (0..50)
            .map(|k| format!("http://h{}.test/r{round}/{}", (i + k) % HOSTS as u64, i + k))
            .collect();
        i += 50;
        let res = f.enqueue_batch(&urls, now).unwrap();
        for (u, r) in urls.iter().zip(res) {
            if r == EnqueueResult::Queued {
                say(format!("ACK {u}"));
            }
        }
        now += 1;
        let items = f.next_batch(now, 30).unwrap();
        // complete most, fail some (they are retried later), leave a third in flight
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (n, w) in items.into_iter().enumerate() {
            if let WorkItem::Page(p) = w {
                if n % 7 == 1 {
                    failed.push((
                        p.id,
                        PageOutcome::Failed {
                            reason: "reset".into(),
                        },
                    ));
                } else if n % 3 != 0 {
                    done.push((p.id, PageOutcome::Done { response_ms: 1 }, p.url));
                }
            }
        }
        let mut batch: Vec<(LeaseId, PageOutcome)> =
            done.iter().map(|(id, o, _)| (*id, o.clone())).collect();
        batch.extend(failed);
        if !batch.is_empty() {
            // a kill after the durable completion but before the DONE lines leaves these
            // URLs completed without the parent knowing: announce them first
            for (_, _, u) in &done {
                say(format!("COMPLETING {u}"));
            }
            f.complete_batch(&batch, now).unwrap();
            for (_, _, u) in done {
                say(format!("DONE {u}"));
            }
        }
    }
}

#[test]
fn sigkill_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let exe = std::env::current_exe().unwrap();
    let mut acked: HashSet<String> = HashSet::new();
    let mut done: HashSet<String> = HashSet::new();
    let mut completing: HashSet<String> = HashSet::new();
    let mut robots: HashSet<String> = HashSet::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ std::process::id() as u64;
    for round in 0..6u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let kill_after = Duration::from_millis(300 + seed % 900);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                }
            }
            lines
        });
        let started = Instant::now();
        while started.elapsed() < kill_after {
            if let Some(st) = child.try_wait().unwrap() {
                panic!("child exited early: {st}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        let mut n_ack = 0;
        for l in lines {
            // a line cut by the kill has no newline and is never acknowledged
            if let Some(u) = l.strip_prefix("ACK ") {
                acked.insert(u.to_string());
                n_ack += 1;
            } else if let Some(u) = l.strip_prefix("COMPLETING ") {
                completing.insert(u.to_string());
            } else if let Some(u) = l.strip_prefix("DONE ") {
                done.insert(u.to_string());
            } else if let Some(o) = l.strip_prefix("ROBOTS ") {
                robots.insert(o.to_string());
            }
        }
        eprintln!("round {round}: killed after {kill_after:?}, {n_ack} acks");

        // reopen and check everything acknowledged so far
        let f = Frontier::open(cfg(&path)).unwrap();
        let mut queued: HashSet<String> = HashSet::new();
        for h in 0..HOSTS {
            queued.extend(f.queued_urls(&format!("h{h}.test")).unwrap());
        }
        for u in &acked {
            assert!(
                f.is_seen(u).unwrap(),
                "round {round}: acked URL not seen: {u}"
            );
            assert!(
                queued.contains(u) || done.contains(u) || completing.contains(u),
                "round {round}: acked URL neither queued nor completed: {u}"
            );
        }
        for u in &done {
            assert!(
                !queued.contains(u),
                "round {round}: completed URL queued again: {u}"
            );
        }
        for o in &robots {
            let rec = f.robots_record(o).unwrap();
            let rec = rec.unwrap_or_else(|| panic!("round {round}: robots state lost for {o}"));
            let st = robots_policy::state::decode(&rec).unwrap();
            assert_eq!(st.kind().as_str(), "fresh", "{o}");
        }
        // nothing in flight after reopening
        for h in 0..HOSTS {
            if let Some(r) = f.host_record(&format!("h{h}.test")).unwrap() {
                assert_eq!(r.in_flight, 0);
                assert_eq!(
                    r.counters.queued as usize,
                    f.queued_urls(&format!("h{h}.test")).unwrap().len()
                );
            }
        }
    }
    assert!(!acked.is_empty(), "the child acknowledged nothing");
}
