#!/usr/bin/env python3
"""Where a page's CPU goes: charge each sample of a daemon-bench --perf run (recorded with
--call-graph dwarf) to the first of the categories below that any frame of its stack
matches, in the order listed, and print each category's share and, given the daemon's
CPU per page, its microseconds a page (the table in docs/benchmarks.md, "Daemon
throughput").

    perf script -i perf-256.data | python3 where-perf.py [--us-per-page 61]
"""
import argparse
import collections
import re
import sys

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
]
REST = "runtime: scheduling, wake-ups, idle, the rest"


def samples(lines):
    frames = []
    started = False
    for line in lines:
        if not line.strip():
            if started:
                yield frames
            frames, started = [], False
            continue
        if not line.startswith((" ", "\t")):
            started = True  # the sample's header line: comm pid time event
            continue
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            frames.append(parts[1])
    if started:
        yield frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--us-per-page", type=float, default=None,
                    help="the daemon's CPU per page in the same run, to turn shares into us")
    args = ap.parse_args()
    counts = collections.Counter()
    total = 0
    for frames in samples(sys.stdin):
        total += 1
        for name, pat in CATEGORIES:
            if any(pat.search(f) for f in frames):
                counts[name] += 1
                break
        else:
            counts[REST] += 1
    if total == 0:
        sys.exit("no samples")
    print(f"{total} samples")
    print("| where | share | us a page |")
    print("| --- | ---: | ---: |")
    for name in [c for c, _ in CATEGORIES] + [REST]:
        share = counts[name] / total
        us = f"{share * args.us_per_page:.1f}" if args.us_per_page else "-"
        print(f"| {name} | {100 * share:.1f} % | {us} |")


if __name__ == "__main__":
    main()
