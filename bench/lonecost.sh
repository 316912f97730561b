#!/usr/bin/env bash
# lonecost.sh: instructions Redis spends inside EVALSHA per submission from
# one producer (one script call each), dtq's Submit against asynq's Enqueue,
# counted by callgrind: the fixed cost of a lone submit, which no batching
# amortizes. Like scriptcost.sh, the count does not move with the machine's
# load.
#
# Needs valgrind (apt-get install -y valgrind) and redis-server on PATH.
# Usage: bench/lonecost.sh [tasks]   (default 2000)
set -euo pipefail
tasks=${1:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
real=$(command -v redis-server)
command -v valgrind >/dev/null || { echo "lonecost: valgrind is missing (apt-get install -y valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/redis-server" <<WRAP
#!/usr/bin/env bash
exec valgrind --tool=callgrind --callgrind-out-file=$work/cg.out.%p --toggle-collect=evalShaCommand "$real" "\$@"
WRAP
chmod +x "$work/redis-server"
(cd "$root/bench" && go build -o "$work/bench" .)
printf '%-6s %14s\n' system instr/submit
for sys in dtq asynq; do
  rm -f "$work"/cg.out.*
  PATH="$work:$PATH" DTQ_BENCH_CALLGRIND=1 "$work/bench" -system "$sys" -scenario enqueue -producers 1 \
    -n "$tasks" -listpack-value 64 >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  f=$(grep -l "^desc: Trigger: dump enqueue\$" "$work"/cg.out.* | tail -1)
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$f")
  printf '%-6s %14.0f\n' "$sys" "$((total / tasks))"
done
