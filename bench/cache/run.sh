#!/usr/bin/env bash
# rackpool cache against memcached and memcached+extstore on loopback (P0 §9,
# Fig. 9 and 10): builds rackpool and the benchmark, then runs the full
# benchmark into build/bench-cache/ (results.json, results.csv, penalty.svg,
# report.md, logs/). Extra arguments go to the benchmark, e.g.
#   bench/cache/run.sh -quick
#   bench/cache/run.sh -sizes 4KiB,64KiB -fractions 100,75
# Needs Go and memcached 1.6 (with extstore) on the PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mkdir -p build
go build -o build/rackpool ./cmd/rackpool
go build -o build/bench-cache-run ./bench/cache
out=build/bench-cache
mkdir -p "$out"
build/bench-cache-run -bin build/rackpool -out "$out" "$@" | tee "$out/report.md"
