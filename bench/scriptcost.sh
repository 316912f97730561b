#!/usr/bin/env bash
# scriptcost.sh: instructions per task that Redis spends inside dtq's hot
# scripts (ingest, claim, success finalize), counted by callgrind; then the
# instructions inside EVALSHA per submission from one producer (one script
# call each), dtq's Submit against asynq's Enqueue: the fixed cost of a lone
# submit, which no batching amortizes. Unlike time, the count does not move
# with the machine's load, so two versions of a script can be compared on a
# busy machine.
#
# Needs valgrind (apt-get install -y valgrind) and redis-server on PATH.
# Usage: bench/scriptcost.sh [tasks]   (default 2000; the server runs ~50x
# slower under callgrind). EVENTS=outcomes measures a queue with that event
# detail (dtq only).
set -euo pipefail
tasks=${1:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
real=$(command -v redis-server)
command -v valgrind >/dev/null || { echo "scriptcost: valgrind is missing (apt-get install -y valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"' EXIT

# A redis-server on PATH that runs the real one under callgrind, counting
# only what happens inside EVALSHA (evalShaCommand).
cat >"$work/redis-server" <<WRAP
#!/usr/bin/env bash
exec valgrind --tool=callgrind --callgrind-out-file=$work/cg.out.%p --toggle-collect=evalShaCommand "$real" "\$@"
WRAP
chmod +x "$work/redis-server"

cd "$root"
PATH="$work:$PATH" DTQ_SCRIPT_COST_DUMPS=1 DTQ_SCRIPT_COST_EVENTS="${EVENTS:-}" go test -run '^$' -bench '^BenchmarkLifecycleScripts$' \
  -benchtime "${tasks}x" -count 1 ./internal/rdb >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }

printf '%-8s %14s\n' script instr/task
for phase in ingest claim succeed; do
  f=$(grep -l "^desc: Trigger: dump $phase\$" "$work"/cg.out.* | tail -1)
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$f")
  printf '%-8s %14.0f\n' "$phase" "$((total / tasks))"
done

# One producer, one script call per submission: the bench's enqueue scenario
# zeroes the counts when its measured phase starts and dumps them at its end
# (DTQ_BENCH_CALLGRIND).
(cd "$root/bench" && go build -o "$work/bench" .)
printf '\n%-8s %14s\n' system instr/submit
for sys in dtq asynq; do
  rm -f "$work"/cg.out.*
  PATH="$work:$PATH" DTQ_BENCH_CALLGRIND=1 "$work/bench" -system "$sys" -scenario enqueue -producers 1 \
    -n "$tasks" -listpack-value 64 -events "${EVENTS:-}" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  f=$(grep -l "^desc: Trigger: dump enqueue\$" "$work"/cg.out.* | tail -1)
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$f")
  printf '%-8s %14.0f\n' "$sys" "$((total / tasks))"
done
