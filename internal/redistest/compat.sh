#!/usr/bin/env bash
# compat.sh NAME=/path/to/server ... runs dtq's suites that talk to Redis
# (the root package, internal/rdb, and cmd/dtq's fault and Cluster suites)
# against each server binary in turn, through DTQ_TEST_REDIS_SERVER (see
# package redistest); the server's cli is the -cli beside it. make
# test-compat calls it with SERVERS; docs/compatibility.md records results.
#
# Every binary is checked before any test runs: one that is missing or not
# executable fails the run at once, naming it. Then it prints, per server,
# its version (<server> --version), that the tests start it (redistest's
# TestServerIsServerBinary), each suite's result and duration, and a PASS or
# FAIL line; it exits non-zero if any suite failed.
#
# GO is the go command (default go); COMPAT_FLAGS adds go test flags (the
# default is none: no race detector, which make test already runs).
set -uo pipefail

GO=${GO:-go}
read -r -a flags <<<"${COMPAT_FLAGS:-}"
root=$(cd "$(dirname "$0")/../.." && pwd)

die() {
	echo "test-compat: $*" >&2
	exit 2
}

[ $# -gt 0 ] || die 'no servers given: make test-compat SERVERS="valkey-8.0=/path/to/valkey-server redis-7.4=/path/to/redis-server"'

names=() bins=() versions=()
for arg in "$@"; do
	name=${arg%%=*}
	bin=${arg#*=}
	if [ "$name" = "$arg" ] || [ -z "$name" ] || [ -z "$bin" ]; then
		die "$arg: want name=/path/to/server"
	fi
	case $bin in
	/*) ;;
	*) bin=$PWD/$bin ;;
	esac
	[ -e "$bin" ] || die "$name: server binary $bin is missing"
	[ -f "$bin" ] && [ -x "$bin" ] || die "$name: server binary $bin is not an executable file"
	case $(basename "$bin") in
	?*-server) cli=${bin%-server}-cli ;;
	*) die "$name: $bin: the server's name must end in -server (its cli is the -cli beside it)" ;;
	esac
	[ -e "$cli" ] || die "$name: cli $cli (beside the server) is missing"
	[ -f "$cli" ] && [ -x "$cli" ] || die "$name: cli $cli is not an executable file"
	version=$("$bin" --version 2>&1) || die "$name: $bin --version failed: $version"
	names+=("$name") bins+=("$bin") versions+=("$version")
done

# Each suite: a label, the module's directory, the packages.
suites=(
	"root|.|."
	"rdb|.|./internal/rdb/..."
	"fault|cmd/dtq|./internal/faultsuite/..."
	"cluster|cmd/dtq|./internal/clustersuite/..."
)

summary=()
failed=0
for i in "${!names[@]}"; do
	name=${names[$i]} bin=${bins[$i]}
	echo "== $name: $bin"
	echo "   ${versions[$i]}"
	result=PASS line=""
	# First, that the tests really start this binary (the server's own
	# INFO names its executable): a run against another server proves
	# nothing.
	echo "-- $name server (go test -count=1 -run '^TestServerIsServerBinary\$' -v ./internal/redistest)"
	if ! (cd "$root" && DTQ_TEST_REDIS_SERVER=$bin "$GO" test -count=1 -run '^TestServerIsServerBinary$' -v ./internal/redistest); then
		echo "FAIL $name: the tests do not start $bin: suites not run"
		summary+=("FAIL $name: server=FAIL")
		failed=1
		continue
	fi
	for s in "${suites[@]}"; do
		IFS='|' read -r label dir pkgs <<<"$s"
		echo "-- $name $label ($dir: go test -count=1 ${flags[*]} $pkgs)"
		start=$SECONDS
		if (cd "$root/$dir" && DTQ_TEST_REDIS_SERVER=$bin "$GO" test -count=1 "${flags[@]}" "$pkgs"); then
			r=PASS
		else
			r=FAIL result=FAIL failed=1
		fi
		took=$((SECONDS - start))
		echo "-- $name $label $r ${took}s"
		line+=" $label=$r(${took}s)"
	done
	echo "$result $name: ${versions[$i]}"
	summary+=("$result $name:$line")
done

echo "== test-compat summary"
printf '%s\n' "${summary[@]}"
exit $failed
