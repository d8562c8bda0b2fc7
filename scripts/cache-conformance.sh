#!/usr/bin/env bash
# Conformance of a running rackpool cache (or any memcached) with two
# independent client suites:
#
#   scripts/cache-conformance.sh HOST:PORT
#   scripts/cache-conformance.sh BIN [ARGS...]   # starts BIN ARGS..., which must
#                                                # listen on $CACHE_ADDR (default
#                                                # 127.0.0.1:22122), and stops it after
#
# 1. memccapable (libmemcached-tools): the text (ASCII) and binary protocol
#    tests. Set MEMCCAPABLE_FLAGS=-a to run the ASCII tests only.
# 2. pymemcache's integration tests (pymemcache/test/test_integration.py from
#    the pinned sdist) with pytest, in the project's environment .venv-rf.
#
# Both suites flush the server. scripts/setup.sh installs both (memccapable
# from Debian, pytest and pymemcache's tests into .venv-rf); this script
# installs nothing and stops when one is missing. Prints "memccapable: N
# passed, M failed" and pytest's summary, and exits non-zero if either suite
# failed.
set -euo pipefail

if [[ $# -lt 1 ]]; then
	echo "usage: $0 HOST:PORT | BIN [ARGS...]" >&2
	exit 2
fi

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"

venv=.venv-rf
pymemcache=4.0.0
src=$venv/src/pymemcache-$pymemcache
missing() {
	echo "cache-conformance: $1 is missing: run scripts/setup.sh (make test runs it)" >&2
	exit 2
}
command -v memccapable >/dev/null || missing "memccapable (Debian's libmemcached-tools)"
[[ -x $venv/bin/pytest ]] || missing "pytest in $venv"
[[ -f $src/pymemcache/test/test_integration.py ]] || missing "pymemcache's integration tests in $src"

server_pid=
mc_log=
cleanup() {
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ -n $mc_log ]]; then rm -f "$mc_log"; fi
}
trap cleanup EXIT

if [[ -x $1 && ! -d $1 ]]; then
	addr=${CACHE_ADDR:-127.0.0.1:22122}
	"$@" &
	server_pid=$!
else
	addr=$1
fi
host=${addr%:*}
port=${addr##*:}

# Wait until the server answers (at most 60 s, for a loaded machine).
up=
for _ in $(seq 600); do
	if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
		up=1
		break
	fi
	if [[ -n $server_pid ]] && ! kill -0 "$server_pid" 2>/dev/null; then
		break
	fi
	sleep 0.1
done
if [[ -z $up ]]; then
	echo "cache-conformance: nothing answers on $host:$port" >&2
	exit 2
fi

status=0

# --- memccapable -------------------------------------------------------------
mc_log=$(mktemp)
# shellcheck disable=SC2086 # MEMCCAPABLE_FLAGS is a list of flags
if memccapable -t 10 ${MEMCCAPABLE_FLAGS:-} -h "$host" -p "$port" >"$mc_log" 2>&1; then :; else status=1; fi
cat "$mc_log"
passed=$(grep -ci '\[pass\]' "$mc_log" || true)
failed=$(grep -ci '\[fail\]' "$mc_log" || true)
echo "memccapable: $passed passed, $failed failed"
if [[ $failed -ne 0 || $passed -eq 0 ]]; then status=1; fi

# --- pymemcache integration tests ------------------------------------------
# The test file comes first so that pytest loads its conftest.py (which adds
# --server and --port) before parsing them; -o addopts= drops the sdist's
# coverage options (pytest-cov is not needed); -m integration selects the
# tests that talk to the server (gevent and TLS variants skip).
#
# test_touch is deselected: it sets a key with a 1-second TTL and touches it
# next, and with memcached's whole-second clock (which rackpool cache keeps)
# such an item lives 0 to 1 s, so on a loaded machine the touch can come too
# late, against memcached as against us. internal/cache TestTouchOneSecondTTL
# runs the same steps on a clock the test holds.
if (cd "$src" && "$root/$venv/bin/python" -m pytest pymemcache/test/test_integration.py -q -p no:cacheprovider \
	-o addopts= -m integration --server "$host" --port "$port" \
	--deselect pymemcache/test/test_integration.py::test_touch); then :; else status=1; fi

exit $status
