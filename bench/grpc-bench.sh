#!/usr/bin/env bash
# PutURLs and GetURLs throughput of frontierd's url-frontier gRPC API, from the Python
# (grpcio) client and from a tonic client (CALLERS spout-like callers, default 1), each
# against a fresh daemon with fetch.workers = 0 and no politeness gap, per host or per IP
# (this measures the API and the frontier, not politeness); in the same run the anchors:
# `frontierd submit` of the same URL list (the HTTP intake) and the frontier library bench
# at the same size (dispatch + complete, no network), then the ratios. The tonic client and
# the two anchors run ROUNDS times (default 3), alternated, each round's ratios printed and
# their median last: on 2 shared cores one run of each varies by a third.
# Usage: bench/grpc-bench.sh [debug|release] [URLS] [HOSTS]   (results: docs/benchmarks.md)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-debug}
urls=${2:-20000}
hosts=${3:-200}
flag=()
[ "$profile" = release ] && flag=(--release)
cargo build --quiet "${flag[@]}" -p frontierd -p frontier-grpc --bin frontierd --example grpc_throughput
# the library anchor runs in the bench profile (release) whatever the profile above
cargo bench --quiet --no-run -p frontier --bench frontier 2>/dev/null
library_bench() {
  FRONTIER_BENCH_URLS=$urls FRONTIER_BENCH_HOSTS=$hosts FRONTIER_BENCH_RAW=0 \
    cargo bench --quiet -p frontier --bench frontier 2>/dev/null | grep '^ingest'
}
bin=target/$profile/frontierd
python=${FRONTIERD_PYTHON:-.venv/bin/python3}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # daemons started inside $(run_daemon ...) are recorded in a file: a subshell's pids+=
  # never reaches this shell
  [ -f "$work/daemon.pids" ] && while read -r p; do kill "$p" 2>/dev/null || true; done <"$work/daemon.pids"
  rm -rf "$work"
}
trap cleanup EXIT

# robots.txt: every host answers 404 (allow all) from one local static server
mkdir -p "$work/www"
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$python" -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >/dev/null 2>&1 &
pids+=($!)

run_daemon() { # $1: name; prints the gRPC address
  local d="$work/$1"
  mkdir -p "$d"
  cat >"$d/frontierd.toml" <<TOML
[store]
data_dir = "$d/data"
[fetch]
workers = 0
user_agent = "frontierd-bench/0.1 (+https://example.org/bot)"
[grpc]
listen = "127.0.0.1:0"
# below the listen backlog (5) of Python's http.server serving robots.txt: more at once
# overflowed it, and the dropped SYNs' retransmits (1 s, 3 s, 7 s, ...) made a tail of
# hosts wait tens of seconds for their robots.txt (timings varied from 15 to 100 s)
robots_in_flight = 4
[admin]
listen = "127.0.0.1:0"
[politeness]
min_delay = "0s"
max_delay = "0s"
delay_factor = 0.0
max_in_flight_per_host = 64
# every *.bench.test host resolves to 127.0.0.1: without these the IP group's gap
# (ip_delay, 250 ms by default) would pace every host together
max_in_flight_per_ip = 100000
ip_delay = "0s"
# the sites are on loopback, which the address policy refuses unless allowed
[addresses]
allow = ["127.0.0.0/8"]
[resolve]
"*.bench.test" = ["127.0.0.1"]
TOML
  "$bin" run --config "$d/frontierd.toml" >"$d/daemon.log" 2>&1 &
  echo $! >>"$work/daemon.pids"
  for _ in $(seq 1200); do
    [ -s "$d/data/grpc.addr" ] && break
    sleep 0.05
  done
  cat "$d/data/grpc.addr" || { cat "$d/daemon.log" >&2; return 1; }
}

base="http://h{}.bench.test:$port"
echo "profile $profile, $urls URLs over $hosts hosts, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
addr=$(run_daemon python)
"$python" tests/python/urlfrontier_bench.py crates/grpc/proto "$work/gen" "$addr" "$urls" "$hosts" "$base"
"$python" -c "
import sys
n, hosts, base = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
print('\\n'.join(base.replace('{}', str(i % hosts)) + '/t/%d' % i for i in range(n)))" \
  "$urls" "$hosts" "$base" >"$work/urls.txt"
ratios=()
for round in $(seq "${ROUNDS:-3}"); do
  addr=$(run_daemon "tonic$round")
  tonic=$(CALLERS=${CALLERS:-1} "target/$profile/examples/grpc_throughput" "$addr" "$urls" "$hosts" "$base")
  echo "$tonic"
  # the HTTP intake of the same list, on a fresh daemon
  run_daemon "submit$round" >/dev/null
  admin=$(cat "$work/submit$round/data/admin.addr")
  t0=$(date +%s.%N)
  "$bin" submit --admin "$admin" "$work/urls.txt" >/dev/null
  t1=$(date +%s.%N)
  lib=$(library_bench)
  echo "library (same size): $lib"
  ratios+=("$("$python" - "$tonic" "$lib" "$urls" "$t0" "$t1" <<'PY'
import json, re, sys
tonic, lib, n, t0, t1 = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
submit = n / (t1 - t0)
dispatch = float(re.search(r"dispatch (\d+) URLs/s", lib).group(1))
put, get = tonic['put_urls_per_sec'], tonic['get_report_urls_per_sec']
print(f"{100 * put / submit:.1f} {100 * get / dispatch:.1f} {put:.0f} {submit:.0f} {get:.0f} {dispatch:.0f}")
PY
)")
  set -- ${ratios[-1]}
  # this round's daemons stop before the next round measures
  while read -r p; do kill "$p" 2>/dev/null || true; done <"$work/daemon.pids"
  : >"$work/daemon.pids"
  echo "round $round: PutURLs $3 URLs/s = $1 % of the HTTP intake ($4 URLs/s); GetURLs + done $5 URLs/s = $2 % of the library's dispatch + complete ($6 URLs/s)"
done
"$python" - "${ratios[@]}" <<'PY'
import statistics, sys
rows = [list(map(float, r.split())) for r in sys.argv[1:]]
med = lambda i: statistics.median(r[i] for r in rows)
print(f"median of {len(rows)} rounds: PutURLs {med(2):.0f} URLs/s = {med(0):.1f} % of the HTTP intake, {med(3):.0f} URLs/s (goal >= 50 %)")
print(f"median of {len(rows)} rounds: GetURLs + done {med(4):.0f} URLs/s = {med(1):.1f} % of the library's dispatch + complete, {med(5):.0f} URLs/s (goal >= 25 %)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
