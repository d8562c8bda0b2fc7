#!/usr/bin/env bash
# rackpool sim against CloudSim Plus 8.5.7 on the same traces, side by side.
#   bench/sim/run.sh            # 10^5 requests on 2,500 hosts, all policies, both tools; 10^6 rackpool only
# Prints a markdown table for docs/benchmarks.md. Needs Go; the CloudSim part
# needs Java 17 and Maven (bench/cloudsim/run.sh installs them if missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/rackpool" ./cmd/rackpool
rp="$work/rackpool"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

"$rp" sim --scenario bench/sim/peer-100k.yaml --write-trace "$work/peer.csv"
echo "| policy | rackpool accepted | CloudSim Plus accepted | same ids | rackpool s | CloudSim Plus s | speed-up |"
echo "|---|---|---|---|---|---|---|"
for p in first-fit next-fit best-fit worst-fit; do
    "$rp" sim --quiet --trace "$work/peer.csv" --hosts 2500 --host-cores 4 --host-ram-gb 16 --policy "$p" --out "$work/rp-$p" --accepted-ids "$work/rp-$p.ids" > /dev/null
    ra=$(field "$work/rp-$p/summary.json" accepted)
    rs=$(field "$work/rp-$p/summary.json" wall_seconds)
    cs="$(bench/cloudsim/run.sh --trace "$work/peer.csv" --hosts 2500 --host-cores 4 --host-ram-gb 16 --policy "$p" \
        --submit dynamic --accepted-ids "$work/cs-$p.ids")"
    ca=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["accepted"])' "$cs")
    csec=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["wall_seconds"])' "$cs")
    same=NO
    cmp -s "$work/rp-$p.ids" "$work/cs-$p.ids" && same=yes
    python3 -c 'import sys; a,b=float(sys.argv[2]),float(sys.argv[3]); print(f"| {sys.argv[1]} | {sys.argv[4]} | {sys.argv[5]} | {sys.argv[6]} | {a:.2f} | {b:.1f} | {b/a:.0f}x |")' \
        "$p" "$rs" "$csec" "$ra" "$ca" "$same"
done
"$rp" sim --scenario bench/sim/speed-1m.yaml --write-trace "$work/speed.csv"
echo
echo "| 10^6 requests, 25,000 hosts x 4 cores | accepted | simulation s | whole command s |"
echo "|---|---|---|---|"
for p in first-fit next-fit best-fit worst-fit rackpool; do
    start=$(date +%s.%N)
    "$rp" sim --quiet --trace "$work/speed.csv" --hosts 25000 --host-cores 4 --host-ram-gb 16 --policy "$p" --out "$work/speed-$p" > /dev/null
    end=$(date +%s.%N)
    python3 -c 'import sys; print(f"| {sys.argv[1]} | {sys.argv[2]} | {float(sys.argv[3]):.2f} | {float(sys.argv[4]):.2f} |")' \
        "$p" "$(field "$work/speed-$p/summary.json" accepted)" "$(field "$work/speed-$p/summary.json" wall_seconds)" "$(echo "$end - $start" | bc)"
done
