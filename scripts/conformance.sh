#!/usr/bin/env bash
# DMTF Redfish conformance of rackpool: builds bin/rackpool, serves it over
# HTTPS (self-signed) with an instant fabric clock on a free port and a
# fresh state directory, composes one system (a GPU, an NVMe and a SAS
# drive, a memory block, a NIC) so composed resources and their inventory exist,
# then runs the three DMTF validators:
#
#   service   rf_service_validator  schema conformance of every GET (DSP8010
#             CSDL from testdata/redfish-dmtf/csdl + the OEM schema the
#             service serves)
#   protocol  rf_protocol_validator DSP0266 protocol rules
#   interop   rf_interop_validator  conformance/rackpool-composability.json
#   usecases  rf_use_case_checkers  DMTF's Use Case Checkers: accounts, power
#             control, boot override, the Manager's interfaces, query
#             parameters (run last: they change accounts, power and boot;
#             from .venv-tools)
#
# Usage: scripts/conformance.sh            (or: make conformance)
# Env:   CONFORMANCE_OUT  report directory (default build/conformance)
#        CONFORMANCE_ONLY space-separated subset of "service protocol interop usecases fm"
#                         (fm: scripts/conformance-fm.sh, the fabric emulators)
#        GO               go command (default go)
#
# Reports: $CONFORMANCE_OUT/{service,protocol,interop}/ (HTML, Excel, TSV,
# JSON as each validator writes them) and findings.txt in each (every FAIL,
# WARN and error, grouped). Exit status 0 only when no validator reports a
# FAIL or an error (see scripts/conformance.py for how they are counted).
# Needs Go and Python 3; scripts/pyenv.sh makes the .venv-rf environment
# (apt-get installing python3-venv when missing). The validators run offline.
set -euo pipefail

# shellcheck source=scripts/conformance-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/conformance-lib.sh"
out=${CONFORMANCE_OUT:-build/conformance}
only=${CONFORMANCE_ONLY:-service protocol interop usecases fm}

rm -rf "$out"
mkdir -p "$out"
data=$(mktemp -d)
server_pid=
cleanup() {
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$data"
}
trap cleanup EXIT

user=Administrator
pass="Conformance-${RANDOM}${RANDOM}-Pw"
port=$("$py" "$helper" freeport)
base=https://127.0.0.1:$port
log "serving $base (state in $data, log in $out/server.log)"
# No TLS flags: HTTPS with the service's own CA (DATA/tls/ca.pem) is the
# default, and that is what the validators check.
RACKPOOL_ADMIN_PASSWORD=$pass ./bin/rackpool serve --addr "127.0.0.1:$port" --data "$data" \
	--fabric-time instant >"$out/server.log" 2>&1 &
server_pid=$!
export REQUESTS_CA_BUNDLE=$data/tls/ca.pem
if ! "$py" "$helper" wait "$base/redfish/v1" 30; then
	tail -20 "$out/server.log" >&2
	exit 2
fi

log "composing one system"
"$py" "$helper" compose "$base" "$user" "$pass" \
	'{"Name":"conformance","Links":{"ResourceBlocks":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/host1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/nvme1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/hdd1"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/memnode1-b01"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/nic1"}]}}'

"$py" "$helper" schemas "$base" "$csdl" "$out/csdl"
cp "$REQUESTS_CA_BUNDLE" "$out/ca.pem"

profile=conformance/rackpool-composability.json

# --- validators ------------------------------------------------------------
declare -A rc
run() { # name command...
	local name=$1
	shift
	log "$name validator"
	mkdir -p "$out/$name"
	rc[$name]=0
	timeout 1200 "$@" >"$out/$name/stdout.txt" 2>&1 || rc[$name]=$?
	tail -3 "$out/$name/stdout.txt"
}
for v in $only; do
	case $v in
	service)
		run service "$venv/bin/rf_service_validator" --rhost "$base" -u "$user" -p "$pass" \
			--schema_directory "$out/csdl" --skipschema --logdir "$out/service"
		;;
	protocol)
		run protocol "$venv/bin/rf_protocol_validator" -r "$base" -u "$user" -p "$pass" \
			--report-dir "$out/protocol" --ca-bundle "$REQUESTS_CA_BUNDLE" --avoid-http-redirect
		;;
	interop)
		echo "profile: $profile"
		run interop "$venv/bin/rf_interop_validator" -u "$user" -p "$pass" -r "$base" \
			--logdir "$out/interop" "$profile"
		;;
	usecases)
		run usecases .venv-tools/bin/rf_use_case_checkers -u "$user" -p "$pass" -r "$base" \
			--report-dir "$out/usecases"
		;;
	fm)
		log "fm: scripts/conformance-fm.sh"
		rc[fm]=0
		CONFORMANCE_OUT=$out/fm GO=$GO scripts/conformance-fm.sh >"$out/fm.txt" 2>&1 || rc[fm]=$?
		sed -n '/^== summary/,$p' "$out/fm.txt"
		;;
	*)
		echo "unknown validator $v" >&2
		exit 2
		;;
	esac
done

# --- summary ---------------------------------------------------------------
log "summary (details: $out/<validator>/findings.txt)"
status=0
for v in $only; do
	[[ $v == fm ]] && { [[ ${rc[fm]} -eq 0 ]] || status=1; continue; }
	"$py" "$helper" summary "$v" "$out/$v" "${rc[$v]}" "$out/$v/stdout.txt" || status=1
done
for v in $only; do
	[[ $v == fm ]] && continue
	if grep -q '^\(FAIL\|ERROR\)' "$out/$v/findings.txt"; then
		echo
		echo "$v:"
		grep '^\(FAIL\|ERROR\)' "$out/$v/findings.txt" | head -40
	fi
done
if [[ $status -ne 0 ]]; then
	echo
	echo "conformance: FAILED"
else
	echo
	echo "conformance: OK"
fi
exit $status
