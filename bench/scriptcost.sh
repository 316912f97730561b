#!/usr/bin/env bash
# scriptcost.sh: instructions per task that Redis spends inside dtq's hot
# scripts (ingest, claim, success finalize), counted by callgrind. Unlike
# time, the count does not move with the machine's load, so two versions of
# a script can be compared on a busy machine.
#
# Needs valgrind (apt-get install -y valgrind) and redis-server on PATH.
# Usage: bench/scriptcost.sh [tasks]   (default 2000; the server runs ~50x
# slower under callgrind)
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
PATH="$work:$PATH" DTQ_SCRIPT_COST_DUMPS=1 go test -run '^$' -bench '^BenchmarkLifecycleScripts$' \
  -benchtime "${tasks}x" -count 1 ./internal/rdb >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }

printf '%-8s %14s\n' script instr/task
for phase in ingest claim succeed; do
  f=$(grep -l "^desc: Trigger: dump $phase\$" "$work"/cg.out.* | tail -1)
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$f")
  printf '%-8s %14.0f\n' "$phase" "$((total / tasks))"
done
