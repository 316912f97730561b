#!/usr/bin/env bash
# faircost.sh: instructions per task that Redis spends inside the ingest,
# claim and success-finalize scripts for keyed tasks, with fairness off and
# on, over 1, 100 and 10,000 keys with ready tasks (BenchmarkFairLifecycle,
# counted by callgrind as in scriptcost.sh). The "off" rows are the fast
# path a queue without fairness, key_rate and key_order takes.
#
# Needs valgrind (apt-get install -y valgrind) and redis-server on PATH.
# Usage: bench/faircost.sh [tasks] [keys...]   (default 2000; 1 100 10000)
set -euo pipefail
tasks=${1:-2000}
shift || true
keysets=("$@")
[ ${#keysets[@]} -gt 0 ] || keysets=(1 100 10000)
root=$(cd "$(dirname "$0")/.." && pwd)
real=$(command -v redis-server)
command -v valgrind >/dev/null || { echo "faircost: valgrind is missing (apt-get install -y valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"' EXIT

cat >"$work/redis-server" <<WRAP
#!/usr/bin/env bash
exec valgrind --tool=callgrind --callgrind-out-file=$work/cg.out.%p --toggle-collect=evalShaCommand "$real" "\$@"
WRAP
chmod +x "$work/redis-server"

cd "$root"
printf '%-8s %7s %14s %14s %14s\n' fairness keys ingest/task claim/task succeed/task
for keys in "${keysets[@]}"; do
  for fair in off on; do
    rm -f "$work"/cg.out.*
    PATH="$work:$PATH" DTQ_SCRIPT_COST_DUMPS=1 DTQ_BENCH_KEYS="$keys" DTQ_BENCH_FAIR="$fair" \
      go test -run '^$' -bench '^BenchmarkFairLifecycle$' -benchtime "${tasks}x" -count 1 ./internal/rdb \
      >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
    row=()
    for phase in ingest claim succeed; do
      f=$(grep -l "^desc: Trigger: dump $phase\$" "$work"/cg.out.* | tail -1)
      total=$(awk '/^(summary|totals):/ {print $2; exit}' "$f")
      per=$tasks
      [ "$phase" = ingest ] && per=$((tasks + 2 * keys))
      row+=("$((total / per))")
    done
    printf '%-8s %7d %14d %14d %14d\n' "$fair" "$keys" "${row[@]}"
  done
done
