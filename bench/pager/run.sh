#!/usr/bin/env bash
# Paging to pooled memory (the pager over TCP and from a mapped lease) against
# all local and a swap file (docs/paging.md):
# builds the benchmark and runs it, writing docs/paging-*.svg and the report
# (Markdown tables) to build/bench-pager/report.md. Extra arguments go to the
# benchmark, e.g.
#   bench/pager/run.sh -size 32MiB -swap=false
#   bench/pager/run.sh -runs 4 -prefetch none    (docs/paging.md's main table)
# The swap baseline needs root, a cgroup v1 memory controller and swapon.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mkdir -p build/bench-pager
go build -o build/bench-pager-run ./bench/pager
build/bench-pager-run -out docs "$@" | tee build/bench-pager/report.md
