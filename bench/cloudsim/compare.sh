#!/usr/bin/env bash
# Checks CloudSim Plus against the Python reference on one trace, for every policy:
# same accepted count and the same accepted ids, in order.
#
#   bench/cloudsim/compare.sh TRACE HOSTS HOST_CORES HOST_RAM_GB [extra Replay args...]
#
# Extra args (e.g. --submit dynamic, --same-instant arrival-first) go to Replay;
# --same-instant also goes to reference.py. Exit status 1 if any policy differs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 4 ] || { sed -n 2,9p "$0" >&2; exit 2; }
trace=$1 hosts=$2 cores=$3 ram=$4
shift 4
extra=("$@")
ref_extra=()
for ((i = 0; i < ${#extra[@]}; i++)); do
    if [ "${extra[$i]}" = "--same-instant" ]; then ref_extra+=(--same-instant "${extra[$((i + 1))]}"); fi
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
status=0
for p in first-fit next-fit best-fit worst-fit; do
    common=(--trace "$trace" --hosts "$hosts" --host-cores "$cores" --host-ram-gb "$ram" --policy "$p")
    cs="$("$here/run.sh" "${common[@]}" --accepted-ids "$tmp/cs.ids" "${extra[@]}")"
    ref="$(python3 "$here/reference.py" "${common[@]}" --accepted-ids "$tmp/ref.ids" "${ref_extra[@]}")"
    if cmp -s "$tmp/cs.ids" "$tmp/ref.ids"; then verdict="ids identical"; else verdict="IDS DIFFER"; status=1; fi
    printf '%-9s requests=%s cloudsim=%s reference=%s  %s  (cloudsim %ss, reference %ss)\n' "$p" \
        "$(field requests <<<"$cs")" "$(field accepted <<<"$cs")" "$(field accepted <<<"$ref")" "$verdict" \
        "$(field wall_seconds <<<"$cs")" "$(field wall_seconds <<<"$ref")"
done
exit $status
