#!/usr/bin/env bash
# ab.sh: two builds of dtq and asynq side by side, alternated run by run so
# that a change of load falls on all three alike: every case, each system
# once, then again, ROUNDS times; then the medians. Each run is a fresh
# process with its own redis-server at Redis's defaults plus noeviction
# (-listpack-value 64).
#
# Usage: bench/ab.sh BEFORE-REV [ROUNDS]   (default 3 rounds; "after" is the
# working tree). Needs git and python3. About 3 minutes a round.
# Prints one JSON line per run (stderr) and the table of medians (stdout).
set -euo pipefail
before=${1:?usage: bench/ab.sh BEFORE-REV [ROUNDS]}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/before" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

git -C "$root" worktree add -q --detach "$work/before" "$before"
(cd "$work/before/bench" && go build -o "$work/bench-before" .)
(cd "$root/bench" && go build -o "$work/bench-after" .)

cases=(
  "submit, 1 producer|-scenario enqueue -producers 1 -n 10000"
  "submit, 16 producers|-scenario enqueue -producers 16 -n 50000"
  "submit, 16 producers, keys / TaskID|-scenario enqueue -producers 16 -idem -n 50000"
  "produce + consume|-scenario pc -producers 16 -concurrency 32 -n 50000"
  "end to end|-scenario e2e -concurrency 32 -n 50000"
  "2,000/s|-scenario latency -rate 2000 -duration 10s"
  "2,000/s, events: outcomes|-scenario latency -rate 2000 -duration 10s -events outcomes"
)
for round in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    name=${c%%|*}
    read -r -a args <<<"${c#*|}"
    for build in before after asynq; do
      bin=$work/bench-$build sys=dtq
      if [ "$build" = asynq ]; then
        bin=$work/bench-after sys=asynq
        [[ " ${args[*]} " == *" -events "* ]] && continue # a dtq setting
      fi
      line=$("$bin" -system "$sys" -listpack-value 64 "${args[@]}" 2>/dev/null | grep '^{')
      echo "{\"round\":$round,\"case\":\"$name\",\"build\":\"$build\",\"load\":$(cut -d' ' -f1 /proc/loadavg),\"result\":$line}" |
        tee -a "$work/runs.jsonl" >&2
    done
  done
done

python3 - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cases, runs = [], {}
for r in rows:
    if r["case"] not in cases:
        cases.append(r["case"])
    runs.setdefault((r["case"], r["build"]), []).append(r["result"])
print("| case | build | tasks/s | runs | p50 / p99 ms | cmds/task | Redis CPU µs/task | bytes/task |")
print("|---|---|---:|---|---|---:|---:|---:|")
for c in cases:
    for b in ("before", "after", "asynq"):
        rs = runs.get((c, b))
        if not rs:
            continue
        med = lambda k: statistics.median(x.get(k, 0) for x in rs)
        each = " · ".join(f"{x['tasks_per_second']:,.0f}" for x in rs)
        lat = f"{med('p50_ms'):.2f} / {med('p99_ms'):.2f}" if "/s" in c else ""
        mem = f"{med('redis_bytes_per_task'):.0f}" if c.startswith("submit") else ""
        print(f"| {c} | {b} | {med('tasks_per_second'):,.0f} | {each} | {lat} | "
              f"{med('redis_commands_per_task'):.1f} | {med('redis_cpu_us_per_task'):.1f} | {mem} |")
PY
