#!/usr/bin/env bash
# Creates the Python environment .venv-rf (gitignored) with the pinned DMTF
# Redfish validators and the `redfish` client library
# (scripts/conformance-requirements.txt), which scripts/conformance.sh and
# the e2e test driving rackpool with the `redfish` library use. Idempotent:
# reinstalls only when the requirements file changed. When `python3 -m venv`
# is unavailable (Debian without python3-venv) it apt-get installs it.
set -euo pipefail

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
venv=.venv-rf
req=scripts/conformance-requirements.txt

make_venv() { python3 -m venv "$venv" >/dev/null 2>&1; }
if [[ ! -x $venv/bin/python ]]; then
	echo "pyenv: creating $venv"
	rm -rf "$venv"
	if ! command -v python3 >/dev/null || ! make_venv; then
		rm -rf "$venv"
		echo "pyenv: python3 -m venv is unavailable; installing python3-venv with apt-get"
		sudo=
		if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
		$sudo apt-get update -q
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3 python3-venv
		make_venv
	fi
fi
if ! cmp -s "$req" "$venv/.requirements"; then
	echo "pyenv: installing $req"
	"$venv/bin/pip" install --disable-pip-version-check -q -r "$req"
	cp "$req" "$venv/.requirements"
fi
