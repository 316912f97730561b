#!/usr/bin/env bash
# waiters.sh: what do long-polls on a large workflow cost the API?
# Builds dtq, starts a private redis-server and `dtq api`, submits one
# workflow of NODES independent nodes (nothing runs them: it stays running),
# then measures twice, idle and while WAITERS requests wait on the workflow
# (GET /api/v1/workflows/{id}?wait=60s): over 10 s without load, the API
# process's CPU time, Redis's CPU time and commands, and the API's resident
# memory (VmRSS); then the latency of unrelated submits (wrk -t1 -c4 -d10s
# --latency POST /api/v1/tasks). RUNS rounds, each on a new API.
#
# Needs wrk (apt-get install -y wrk), curl, python3 and redis-server on PATH.
# Usage: bench/waiters.sh [runs] [waiters] [nodes]   (default 3 50 10000)
set -euo pipefail
runs=${1:-3}
waiters=${2:-50}
nodes=${3:-10000}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v wrk >/dev/null || { echo "waiters.sh: wrk is missing (apt-get install -y wrk)" >&2; exit 2; }
work=$(mktemp -d)
rport=$((20000 + RANDOM % 10000))
aport=$((rport + 1))
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null || true
  redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$root/cmd/dtq" && go build -o "$work/dtq" .)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
  --maxmemory-policy noeviction --dir "$work" --daemonize yes --logfile "$work/redis.log"
base="http://127.0.0.1:$aport"
rpid=$(redis-cli -p "$rport" info server | awk -F: '/^process_id/ {print $2 + 0}')
python3 - "$nodes" >"$work/wf.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"name": "big", "nodes": [
    {"ref": f"n{i}", "queue": "wfq", "task_type": "t", "payload": {"i": i}} for i in range(n)]}))
PY
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cmds() { redis-cli -p "$rport" info stats | awk -F: '/^total_commands_processed/ {print $2 + 0}'; }
# quiet prints the CPU (ms) of the API and of Redis and Redis's commands
# over 10 s, and the API's VmRSS at the end.
quiet() {
  local a0 r0 c0
  a0=$(ticks "$api"); r0=$(ticks "$rpid"); c0=$(cmds)
  sleep 10
  echo "API CPU $(( ($(ticks "$api") - a0) * 10 )) ms, Redis CPU $(( ($(ticks "$rpid") - r0) * 10 )) ms, $(( $(cmds) - c0 )) Redis commands, RSS $(rss "$api") kB"
}
measure() {
  wrk -t1 -c4 -d10s --latency -s "$root/bench/post.lua" "$base/api/v1/tasks" |
    awk '/Requests\/sec/ {r=$2} $1 == "50%" {p50=$2} $1 == "99%" {p99=$2} END {printf "%s req/s, p50 %s, p99 %s", r, p50, p99}'
}
for run in $(seq "$runs"); do
  redis-cli -p "$rport" flushall >/dev/null
  DTQ_REDIS_URL="redis://127.0.0.1:$rport" DTQ_API_ADDR="127.0.0.1:$aport" DTQ_MAX_QUEUE_DEPTH=100000000 \
    "$work/dtq" api >"$work/api.log" 2>&1 &
  api=$!
  for _ in $(seq 100); do curl -sf "$base/health" >/dev/null && break; sleep 0.1; done
  id=$(curl -sf -X POST "$base/api/v1/workflows" -H 'Content-Type: application/json' --data-binary "@$work/wf.json" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["workflow_id"])')
  curl -sf -o /dev/null "$base/api/v1/workflows/$id" # one full read before either phase
  idle_quiet=$(quiet)
  idle=$(measure)
  pids=()
  for _ in $(seq "$waiters"); do
    curl -s -o /dev/null "$base/api/v1/workflows/$id?wait=60s" &
    pids+=($!)
  done
  sleep 1
  busy_quiet=$(quiet)
  busy=$(measure)
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$api/status")
  kill "$api"; wait "$api" 2>/dev/null || true
  echo "run $run, $nodes nodes, idle:       10 s quiet: ${idle_quiet}; submits: ${idle}"
  echo "run $run, $nodes nodes, $waiters waiters: 10 s quiet: ${busy_quiet}; submits: ${busy} (API peak RSS ${hwm} kB)"
done
