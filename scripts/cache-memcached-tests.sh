#!/usr/bin/env bash
# Runs memcached's own test suite (memcached 1.6.18's t/*.t with
# t/lib/MemcachedTest.pm, carried in testdata/memcached-1.6.18) against a
# rackpool binary:
#
#   scripts/cache-memcached-tests.sh BIN [t/FILE.t ...]
#
# BIN is a rackpool binary (go build ./cmd/rackpool). With no file named it
# runs every .t file in testdata/memcached-1.6.18/t: the ones that apply to
# rackpool cache (docs/cache.md lists the others and why they are left out).
#
# MemcachedTest.pm starts "$builddir/timedrun 600 $builddir/memcached-debug
# ARGS" itself, with builddir its working directory, and decides what the
# server supports from `memcached-debug -h`. This script makes a temporary
# builddir in which t/ is the carried folder, timedrun is coreutils'
# timeout, and memcached-debug is this script with --as-memcached, which
# translates memcached's options into `rackpool cache` flags (below) and
# execs BIN; an option rackpool cache does not have is refused, so a test
# that needs one fails instead of passing against a different server.
#
# Needs perl with prove and Test::More (Debian's perl, which scripts/setup.sh
# installs); installs nothing. Prints prove's summary and exits non-zero if
# a test failed.
set -euo pipefail

# --as-memcached ARGS: memcached's command line, translated into
# `rackpool cache` (RACKPOOL_BIN). Accepted:
#   -p PORT, -l ADDR   --addr ADDR:PORT (ADDR defaults to 127.0.0.1)
#   -m MB              --local-memory MB MiB
#   -I SIZE            --max-item-size (memcached's k/m suffixes)
#   -U PORT            ignored: rackpool cache serves no UDP, and
#                      MemcachedTest.pm adds a UDP port to every server
#   -u USER, -o relaxed_privileges
#                      ignored: rackpool cache never changes user
#   -t THREADS         ignored: Go schedules connections over all cores
#   -o no_modern, no_lru_crawler, no_lru_maintainer, slab_chunk_max=N
#                      ignored: they tune mechanisms rackpool cache does not
#                      have (LRU crawler and maintainer, slab mover,
#                      segmented LRU, chunked items: it stores values whole)
#   -h                 a help text naming none of the features MemcachedTest
#                      probes for (sasl, ext_path, proxy_config, enable-ssl,
#                      unix-socket), so the suite does not try them
as_memcached() {
	local host=127.0.0.1 port=11211 args=() size
	while [[ $# -gt 0 ]]; do
		case $1 in
		-h)
			echo "memcached 1.6.18 (rackpool cache through scripts/cache-memcached-tests.sh)"
			echo "-p <num>   TCP port"
			echo "-l <addr>  interface to listen on"
			echo "-m <num>   item memory in megabytes"
			echo "-I <num>   largest item (k, m suffixes)"
			exit 0
			;;
		-p)
			port=$2
			shift
			;;
		-l)
			host=$2
			shift
			;;
		-m)
			args+=(--local-memory "$2MiB")
			shift
			;;
		-I)
			size=$2
			case $size in
			*[kK]) size=${size%?}KiB ;;
			*[mM]) size=${size%?}MiB ;;
			esac
			args+=(--max-item-size "$size")
			shift
			;;
		-U | -u | -t) shift ;;
		-o)
			local opt
			for opt in ${2//,/ }; do
				case $opt in
				relaxed_privileges | no_modern | no_lru_crawler | no_lru_maintainer | slab_chunk_max=*) ;;
				*)
					echo "memcached option -o $opt: rackpool cache has no such setting" >&2
					exit 64
					;;
				esac
			done
			shift
			;;
		*)
			echo "memcached option $1: rackpool cache has no such setting" >&2
			exit 64
			;;
		esac
		shift
	done
	exec "$RACKPOOL_BIN" cache --addr "$host:$port" "${args[@]}"
}

if [[ ${1:-} == --as-memcached ]]; then
	shift
	as_memcached "$@"
fi

if [[ $# -lt 1 ]]; then
	echo "usage: $0 BIN [t/FILE.t ...]" >&2
	exit 2
fi
bin=$(realpath "$1")
shift
[[ -x $bin ]] || {
	echo "cache-memcached-tests: $bin is not an executable" >&2
	exit 2
}

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
suite=$root/testdata/memcached-1.6.18
self=$root/scripts/cache-memcached-tests.sh
missing() {
	echo "cache-memcached-tests: $1 is missing: run scripts/setup.sh (make test runs it)" >&2
	exit 2
}
command -v prove >/dev/null || missing "prove (Debian's perl)"
perl -MTest::More -e 1 2>/dev/null || missing "Test::More (Debian's perl)"
command -v timeout >/dev/null || missing "timeout (coreutils)"

builddir=$(mktemp -d "${TMPDIR:-/tmp}/memcached-tests-XXXXXX")
trap 'rm -rf "$builddir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
ln -s "$suite/t" "$builddir/t"
# The servers' logs (and a refused option's message) go to servers.log,
# shown when a test fails.
cat >"$builddir/memcached-debug" <<EOF
#!/bin/sh
RACKPOOL_BIN='$bin' exec '$self' --as-memcached "\$@" 2>>'$builddir/servers.log'
EOF
# memcached's timedrun SECONDS CMD: CMD, killed after SECONDS. Every
# process of a run stays in the script's process group (timeout's
# --foreground keeps it there), so a signal to the group (Ctrl-C, a test's
# cleanup) stops the servers too.
cat >"$builddir/timedrun" <<'EOF'
#!/bin/sh
secs=$1
shift
exec timeout --foreground "$secs" "$@"
EOF
chmod +x "$builddir/memcached-debug" "$builddir/timedrun"

files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
	for f in "$suite"/t/*.t; do files+=("t/${f##*/}"); done
fi
cd "$builddir"
if prove "${files[@]}"; then
	exit 0
fi
echo "cache-memcached-tests: the servers' last log lines:" >&2
tail -n 40 servers.log >&2 || true
exit 1
