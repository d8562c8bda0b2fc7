#!/usr/bin/env bash
# The body of `make test` (after scripts/setup.sh and the console bundle
# check): every test, every benchmark once, DMTF conformance, and a last
# check that nothing was left behind.
#
# Two lanes run side by side, as the cores allow:
#   tests    go vet, then the Go tests under the race detector, unit and
#            end-to-end (RACKPOOL_E2E=1: a missing tool fails, never skips)
#   smokes   every Go benchmark once, each bench/ program on its smallest
#            setting, the simulator, and make conformance (the DMTF
#            validators against the real binary)
# Each step's output goes to build/test/<step>.log; a failing step's last
# lines are printed, and the run fails once both lanes are done.
# build/test/slowest.txt lists the tests that took 15 s or more.
#
# Everything runs with TMPDIR set to a folder of this run and with
# RACKPOOL_SUITE set to this run's ID in its environment. At the end
# scripts/leftovers.sh lists any process that carries the ID and any file
# left in that folder, and fails the run if it finds one; the folder and
# such processes are removed on every exit path, an interrupt included.
#
# Env: TEST_LANES=serial runs the lanes one after the other (less memory,
# longer); GO (default go).
set -euo pipefail

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
GO=${GO:-go}
export GO

RACKPOOL_SUITE="suite-$(date +%s)-$$"
export RACKPOOL_SUITE
suite_tmp=$(mktemp -d "${TMPDIR:-/tmp}/rackpool-test-XXXXXX")
chmod 1777 "$suite_tmp" # PostgreSQL runs as its own user under it
export TMPDIR=$suite_tmp
export RACKPOOL_E2E=1
logs=build/test
rm -rf "$logs"
mkdir -p "$logs"

finish() {
	local rc=$?
	trap - EXIT INT TERM HUP
	# Whatever is still running of this run (a lane interrupted mid-step).
	for job in $(jobs -p); do kill -TERM -- "-$job" 2>/dev/null || kill -TERM "$job" 2>/dev/null || true; done
	scripts/leftovers.sh --kill "$RACKPOOL_SUITE" "$suite_tmp" >/dev/null 2>&1 || true
	rm -rf "$suite_tmp"
	exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# step NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log and
# reports how it ended and how long it took.
step() {
	local name=$1 start rc=0
	shift
	start=$(date +%s)
	"$@" >"$logs/$name.log" 2>&1 || rc=$?
	local took=$(($(date +%s) - start))
	if [[ $rc -eq 0 ]]; then
		printf 'ok    %-22s %4ds\n' "$name" "$took"
	else
		printf 'FAIL  %-22s %4ds  (exit %d; %s)\n' "$name" "$took" "$rc" "$logs/$name.log"
		# gotestsum's summary of the failed tests, else the last lines.
		if grep -q '^=== Failed' "$logs/$name.log"; then
			sed -n '/^=== Failed/,$p' "$logs/$name.log" | head -150
		else
			tail -60 "$logs/$name.log"
		fi | sed "s/^/    $name: /"
	fi
	return $rc
}

# gotestsum runs go test with -json: the log shows each package and the
# failed tests' output, and the JSON gives each test's time.
GOTESTSUM=gotest.tools/gotestsum@v1.13.0

tests_lane() {
	local rc=0
	step vet "$GO" vet ./... || return 1
	step go-test "$GO" run "$GOTESTSUM" --format pkgname-and-test-fails --no-color \
		--jsonfile "$logs/go-test.json" -- -race -count=1 -timeout 20m ./... || rc=$?
	# The slowest tests, for whoever makes the suite faster.
	"$GO" run "$GOTESTSUM" tool slowest --jsonfile "$logs/go-test.json" --threshold 15s >"$logs/slowest.txt" 2>&1 || true
	return $rc
}

smokes_lane() {
	local ok=0
	step go-bench "$GO" test -count=1 -run '^$' -bench . -benchtime 1x ./internal/... || ok=1
	step bench-compose "$GO" run ./bench/compose -seconds 0.2 || ok=1
	step bench-compose-pg "$GO" run ./bench/compose -seconds 0.2 -large=false -store postgres || ok=1
	step build "$GO" build -o build/rackpool ./cmd/rackpool || return 1
	step bench-cache "$GO" run ./bench/cache -bin build/rackpool -quick -rtt-iters 500 -out build/bench-cache-smoke || ok=1
	step bench-drives "$GO" run ./bench/drives -bin build/rackpool -quick -drive-lease 2s -out build/bench-drives-smoke || ok=1
	step sim "$GO" run ./cmd/rackpool sim --quiet --scenario examples/sim/monet-5a.yaml --out build/sim-smoke || ok=1
	step bench-southbound "$GO" run ./bench/southbound -cycles 20 -bin build/rackpool -out build/bench-southbound-smoke || ok=1
	step bench-dra "$GO" run ./bench/dra -cycles 5 -bin build/rackpool -out build/bench-dra-smoke || ok=1
	step bench-slurm "$GO" run ./bench/slurm -cycles 1 -jobs 300 -bin build/rackpool -out build/bench-slurm-smoke || ok=1
	mkdir -p build/scaling-smoke
	step bench-scaling "$GO" run ./bench/scaling -bin build/rackpool -trays 16,42 -out build/scaling-smoke || ok=1
	step conformance scripts/conformance.sh || ok=1
	return $ok
}

started=$(date +%s)
echo "make test: run $RACKPOOL_SUITE, logs in $logs/"
rc_tests=0
rc_smokes=0
if [[ ${TEST_LANES:-parallel} == serial ]]; then
	tests_lane || rc_tests=$?
	smokes_lane || rc_smokes=$?
else
	set -m # each lane in a process group of its own, for finish to stop
	tests_lane &
	tests_pid=$!
	smokes_lane &
	smokes_pid=$!
	set +m
	wait "$tests_pid" || rc_tests=$?
	wait "$smokes_pid" || rc_smokes=$?
fi

rc_left=0
step leftovers scripts/leftovers.sh "$RACKPOOL_SUITE" "$suite_tmp" || rc_left=$?
echo "make test: $(($(date +%s) - started)) s"
if [[ $rc_tests -ne 0 || $rc_smokes -ne 0 || $rc_left -ne 0 ]]; then
	echo "make test: FAILED (see the FAIL lines above)"
	exit 1
fi
echo "make test: all passed"
