#!/usr/bin/env bash
# wrk.sh: HTTP submit throughput. Builds dtq, starts a private redis-server
# (Redis's defaults + noeviction) and `dtq api` as its own process (request
# logging at its default level, INFO), and runs wrk against POST
# /api/v1/tasks (2 threads, 64 keep-alive connections, 10 s), RUNS times.
# With "keyed", every request carries an Idempotency-Key of its own.
#
# Needs wrk (apt-get install -y wrk) and redis-server on PATH.
# Usage: bench/wrk.sh [runs] [keyed]   (default 3 runs, no keys)
set -euo pipefail
runs=${1:-3}
mode=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v wrk >/dev/null || { echo "wrk.sh: wrk is missing (apt-get install -y wrk)" >&2; exit 2; }
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
for run in $(seq "$runs"); do
  redis-cli -p "$rport" flushall >/dev/null
  DTQ_REDIS_URL="redis://127.0.0.1:$rport" DTQ_API_ADDR="127.0.0.1:$aport" DTQ_MAX_QUEUE_DEPTH=100000000 \
    "$work/dtq" api >"$work/api.log" 2>&1 &
  api=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$aport/health" >/dev/null && break; sleep 0.1; done
  out=$(wrk -t2 -c64 -d10s -s "$root/bench/post.lua" "http://127.0.0.1:$aport/api/v1/tasks" -- "$mode")
  kill "$api"; wait "$api" 2>/dev/null || true; api=
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  lat=$(awk '/Latency/ {print $2; exit}' <<<"$out")
  bad=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  echo "run $run: ${rps} req/s, mean latency ${lat}${bad:+, non-2xx ${bad}}"
done
