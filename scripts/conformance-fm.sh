#!/usr/bin/env bash
# DMTF Redfish conformance of `rackpool fabric-emulator`: builds
# bin/rackpool and, for every fabric of the default rack (falcon1 PCIe, sas1
# SAS, vlan1 Ethernet, ocs1 optical) and the CXL fabric of
# examples/cxl-rack.yaml, serves it over HTTPS (its own CA) with an instant
# fabric clock on a free port, attaches something so zones, connections and
# tasks exist, and runs rf_service_validator against it offline (DSP8010
# CSDL from testdata/redfish-dmtf/csdl + the OEM schema the emulator
# serves).
#
# Usage: scripts/conformance-fm.sh [FABRIC...]   (default: all five)
# Env:   CONFORMANCE_OUT  report directory (default build/conformance-fm)
#        GO               go command (default go)
#
# Reports: $CONFORMANCE_OUT/<fabric>/ with findings.txt (every FAIL, WARN
# and error), counted by scripts/conformance.py. Exit status 0 only when no
# run reports a FAIL or an error.
set -euo pipefail

# shellcheck source=scripts/conformance-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/conformance-lib.sh"
out=${CONFORMANCE_OUT:-build/conformance-fm}
fabrics=("$@")
if [[ ${#fabrics[@]} -eq 0 ]]; then
	fabrics=(falcon1 sas1 vlan1 ocs1 cxl1)
fi

rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
pid=
stop() {
	if [[ -n $pid ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	fi
}
trap 'stop; rm -rf "$work"' EXIT

user=Administrator
pass="Conformance-${RANDOM}${RANDOM}-Fm"
export RACKPOOL_FM_PASSWORD=$pass

# post PATH BODY: a change; a 202 is already done with an instant fabric
# clock (its task stays for the validator to read).
post() {
	local code
	code=$(curl -sS -o "$work/answer" -w '%{http_code}' --cacert "$REQUESTS_CA_BUNDLE" -u "$user:$pass" \
		-H 'Content-Type: application/json' -X POST -d "$2" "$base$1")
	case $code in
	200 | 201 | 202) echo "POST $1: $code" ;;
	*)
		echo "POST $1: $code" >&2
		cat "$work/answer" >&2
		return 1
		;;
	esac
}
ep() { printf '{"@odata.id":"/redfish/v1/Fabrics/%s/Endpoints/%s"}' "$1" "$2"; }
zone() { # fabric initiator device...
	local f=$1 list
	shift
	list=$(for e in "$@"; do ep "$f" "$e"; echo; done | paste -sd, -)
	post "/redfish/v1/Fabrics/$f/Zones" "{\"ZoneType\":\"ZoneOfEndpoints\",\"Links\":{\"Endpoints\":[$list]}}"
}
connection() { # fabric initiator device domain block
	post "/redfish/v1/Fabrics/$1/Connections" "{\"ConnectionType\":\"Memory\",\"MemoryChunkInfo\":[{\"MemoryChunk\":{\"@odata.id\":\"/redfish/v1/Chassis/$3/MemoryDomains/$4/MemoryChunks/$5\"},\"AccessCapabilities\":[\"Read\",\"Write\"]}],\"Links\":{\"InitiatorEndpoints\":[$(ep "$1" "$2")],\"TargetEndpoints\":[$(ep "$1" "$3")]}}"
}

status=0
summaries=()
for f in "${fabrics[@]}"; do
	topo=()
	if [[ $f == cxl1 ]]; then
		topo=(--topology examples/cxl-rack.yaml)
	fi
	dir=$out/$f
	mkdir -p "$dir"
	port=$("$py" "$helper" freeport)
	base=https://127.0.0.1:$port
	data=$work/$f
	log "$f: serving $base (log in $dir/server.log)"
	./bin/rackpool fabric-emulator "${topo[@]}" --fabric "$f" --addr "127.0.0.1:$port" --data "$data" \
		--fabric-time instant --user "$user" >"$dir/server.log" 2>&1 &
	pid=$!
	export REQUESTS_CA_BUNDLE=$data/tls/ca.pem
	for _ in $(seq 100); do [[ -f $REQUESTS_CA_BUNDLE ]] && break; sleep 0.1; done
	if ! "$py" "$helper" wait "$base/redfish/v1" 30; then
		tail -20 "$dir/server.log" >&2
		exit 2
	fi
	case $f in
	falcon1)
		zone falcon1 host1-pcie gpu1 nvme1
		zone falcon1 host2-pcie
		;;
	sas1) zone sas1 host1-sas hdd1 ssd1 ;;
	vlan1) zone vlan1 host1-eth essd1 ;;
	ocs1)
		connection ocs1 host1-ocs-a memnode1 Memory memnode1-b01
		connection ocs1 host2-ocs-a memnode2 Memory memnode2-b03
		;;
	cxl1)
		connection cxl1 host1-cxl cxlmem1 Static cxlmem1-ld1
		connection cxl1 host2-cxl cxlmem2 Dynamic cxlmem2-x01
		;;
	esac
	"$py" "$helper" schemas "$base" "$csdl" "$dir/csdl" >/dev/null
	log "$f: service validator"
	rc=0
	timeout 1200 "$venv/bin/rf_service_validator" --rhost "$base" -u "$user" -p "$pass" \
		--schema_directory "$dir/csdl" --skipschema --logdir "$dir" >"$dir/stdout.txt" 2>&1 || rc=$?
	tail -3 "$dir/stdout.txt"
	stop
	line=$("$py" "$helper" summary "fm-$f" "$dir" "$rc" "$dir/stdout.txt") || status=1
	summaries+=("$line")
	if grep -q '^\(FAIL\|ERROR\)' "$dir/findings.txt"; then
		grep '^\(FAIL\|ERROR\)' "$dir/findings.txt" | head -40
	fi
done

log "summary (details: $out/<fabric>/findings.txt)"
printf '%s\n' "${summaries[@]}"
if [[ $status -ne 0 ]]; then
	echo "conformance-fm: FAILED"
else
	echo "conformance-fm: OK"
fi
exit $status
