#!/usr/bin/env bash
# A/B of a single-node cluster's restart after kill -9: milliseconds from
# starting the node binary to its first /healthz 200, alternating two
# builds on the same data (about 320 MiB of 1 KiB messages, 20 MiB more
# before each kill). Usage:
#   go build -o /tmp/a/node ./cmd/node   # at the older commit (git worktree)
#   go build -o /tmp/b/node ./cmd/node && go build -o /tmp/b/raftmq ./cmd/raftmq
#   scripts/single-restart-ab.sh /tmp/a/node /tmp/b/node /tmp/b/raftmq [rounds]
set -euo pipefail
old=$1 new=$2 cli=$3 rounds=${4:-5}
dir=$(mktemp -d)
trap 'kill "$(cat "$dir/pid")" 2>/dev/null || true; rm -rf "$dir"' EXIT
args=(--id n1 --dir "$dir/data" --raft-addr 127.0.0.1:17001 --api-addr 127.0.0.1:19001
  --http-addr 127.0.0.1:18001 --remoting-addr= --namesrv-addr=)
start() { "$1" "${args[@]}" >"$dir/node.log" 2>&1 & echo $! >"$dir/pid"; }
healthy_ms() {
  local t0; t0=$(date +%s%N)
  for _ in $(seq 1 6000); do
    if curl -sf -o /dev/null http://127.0.0.1:18001/healthz; then echo $(( ($(date +%s%N) - t0) / 1000000 )); return; fi
    sleep 0.005
  done
  echo timeout
}
produce() { "$cli" --server 127.0.0.1:19001 --quiet bench produce -t T -n "$1" -s 1024 -c 4 --batch 64 >/dev/null; }
start "$new"; healthy_ms >/dev/null
produce 300000
for _ in $(seq 1 "$rounds"); do
  for bin in "$old" "$new"; do
    produce 20000
    pid=$(cat "$dir/pid"); kill -9 "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
    start "$bin"; echo "$bin $(healthy_ms)"
  done
done
