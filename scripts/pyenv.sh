#!/usr/bin/env bash
# Creates the project's one Python environment, .venv-rf (gitignored), with
# the pinned test-only tools of scripts/conformance-requirements.txt (the
# DMTF Redfish validators, the `redfish` and sushy clients, statsmodels,
# pytest) and pymemcache's integration tests, which ship in its sdist only
# (unpacked into .venv-rf/src for scripts/cache-conformance.sh). Idempotent:
# makes the environment anew only when the requirements file changed. When `python3 -m venv`
# is unavailable (Debian without python3-venv) it apt-get installs it.
set -euo pipefail

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
venv=.venv-rf
req=scripts/conformance-requirements.txt

make_venv() { python3 -m venv "$venv" >/dev/null 2>&1; }
# An environment built from other requirements is made anew, so that a
# package dropped from the list leaves it too.
if [[ -f $venv/.requirements ]] && ! cmp -s "$req" "$venv/.requirements"; then
	echo "pyenv: $req changed: making $venv anew"
	rm -rf "$venv"
fi
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
