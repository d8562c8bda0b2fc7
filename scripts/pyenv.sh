#!/usr/bin/env bash
# Creates the project's Python environments (gitignored), each from a
# pinned requirements file and made anew only when that file changed:
#
#   .venv-rf     scripts/conformance-requirements.txt: the DMTF Redfish
#                validators, the `redfish` and sushy clients, statsmodels,
#                pytest, and pymemcache's integration tests, which ship in its
#                sdist only (unpacked into .venv-rf/src for
#                scripts/cache-conformance.sh); any Python 3
#   .venv-tools  scripts/tools-requirements.txt: Ansible and DMTF's Use Case
#                Checkers for e2e/tools_test.go; Python 3.12 or newer (Ansible
#                14's floor), found as python3.13/python3.12 on PATH or in
#                pyenv's versions
#
# When `python3 -m venv` is unavailable (Debian without python3-venv) it
# apt-get installs it.
set -euo pipefail

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
# venv PYTHON DIR REQUIREMENTS: DIR holds REQUIREMENTS' packages. An
# environment built from other requirements is made anew, so that a package
# dropped from the list leaves it too.
venv() {
	local python=$1 venv=$2 req=$3
	if [[ -f $venv/.requirements ]] && ! cmp -s "$req" "$venv/.requirements"; then
		echo "pyenv: $req changed: making $venv anew"
		rm -rf "$venv"
	fi
	if [[ ! -x $venv/bin/python ]]; then
		echo "pyenv: creating $venv"
		rm -rf "$venv"
		if ! command -v "$python" >/dev/null || ! "$python" -m venv "$venv" >/dev/null 2>&1; then
			rm -rf "$venv"
			echo "pyenv: $python -m venv is unavailable; installing python3-venv with apt-get"
			sudo=
			if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
			$sudo apt-get update -q
			DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3 python3-venv
			"$python" -m venv "$venv" >/dev/null
		fi
	fi
	if ! cmp -s "$req" "$venv/.requirements"; then
		echo "pyenv: installing $req"
		"$venv/bin/pip" install --disable-pip-version-check -q -r "$req"
		cp "$req" "$venv/.requirements"
	fi
}

# python312 prints a Python 3.12 or newer.
python312() {
	local c
	for c in python3 python3.14 python3.13 python3.12; do
		if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
			command -v "$c"
			return
		fi
	done
	if command -v pyenv >/dev/null; then
		for c in "$(pyenv root)"/versions/3.1[2-9]*/bin/python3; do
			if [[ -x $c ]]; then
				echo "$c"
				return
			fi
		done
	fi
	return 1
}

venv python3 .venv-rf scripts/conformance-requirements.txt
if ! py312=$(python312); then
	echo "pyenv: no Python 3.12 or newer for .venv-tools (Ansible 14 needs one): install one (pyenv install 3.12) and rerun" >&2
	exit 1
fi
venv "$py312" .venv-tools scripts/tools-requirements.txt
venv=.venv-rf

# pymemcache's integration tests: the sdist, unpacked (never installed: the
# tests import the package from the unpacked tree).
pymemcache=4.0.0
if [[ ! -f $venv/src/pymemcache-$pymemcache/pymemcache/test/test_integration.py ]]; then
	echo "pyenv: fetching pymemcache $pymemcache's integration tests"
	rm -rf "$venv/src"
	mkdir -p "$venv/src"
	"$venv/bin/pip" download --disable-pip-version-check -q --no-deps --no-binary :all: \
		"pymemcache==$pymemcache" -d "$venv/src"
	tar -xzf "$venv/src/pymemcache-$pymemcache.tar.gz" -C "$venv/src"
	rm -f "$venv/src/pymemcache-$pymemcache.tar.gz"
fi
