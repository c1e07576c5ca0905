//! What the kernel says about a process: CPU time, peak RSS, bytes written; and the load.

use std::fs;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
fn ticks_per_sec() -> f64 {
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// user + system CPU seconds of `pid` (all threads), from /proc/<pid>/stat; None once gone.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the command name, which is in parentheses and may hold spaces
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_sec())
}

pub fn self_cpu_secs() -> f64 {
    cpu_secs(std::process::id()).unwrap_or(0.0)
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Peak resident set (VmHWM) in bytes.
pub fn vm_hwm(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:").map(|k| k * 1024)
}

/// Resident set now, bytes.
pub fn vm_rss(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:").map(|k| k * 1024)
}

/// Bytes the process caused to be written to storage (`write_bytes` of /proc/<pid>/io).
pub fn write_bytes(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Bytes passed to write(2) and the like (`wchar`), whether or not they reached storage.
pub fn wchar(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The 1-minute load average and the whole /proc/loadavg line, as `uptime` shows it.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| {
            let f: Vec<&str> = s.split_whitespace().take(3).collect();
            f.join(", ")
        })
        .unwrap_or_else(|_| "?".into())
}
