#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: run each Go fuzz target of the package for
# SECONDS (default 10), one after another, and print one summary line per
# target. Exits non-zero if any target fails; a failing input is written to
# testdata/fuzz/<Target>/ by go and replays in every later `go test`.
#
# Environment: FUZZ_PARALLEL (default 1) is passed as -parallel;
# FUZZ_MINIMIZE (default 10s) as -fuzzminimizetime (go's default, 60s, can
# eat a short run minimizing one new input); FUZZ_TARGETS (space-separated)
# runs only those targets.
# Full-length run: scripts/fuzz.sh 600
set -euo pipefail

seconds=${1:-10}
case $seconds in
'' | *[!0-9]*)
	echo "usage: $0 [SECONDS]" >&2
	exit 2
	;;
esac
parallel=${FUZZ_PARALLEL:-1}
minimize=${FUZZ_MINIMIZE:-10s}

cd "$(dirname "$0")/.."
targets=${FUZZ_TARGETS:-$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' ./*_test.go)}
if [ -z "$targets" ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 2
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
summary=()
for t in $targets; do
	echo "== $t (${seconds}s)" >&2
	start=$(date +%s)
	run() { go test -run '^$' -fuzz "^${t}\$" -fuzztime "${seconds}s" -fuzzminimizetime "$minimize" -parallel "$parallel" . >"$log" 2>&1; }
	# go's fuzzing coordinator can give up on a worker that is slow to stop
	# at the end of a short run ("context deadline exceeded", no failing
	# input): that is the harness, not the target, so such a run goes again,
	# once.
	if run || { grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log" &&
		echo "   (the fuzzing harness timed out a worker; once more)" >&2 && run; }; then
		result=ok
	else
		result=FAIL
		failed=1
		cat "$log" >&2
	fi
	took=$(($(date +%s) - start))
	# go prints "fuzz: elapsed: 10s, execs: 12345 (1234/sec), new interesting: ..."
	# the last such line has the totals; its rate is only the last interval's.
	last=$(grep -o 'elapsed: [0-9]*s, execs: [0-9]*' "$log" | tail -n 1 || true)
	if [ -n "$last" ]; then
		el=$(echo "$last" | sed 's/elapsed: \([0-9]*\)s.*/\1/')
		ex=$(echo "$last" | sed 's/.*execs: //')
		execs="execs: $ex ($((ex / (el > 0 ? el : 1)))/sec over ${el}s)"
	else
		execs="execs: n/a"
	fi
	summary+=("$(printf '%-18s %-4s %4ss  %s' "$t" "$result" "$took" "$execs")")
done
printf '%s\n' "${summary[@]}"
exit "$failed"
