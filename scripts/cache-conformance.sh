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
#    the pinned sdist) with pytest, in the virtual environment
#    build/pyenv-cache (gitignored).
#
# Both suites flush the server. Missing tools are installed: memccapable
# with apt-get (as root, or with sudo), pytest and the pymemcache sdist from
# PyPI. Prints "memccapable: N passed, M failed" and pytest's summary, and
# exits non-zero if either suite failed.
set -euo pipefail

PYMEMCACHE_VERSION=4.0.0
PYTEST_VERSION=7.4.4

if [[ $# -lt 1 ]]; then
	echo "usage: $0 HOST:PORT | BIN [ARGS...]" >&2
	exit 2
fi

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"

server_pid=
cleanup() {
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
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

# Wait until the server answers (at most 10 s).
for _ in $(seq 100); do
	if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
		break
	fi
	sleep 0.1
done

sudo=
if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
apt_install() {
	$sudo apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@" >/dev/null
}

status=0

# --- memccapable -------------------------------------------------------------
if ! command -v memccapable >/dev/null; then
	echo "cache-conformance: installing libmemcached-tools (memccapable)"
	apt_install libmemcached-tools
fi
mc_log=$(mktemp)
# shellcheck disable=SC2086 # MEMCCAPABLE_FLAGS is a list of flags
if memccapable -t 10 ${MEMCCAPABLE_FLAGS:-} -h "$host" -p "$port" >"$mc_log" 2>&1; then :; else status=1; fi
cat "$mc_log"
passed=$(grep -ci '\[pass\]' "$mc_log" || true)
failed=$(grep -ci '\[fail\]' "$mc_log" || true)
echo "memccapable: $passed passed, $failed failed"
if [[ $failed -ne 0 || $passed -eq 0 ]]; then status=1; fi
rm -f "$mc_log"

# --- pymemcache integration tests ------------------------------------------
venv=build/pyenv-cache
if [[ ! -x $venv/bin/python ]]; then
	echo "cache-conformance: creating $venv"
	rm -rf "$venv"
	if ! python3 -m venv "$venv" >/dev/null 2>&1; then
		rm -rf "$venv"
		apt_install python3 python3-venv
		python3 -m venv "$venv"
	fi
fi
if [[ ! -f $venv/.installed-$PYMEMCACHE_VERSION ]]; then
	"$venv/bin/pip" install --disable-pip-version-check -q "pytest==$PYTEST_VERSION"
	rm -rf "$venv/src"
	mkdir -p "$venv/src"
	# The integration tests ship in the sdist only.
	"$venv/bin/pip" download --disable-pip-version-check -q --no-deps --no-binary :all: \
		"pymemcache==$PYMEMCACHE_VERSION" -d "$venv/src"
	tar -xzf "$venv/src/pymemcache-$PYMEMCACHE_VERSION.tar.gz" -C "$venv/src"
	touch "$venv/.installed-$PYMEMCACHE_VERSION"
fi
src=$venv/src/pymemcache-$PYMEMCACHE_VERSION
# The test file comes first so that pytest loads its conftest.py (which adds
# --server and --port) before parsing them; -o addopts= drops the sdist's
# coverage options (pytest-cov is not needed); -m integration selects the
# tests that talk to the server (gevent and TLS variants skip).
if (cd "$src" && "$root/$venv/bin/python" -m pytest pymemcache/test/test_integration.py -q -p no:cacheprovider \
	-o addopts= -m integration --server "$host" --port "$port"); then :; else status=1; fi

exit $status
