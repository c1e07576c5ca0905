#!/usr/bin/env python3
"""Summarise `perf script` output of a daemon-bench --perf run (recorded with
--call-graph dwarf): share of samples per thread kind, per leaf class and per innermost
frontierd/frontier/sled/fetcher frame, so kernel time (context switches, futex, sync) is
charged to the Rust code that caused it.

    perf script -i perf-64.data | python3 fold-perf.py

A recording of the bench's archiving client (`perf record --call-graph dwarf -- daemon-bench
--warc-anchor --no-client --no-daemon ...`) folds the same way (nginx's samples left out),
for the daemon's rows beside what fetching and archiving alone cost.

With --where: where a page's CPU goes instead, each sample charged to the first of
CATEGORIES that any frame of its stack matches, in that order, and with --us-per-page (the
daemon's CPU per page in the same run) in microseconds a page (the table in
docs/benchmarks.md, "Daemon throughput").

    perf script -i perf-256.data | python3 fold-perf.py --where --us-per-page 61
"""
import argparse
import collections
import re
import sys

OURS = re.compile(r"^(frontierd|frontier|fetcher|robots_policy)::|<(frontierd|frontier|fetcher)::")


def leaf_class(frames):
    leaf = frames[0] if frames else "?"
    kernel = [f for f in frames if f.startswith("[k]")]
    names = " ".join(kernel)
    if "finish_task_switch" in leaf or "__schedule" in leaf or "schedule" == leaf[4:]:
        return "kernel: context switch (futex wait / sched_yield / io wait)"
    if "futex" in names:
        return "kernel: futex (wake/wait)"
    if "sync_file_range" in names or "fdatasync" in names or "fsync" in names:
        return "kernel: sync_file_range/fsync"
    if "_raw_spin_unlock_irqrestore" in leaf:
        return "kernel: wake-up (try_to_wake_up etc.)"
    if kernel:
        return "kernel: other"
    return "user"


# (category, pattern on any frame of the stack); the first match wins, so the narrower
# ones come first (deflate and SHA-1 run inside the WARC writer, the fetcher inside a
# worker).
CATEGORIES = [
    ("WARC: deflate (libdeflate)", re.compile(r"deflate|libdeflate")),
    ("WARC: SHA-1 digests", re.compile(r"sha1")),
    ("WARC: the rest (record, file write)", re.compile(r"\bwarc::|warc_output")),
    ("crawl log line", re.compile(r"crawl_log|CrawlLog|crawllog")),
    ("frontier: lease calls (dispatcher)", re.compile(r"next_batch|dispatch_loop")),
    ("frontier: completions (completer, store)", re.compile(r"complete_loop|frontier::complete|apply_robots")),
    ("sled (its own threads, flushes)", re.compile(r"\bsled::")),
    ("fetch: hyper's connection task (sockets, parsing)",
     re.compile(r"hyper::proto|UpgradeableConnection|hyper::client::conn|hyper_util::client::legacy::pool|hyper_util::rt::tokio")),
    ("fetch: the fetcher (request, body, timeouts, records)", re.compile(r"\bfetcher::")),
    ("worker: the rest of a page (events, outcome, parse)", re.compile(r"frontierd::daemon::worker|frontierd_pipeline|crawl::")),
    # only in a recording of the bench's own archiving client (--warc-anchor --no-daemon)
    ("the bench client's loop (request, body, archive call)", re.compile(r"daemon_bench::client")),
]
REST = "runtime: scheduling, wake-ups, idle, the rest"


def read_samples(lines):
    """(thread name, frames innermost first) of each sample of `perf script` output."""
    samples = []
    comm = None
    frames = []
    for line in lines:
        if not line.strip():
            if comm is not None:
                samples.append((comm, frames))
            comm, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            comm = line.split()[0]
            # thread names with spaces are not used by the daemon
            frames = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        addr, rest = parts
        sym = re.sub(r"\+0x[0-9a-f]+ \(.*\)$", "", rest)
        sym = re.sub(r" \(.*\)$", "", sym)
        if addr.startswith("ffffffff8"):
            sym = "[k]" + sym
        frames.append(sym)
    if comm is not None:
        samples.append((comm, frames))
    return samples


def print_where(samples, us_per_page):
    counts = collections.Counter()
    for comm, frames in samples:
        if comm in ("nginx", "daemon-bench"):
            # a recording of the bench itself (the archiving client) holds its server and
            # its main thread's set-up too; the client runs on the runtime's threads
            continue
        name = next(
            (c for c, pat in CATEGORIES if any(pat.search(f) for f in frames)), REST
        )
        counts[name] += 1
    total = sum(counts.values())
    print(f"{total} samples")
    print("| where | share | us a page |")
    print("| --- | ---: | ---: |")
    for name in [c for c, _ in CATEGORIES] + [REST]:
        share = counts[name] / total
        us = f"{share * us_per_page:.1f}" if us_per_page else "-"
        print(f"| {name} | {100 * share:.1f} % | {us} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--where", action="store_true", help="the table of where a page's CPU goes")
    ap.add_argument("--us-per-page", type=float, default=None,
                    help="with --where: the daemon's CPU per page in the same run")
    args = ap.parse_args()
    samples = read_samples(sys.stdin)
    if not samples:
        sys.exit("no samples")
    if args.where:
        print_where(samples, args.us_per_page)
        return
    n = len(samples)
    print(f"{n} samples")

    def kind(c):
        return re.sub(r"-\d+$", "-N", c)

    by_thread = collections.Counter(kind(c) for c, _ in samples)
    print("\n== by thread")
    for k, v in by_thread.most_common():
        print(f"{100*v/n:6.2f}%  {k}")
    by_class = collections.Counter(leaf_class(f) for _, f in samples)
    print("\n== by leaf class")
    for k, v in by_class.most_common():
        print(f"{100*v/n:6.2f}%  {k}")
    print("\n== by innermost frontierd/frontier/fetcher frame (and the sled/tokio frame below it)")
    sites = collections.Counter()
    for c, f in samples:
        ours = next((x for x in f if OURS.search(x)), None)
        sled = next((x for x in f if x.startswith("sled::")), None)
        if ours is None:
            tok = next((x for x in f if "tokio::runtime" in x or "hyper::" in x), None)
            ours = "(no frontierd frame) " + (sled or tok or (f[-1] if f else "?"))
        cls = leaf_class(f)
        sites[(kind(c), ours, cls)] += 1
    for (k, site, cls), v in sites.most_common(45):
        print(f"{100*v/n:6.2f}%  {k:18} {site[:110]}  [{cls}]")


if __name__ == "__main__":
    main()
