#!/usr/bin/env python3
"""Hostile-input benchmark driver for frontierd (stdlib only; see README.md).

Starts server.py (hostile and well-behaved virtual hosts on one loopback port), starts
`frontierd run` on a temporary data dir, seeds one URL per host, samples the daemon's
memory for --seconds and prints a summary. Exit 0 when VmHWM grew by less than
--bound-mib and every good host was crawled (at least 50 requests each); else exit 1.

All traffic stays on 127.0.0.1: the server binds only there, and the daemon's [resolve]
table maps every *.hostile.test name to 127.0.0.1.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ left in the repo by the import below
from server import KINDS  # noqa: E402  (one list of hostile kinds for both scripts)

MIN_GOOD_REQUESTS = 50

CONFIG = """\
[store]
data_dir = "{data}"
[fetch]
workers = 32
total_timeout = "10s"
[politeness]
min_delay = "0s"
max_delay = "0s"
delay_factor = 0.0
max_in_flight_per_ip = 100000
ip_delay = "0s"
[scope]
follow_links = true
mode = "any"
[sitemaps]
enabled = true
[admin]
listen = "127.0.0.1:0"
[log]
level = "warn"
[addresses]
allow = ["127.0.0.0/8"]
[resolve]
"*.hostile.test" = ["127.0.0.1"]
"""


class Failure(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, host=None, body=None, timeout=30):
    """One HTTP request to 127.0.0.1:port (never anywhere else); returns (status, bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Host": host} if host else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def server_log(port):
    status, body = request(port, "GET", "/__log", host="control.hostile.test")
    if status != 200:
        raise Failure(f"server /__log answered {status}")
    return json.loads(body)


def mem_kib(pid):
    """VmRSS and VmHWM (peak RSS) of a process, in KiB, from /proc/<pid>/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def mib(kib):
    return kib / 1024


def stop(proc, name, grace):
    """SIGTERM, wait up to `grace` seconds, then SIGKILL. Only processes we started."""
    if proc.poll() is not None:
        return f"{name} had already exited (code {proc.returncode})"
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
        return f"{name} stopped by SIGTERM in {time.time() - t0:.1f}s (exit code {proc.returncode})"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return f"{name} did not stop within {grace}s of SIGTERM: SIGKILLed"


def tail(path, n=10, width=300):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [ln[:width] + ("…" if len(ln) > width else "") for ln in lines[-n:]]


def crawl_log_verdicts(path, port):
    """Final crawl-log line of each hostile host's interesting URLs (its / and sitemap):
    how the daemon judged the hostile input. Read line by line: the file can be large."""
    wanted = {f"http://{k}.hostile.test:{port}{p}"
              for k in KINDS for p in ("/", "/sitemap.xml", "/sitemap.xml.gz")}
    found = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if "hostile.test" not in line or '"url"' not in line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("url") in wanted:
                    found[rec["url"]] = rec
    except OSError:
        pass
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/frontierd",
                    help="frontierd binary (relative paths are from the repo root)")
    ap.add_argument("--seconds", type=int, default=60, help="how long to sample")
    ap.add_argument("--good-hosts", type=int, default=20)
    ap.add_argument("--bound-mib", type=float, default=160,
                    help="largest VmHWM growth that passes")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (data, logs)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="hostile hosts to seed, comma-separated (empty: the good hosts "
                         "alone, the baseline the growth is judged against)")
    args = ap.parse_args()

    binary = args.bin if os.path.isabs(args.bin) else os.path.join(REPO, args.bin)
    if not os.access(binary, os.X_OK):
        print(f"FAIL: no executable frontierd at {binary}", file=sys.stderr)
        return 1

    tmp = tempfile.mkdtemp(prefix="frontierd-hostile-")
    data = os.path.join(tmp, "data")
    cfg = os.path.join(tmp, "frontierd.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(data=data))
    server = daemon = None
    reasons = []
    try:
        # Refuse to start on a config the binary rejects (unknown key, bad value).
        check = subprocess.run([binary, "config", "check", cfg], capture_output=True,
                               text=True, timeout=60)
        if check.returncode != 0:
            raise Failure(f"`frontierd config check` rejected {cfg} (exit "
                          f"{check.returncode}):\n{check.stdout}{check.stderr}")

        port = free_port()
        server_err = open(os.path.join(tmp, "server.err"), "w")
        server = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), str(port)],
                                  stdout=server_err, stderr=server_err)
        deadline = time.time() + 120  # the server builds its gzip payloads first (~5 s)
        while True:
            if server.poll() is not None:
                raise Failure("server.py exited at start:\n" + "\n".join(
                    tail(server_err.name)))
            try:
                server_log(port)
                break
            except (OSError, Failure):
                if time.time() > deadline:
                    raise Failure("server.py did not answer within 120 s")
                time.sleep(0.3)

        daemon_log = os.path.join(tmp, "daemon.log")
        with open(daemon_log, "w") as dl:
            daemon = subprocess.Popen([binary, "run", "--config", cfg], stdout=dl, stderr=dl)
        addr_file = os.path.join(data, "admin.addr")
        deadline = time.time() + 60
        while not os.path.exists(addr_file) or not open(addr_file).read().strip():
            if daemon.poll() is not None:
                raise Failure(f"frontierd exited at start (code {daemon.returncode}):\n"
                              + "\n".join(tail(daemon_log)))
            if time.time() > deadline:
                raise Failure("frontierd wrote no admin.addr within 60 s")
            time.sleep(0.1)
        admin_ip, _, admin_port = open(addr_file).read().strip().rpartition(":")
        if not admin_ip.startswith("127."):  # the config says 127.0.0.1; never go elsewhere
            raise Failure(f"admin address {admin_ip}:{admin_port} is not loopback")
        admin_port = int(admin_port)
        before = mem_kib(daemon.pid)

        kinds = [k for k in args.kinds.split(",") if k]
        seeds = ([f"http://{k}.hostile.test:{port}/" for k in kinds]
                 + [f"http://good{n}.hostile.test:{port}/p0" for n in range(args.good_hosts)])
        status, body = request(admin_port, "POST", "/v1/urls", body=json.dumps(seeds))
        if status != 200:
            raise Failure(f"POST /v1/urls answered {status}: {body[:500]!r}")
        answer = json.loads(body)
        print(f"seeded {len(seeds)} URLs: accepted {answer.get('accepted')}, "
              f"duplicate {answer.get('duplicate')}, rejected {answer.get('rejected')}",
              flush=True)

        # Sample once a second; a progress line every 10 s.
        t0 = time.time()
        max_rss = before["VmRSS"]
        crashed = False
        for i in range(1, args.seconds + 1):
            time.sleep(max(0.0, t0 + i - time.time()))
            if daemon.poll() is not None:
                crashed = True
                reasons.append(f"frontierd exited during the run (code {daemon.returncode})")
                break
            m = mem_kib(daemon.pid)
            max_rss = max(max_rss, m["VmRSS"])
            if i % 10 == 0:
                served = server_log(port)["requests"]
                print(f"  t={i:3d}s  VmRSS {mib(m['VmRSS']):7.1f} MiB  VmHWM "
                      f"{mib(m['VmHWM']):7.1f} MiB  server requests {served}", flush=True)

        after = before if crashed else mem_kib(daemon.pid)
        log = server_log(port)
        try:
            stats = json.loads(request(admin_port, "GET", "/v1/stats")[1])
        except (OSError, ValueError) as e:
            stats = {"error": f"GET /v1/stats failed: {e}"}

        # ---- summary ---------------------------------------------------------------
        growth = mib(after["VmHWM"] - before["VmHWM"])
        hosts = log["hosts"]
        print(f"\n== frontierd hostile-input benchmark: {args.seconds}s, "
              f"{args.good_hosts} good hosts, {len(KINDS)} hostile hosts")
        print(f"VmHWM before      {mib(before['VmHWM']):9.1f} MiB")
        print(f"VmHWM after       {mib(after['VmHWM']):9.1f} MiB")
        print(f"growth            {growth:9.1f} MiB   (bound {args.bound_mib:g} MiB)")
        print(f"max VmRSS sampled {mib(max_rss):9.1f} MiB")
        print(f"server requests   {log['requests']:9d}   server errors {len(log['errors'])}")
        for e in log["errors"][:10]:
            print(f"  server error: {e}")

        print("\n-- good hosts (pages = requests for /p<i>)")
        print(f"{'host':<10} {'requests':>8} {'pages':>6}")
        for n in range(args.good_hosts):
            h = hosts.get(f"good{n}", {})
            print(f"{'good%d' % n:<10} {h.get('requests', 0):>8} {h.get('pages', 0):>6}")
            if h.get("requests", 0) < MIN_GOOD_REQUESTS:
                reasons.append(f"good{n} got {h.get('requests', 0)} requests "
                               f"(< {MIN_GOOD_REQUESTS})")

        print("\n-- hostile hosts (hangups = client closed mid-response)")
        print(f"{'host':<11} {'requested':>9} {'reqs':>6} {'robots':>6} {'smap':>4} "
              f"{'root':>4} {'hangups':>7}  paths (first seen)")
        for k in KINDS:
            h = hosts.get(k, {})
            print(f"{k:<11} {'yes' if h.get('requests') else 'NO':>9} {h.get('requests', 0):>6} "
                  f"{h.get('robots', 0):>6} {h.get('sitemap', 0):>4} {h.get('root', 0):>4} "
                  f"{h.get('disconnects', 0):>7}  {' '.join(h.get('paths', [])[:6])}")

        print("\n-- GET /v1/stats at the end")
        print(json.dumps(stats, indent=2, sort_keys=True))

        if growth >= args.bound_mib:
            reasons.insert(0, f"VmHWM grew {growth:.1f} MiB (>= bound {args.bound_mib:g} MiB)")

        # ---- shut down, then read what the daemon wrote ----------------------------
        print("\n-- shutdown")
        print(stop(daemon, "frontierd", 30))
        if daemon.returncode not in (0, None) and not crashed:
            print(f"  note: frontierd exit code {daemon.returncode} after SIGTERM")
        print(stop(server, "server.py", 5))

        verdicts = crawl_log_verdicts(os.path.join(data, "crawl.log.jsonl"), port)
        print("\n-- crawl-log lines of the hostile URLs (a URL gets its line when its fate is final)")
        for k in KINDS:
            paths = ["/"] + [p for p in ("/sitemap.xml", "/sitemap.xml.gz")
                             if f"http://{k}.hostile.test:{port}{p}" in verdicts]
            for p in paths:
                rec = verdicts.get(f"http://{k}.hostile.test:{port}{p}")
                if rec is None:
                    print(f"{k + p:<26} (no line: still retrying, backing off or in flight)")
                    continue
                print(f"{k + p:<26} {rec.get('outcome')!s:<10} status {rec.get('status')!s:<4} "
                      f"bytes {rec.get('bytes')!s:<9} {(rec.get('reason') or '')[:160]}")

        log_lines = tail(daemon_log, n=10**9)
        panics = [ln for ln in log_lines if "panicked" in ln]
        errors = [ln for ln in log_lines if " ERROR " in ln or '"ERROR"' in ln]
        print(f"\n-- daemon log: {len(log_lines)} lines, {len(errors)} ERROR, "
              f"{len(panics)} panic")
        for ln in (panics + errors)[:10] or log_lines[-5:]:
            print(f"  {ln}")
        if panics:
            reasons.append(f"frontierd panicked ({len(panics)} lines)")
        if crashed:
            for ln in tail(daemon_log, 20):
                print(f"  {ln}")
    except (Failure, OSError) as e:  # OSError: a process or socket went away mid-run
        reasons.append(str(e))
    finally:
        if daemon is not None and daemon.poll() is None:
            stop(daemon, "frontierd", 30)
        if server is not None and server.poll() is None:
            stop(server, "server.py", 5)
        if args.keep:
            print(f"\nkept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if reasons:
        print("\nRESULT: FAIL")
        for r in reasons:
            print(f"  - {r}")
        return 1
    print("\nRESULT: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
