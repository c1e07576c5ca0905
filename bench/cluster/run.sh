#!/usr/bin/env bash
# Cluster intake benchmark (docs/benchmarks.md, "Cluster intake through the broker"): URLs/s
# routed through a local nats-server -js into one frontierd node's sled.
#
#   cargo build --release -p frontierd && bench/cluster/run.sh [URLS] [HOSTS] [NODES]
#
# NODES (default 1) nodes split the 64 shards between them (all on this machine: on 2 cores
# they share the CPU, so the 3-node figure is a floor, not a per-node projection).
#
# 1. `frontierd publish` a list of URLS URLs over HOSTS hosts to 64 shards while no node runs
#    (the broker stores them): the publish rate.
# 2. Start the node(s), each owning its share of the shards: the time until they committed
#    all of them to their stores (the sum of frontierd_cluster_urls_received_total = URLS,
#    every message acknowledged after the commit) is the broker-into-sled rate.
# 3. With the node running, publish a second list of the same size: the end-to-end rate from
#    the file to the node's store.
# The crawl itself is kept out of the way: one worker, and every host resolves to a closed
# port. Needs nats-server (PATH or /usr/sbin) and python3 (the URL list).
set -euo pipefail
URLS="${1:-200000}"
HOSTS="${2:-10000}"
NODES="${3:-1}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${FRONTIERD_BIN:-$ROOT/target/release/frontierd}"
NATS="$(command -v nats-server || echo /usr/sbin/nats-server)"
WORK="$(mktemp -d)"
NODE_PIDS=()
cleanup() {
  for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  [ -n "${NATS_PID:-}" ] && kill "$NATS_PID" 2>/dev/null && wait "$NATS_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$NATS" -js -a 127.0.0.1 -p "$PORT" -sd "$WORK/js" -l "$WORK/nats.log" &
NATS_PID=$!
for _ in $(seq 100); do grep -q "Server is ready" "$WORK/nats.log" 2>/dev/null && break; sleep 0.1; done
# node k owns shards [64k/NODES, 64(k+1)/NODES)
for k in $(seq 0 $((NODES - 1))); do
  first=$((64 * k / NODES)); last=$((64 * (k + 1) / NODES - 1))
  cat > "$WORK/node$k.toml" <<TOML
[store]
data_dir = "$WORK/data$k"
[fetch]
user_agent = "frontierd-bench/1.0 (+https://example.org/bench)"
workers = 1
[admin]
listen = "127.0.0.1:0"
[log]
level = "warn"
[cluster]
enabled = true
node_id = "bench$k"
nats_url = "nats://127.0.0.1:$PORT"
shards = 64
owned_shards = "$first-$last"
publish_events = false
# the sites are on loopback, which the address policy refuses unless allowed
[addresses]
allow = ["127.0.0.0/8"]
[resolve]
"*.bench.test" = ["127.0.0.1"]
TOML
done
gen() { python3 -c "
import sys
n, hosts, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
w = sys.stdout.write
for i in range(n):
    w('http://h%05d.bench.test:9/%s/p%d\n' % (i % hosts, tag, i // hosts))
" "$URLS" "$HOSTS" "$1"; }
gen a > "$WORK/a.txt"
gen b > "$WORK/b.txt"
now() { date +%s.%N; }
rate() { python3 -c "import sys; n,a,b=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]); print('%d URLs in %.2f s = %.0f URLs/s' % (n, b-a, n/(b-a)))" "$@"; }
received() {
  local sum=0 r
  for k in $(seq 0 $((NODES - 1))); do
    r="$(curl -s "http://$(cat "$WORK/data$k/admin.addr")/metrics" | awk '$1=="frontierd_cluster_urls_received_total"{print $2}')"
    sum="$(python3 -c "print(float('$sum') + float('${r:-0}'))")"
  done
  echo "$sum"
}
wait_received() {
  while :; do
    r="$(received || true)"
    [ -n "$r" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$r" "$1" && break
    sleep 0.05
  done
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nodes: $NODES (sharing this machine's cores)"
t0=$(now); "$BIN" publish "$WORK/a.txt" --config "$WORK/node0.toml" >/dev/null; t1=$(now)
echo "1. publish (no node running):      $(rate "$URLS" "$t0" "$t1")"
t0=$(now)
for k in $(seq 0 $((NODES - 1))); do
  "$BIN" run --config "$WORK/node$k.toml" 2>"$WORK/node$k.log" &
  NODE_PIDS+=($!)
done
for k in $(seq 0 $((NODES - 1))); do
  until [ -s "$WORK/data$k/admin.addr" ]; do sleep 0.02; done
done
wait_received "$URLS"; t1=$(now)
echo "2. broker -> sled (node start incl.): $(rate "$URLS" "$t0" "$t1")"
t0=$(now); "$BIN" publish "$WORK/b.txt" --config "$WORK/node0.toml" >/dev/null; t1=$(now)
wait_received $((URLS * 2)); t2=$(now)
echo "3. file -> broker -> sled, node up:  $(rate "$URLS" "$t0" "$t2") (publish alone $(python3 -c "print('%.2f' % ($t1-$t0))") s)"
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
