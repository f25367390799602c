#!/usr/bin/env bash
# A/B of two node builds under an open-loop load: three local nodes per
# build, started fresh, warmed for 4 s, then RUNS 8-s runs of 1 KiB
# messages in batches of 128 (4 producers, 4 in flight) at RATE msgs/s,
# each followed by the leader's own p99s (hashicorp/raft's fsm.applyBatch
# and commitTime summaries, milliseconds, over their last 10 s: about that
# run), then one saturated 8-s run.
# The builds alternate, ROUNDS times. Usage:
#   go build -o /tmp/a/node ./cmd/node   # at the older commit (git worktree)
#   go build -o /tmp/b/node ./cmd/node && go build -o /tmp/b/raftmq ./cmd/raftmq
#   scripts/openloop-ab.sh /tmp/a/node /tmp/b/node /tmp/b/raftmq [rate] [runs] [rounds]
# A_ARGS and B_ARGS are extra node flags per build, e.g. to compare two
# configs of one build: B_ARGS="--config touch.toml" scripts/openloop-ab.sh N N CLI
set -euo pipefail
a=$1 b=$2 cli=$3 rate=${4:-28000} runs=${5:-3} rounds=${6:-2}
dir=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.05; done; done; pids=(); }
trap 'stop; rm -rf "$dir"' EXIT
servers=127.0.0.1:19101,127.0.0.1:19102,127.0.0.1:19103
peers=n1=127.0.0.1:17101,n2=127.0.0.1:17102,n3=127.0.0.1:17103
start() {
  for i in 1 2 3; do
    "$1" --id "n$i" --dir "$dir/data/n$i" --raft-addr "127.0.0.1:1710$i" --api-addr "127.0.0.1:1910$i" \
      --http-addr "127.0.0.1:1810$i" --remoting-addr= --namesrv-addr= --peers "$peers" --bootstrap $2 \
      >"$dir/n$i.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 600); do
    if curl -sf -o /dev/null http://127.0.0.1:18101/healthz && curl -sf -o /dev/null http://127.0.0.1:18102/healthz &&
      curl -sf -o /dev/null http://127.0.0.1:18103/healthz; then break; fi
    sleep 0.05
  done
  "$cli" --server "$servers" --quiet topic create T >/dev/null
}
load() { "$cli" --server "$servers" bench produce -t T -n 0 -s 1024 -c 4 --inflight 4 --batch 128 "$@" 2>&1 | tail -1; }
leader() { "$cli" --server "$servers" cluster status | awk 'NR == 1 { sub(/^leader n/, ""); print $1 }'; }
for round in $(seq 1 "$rounds"); do
  for v in a b; do
    bin=$a args=${A_ARGS:-}; [ "$v" = b ] && bin=$b args=${B_ARGS:-}
    start "$bin" "$args"
    load --duration 4s --rate "$rate" >/dev/null
    l=$(leader)
    for _ in $(seq 1 "$runs"); do
      r=$(load --duration 8s --rate "$rate" | grep -o 'p50 [0-9.]* ms, p99 [0-9.]* ms' || true)
      m=$(curl -s "http://127.0.0.1:1810$l/metrics" | grep -E '^raftmq_raft_(fsm_applyBatch|commitTime)\{quantile="0.99"' |
        awk '{printf "%s=%.1f ", $1, $2}' | sed 's/raftmq_raft_//g; s/{quantile="0.99"}//g' || true)
      echo "round $round $v open loop $rate msgs/s: $r | leader p99 ms: $m"
    done
    echo "round $round $v saturated: $(load --duration 8s | grep -o '= [0-9]* msg/s' || true)"
    stop
    rm -rf "$dir/data"
  done
done
