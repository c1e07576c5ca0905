#!/usr/bin/env python3
"""How long the frontier's lock keeps the admin API waiting while a daemon-bench runs.

Waits for the bench's daemon (its admin.addr under /tmp/daemon-bench*), then asks
GET /v1/stats (answered under the frontier's lock) every 0.2 s until the daemon is gone,
and prints the slowest answers and a summary: a fold held under the lock shows as one
long answer (or a 503 after the admin API's 10 s). Loopback only.

    python3 bench/lock-probe.py > /tmp/probe.txt &   # then start daemon-bench
"""
import glob
import http.client
import os
import sys
import time


def admin_addr():
    for path in sorted(glob.glob("/tmp/daemon-bench*/**/admin.addr", recursive=True),
                       key=os.path.getmtime, reverse=True):
        if time.time() - os.path.getmtime(path) < 600:
            return open(path).read().strip()
    return None


def main():
    deadline = time.time() + float(sys.argv[1]) if len(sys.argv) > 1 else None
    addr = None
    while addr is None:
        addr = admin_addr()
        time.sleep(0.5)
    host, port = addr.rsplit(":", 1)
    assert host in ("127.0.0.1", "::1", "[::1]", "localhost"), addr
    answers = []  # (started, seconds, status)
    misses = 0
    while deadline is None or time.time() < deadline:
        t0 = time.time()
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=120)
            c.request("GET", "/v1/stats")
            status = c.getresponse().status
            c.close()
            misses = 0
        except OSError:
            misses += 1
            if misses >= 10:
                break  # the daemon is gone
            time.sleep(0.5)
            continue
        answers.append((t0, time.time() - t0, status))
        time.sleep(0.2)
    if not answers:
        print("no answer")
        return
    slow = sorted(answers, key=lambda a: -a[1])[:10]
    print("slowest answers of GET /v1/stats (UTC, seconds, status):")
    for t0, s, st in slow:
        print(f"  {time.strftime('%H:%M:%S', time.gmtime(t0))} {s:7.2f} s {st}")
    secs = sorted(a[1] for a in answers)
    n = len(secs)
    over1 = sum(1 for s in secs if s >= 1.0)
    print(f"{n} answers; median {secs[n // 2]:.3f} s, p99 {secs[int(n * 0.99)]:.2f} s, "
          f"max {secs[-1]:.2f} s; {over1} of 1 s or more; "
          f"{sum(1 for a in answers if a[2] != 200)} not 200")


if __name__ == "__main__":
    main()
