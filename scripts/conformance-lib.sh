# Shared set-up of scripts/conformance.sh and scripts/conformance-fm.sh,
# sourced by both: the repository root as the working directory, the DMTF
# CSDL the repository carries (testdata/redfish-dmtf), the .venv-rf Python environment with the
# pinned validators (scripts/pyenv.sh), and bin/rackpool built once (a
# caller that already built it exports CONFORMANCE_BUILT=1).
# Defines: root csdl venv py helper GO, log().

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
csdl=$root/testdata/redfish-dmtf/csdl
venv=.venv-rf
GO=${GO:-go}

log() { printf '\n== %s\n' "$*"; }

if [[ ! -f $csdl/ServiceRoot_v1.xml ]]; then
	echo "DMTF CSDL missing from the repository ($csdl)" >&2
	exit 2
fi

scripts/pyenv.sh
py=$venv/bin/python
helper=scripts/conformance.py

if [[ ${CONFORMANCE_BUILT:-} != 1 ]]; then
	log "building bin/rackpool"
	mkdir -p bin
	$GO build -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/rackpool ./cmd/rackpool
	export CONFORMANCE_BUILT=1
fi
