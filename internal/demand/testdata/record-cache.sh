#!/bin/sh
# Records `rackpool cache` (512 MiB of local memory) under cache-load.py's
# load, then stops it with SIGTERM. Usage: record-cache.sh OUT.csv [PORT]
# with $RACKPOOL the rackpool binary (default: rackpool on $PATH).
set -e
out=$1; port=${2:-21911}
rackpool=${RACKPOOL:-rackpool}
here=$(dirname "$0")
"$rackpool" provision record --out "$out" --entity rackpool-cache -- \
	"$rackpool" cache --addr 127.0.0.1:"$port" --local-memory 512MiB &
rec=$!
sleep 1
python3 "$here/cache-load.py" 127.0.0.1 "$port"
# The cache is the recorder's one child.
cache=$(cat /proc/$rec/task/*/children | tr -s ' ' '\n' | grep . | head -1)
kill -TERM "$cache"
wait $rec
