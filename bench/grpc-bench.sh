#!/usr/bin/env bash
# PutURLs and GetURLs throughput of frontierd's url-frontier gRPC API, from the Python
# (grpcio) client and from a tonic client, each against a fresh daemon with fetch.workers = 0
# and no politeness gap, per host or per IP (this measures the API and the frontier, not
# politeness).
# Usage: bench/grpc-bench.sh [debug|release] [URLS] [HOSTS]   (results: docs/benchmarks.md)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-debug}
urls=${2:-20000}
hosts=${3:-200}
flag=()
[ "$profile" = release ] && flag=(--release)
cargo build --quiet "${flag[@]}" -p frontierd -p frontier-grpc --bin frontierd --example grpc_throughput
bin=target/$profile/frontierd
python=${FRONTIERD_PYTHON:-.venv/bin/python3}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
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
  pids+=($!)
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
addr=$(run_daemon tonic)
"target/$profile/examples/grpc_throughput" "$addr" "$urls" "$hosts" "$base"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
