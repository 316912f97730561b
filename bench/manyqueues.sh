#!/usr/bin/env bash
# manyqueues.sh: does the number of registered queues slow the API down?
# Builds dtq, starts a private redis-server and `dtq api` (which relays the
# workflow outboxes of every registered queue), registers N queues
# (PUT /api/v1/queues/{q}), waits for the API to pick them up, then measures
# submit latency with wrk (1 thread, 4 connections, 10 s, --latency) and
# reads /ready. Runs for 1 queue and for QUEUES queues, RUNS times each,
# alternated, so the two sit side by side in one run.
#
# Needs wrk (apt-get install -y wrk), curl and redis-server on PATH.
# Usage: bench/manyqueues.sh [runs] [queues]   (default 3 runs, 1000 queues)
set -euo pipefail
runs=${1:-3}
many=${2:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v wrk >/dev/null || { echo "manyqueues.sh: wrk is missing (apt-get install -y wrk)" >&2; exit 2; }
work=$(mktemp -d)
rport=$((20000 + RANDOM % 10000))
aport=$((rport + 1))
cleanup() {
  [ -n "${api:-}" ] && kill "$api" 2>/dev/null || true
  redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$root/cmd/dtq" && go build -o "$work/dtq" .)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
  --maxmemory-policy noeviction --dir "$work" --daemonize yes --logfile "$work/redis.log"
base="http://127.0.0.1:$aport"
for run in $(seq "$runs"); do
  for n in 1 "$many"; do
    redis-cli -p "$rport" flushall >/dev/null
    DTQ_REDIS_URL="redis://127.0.0.1:$rport" DTQ_API_ADDR="127.0.0.1:$aport" DTQ_MAX_QUEUE_DEPTH=100000000 \
      "$work/dtq" api >"$work/api.log" 2>&1 &
    api=$!
    for _ in $(seq 100); do curl -sf "$base/health" >/dev/null && break; sleep 0.1; done
    seq 0 $((n - 1)) | xargs -P 8 -I{} curl -sf -o /dev/null -X PUT "$base/api/v1/queues/mq{}"
    sleep 5 # the API looks for new queues every 2 s
    out=$(wrk -t1 -c4 -d10s --latency -s "$root/bench/post.lua" "$base/api/v1/tasks")
    ready=$(curl -s -o /dev/null -w '%{http_code}' "$base/ready")
    conns=$(redis-cli -p "$rport" info clients | awk -F: '/^connected_clients/ {print $2+0}')
    blocked=$(redis-cli -p "$rport" info clients | awk -F: '/^blocked_clients/ {print $2+0}')
    kill "$api"; wait "$api" 2>/dev/null || true; api=
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    echo "run $run, $n queues: ${rps} req/s, p50 ${p50}, p99 ${p99}, /ready ${ready}, redis clients ${conns} (${blocked} blocked)"
  done
done
