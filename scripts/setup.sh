#!/usr/bin/env bash
# Installs what `make test` needs on a fresh machine, once and idempotently:
# it installs only what is missing and does nothing when everything is
# there. `make test` runs it first (`make setup` runs it alone), and .ci/run
# runs `make test`, so CI and a developer set up the same way.
#
#   Debian packages  the real components the tests start themselves (never as
#                    system services): PostgreSQL, memcached and its
#                    memccapable suite, perl (memcached's own tests),
#                    promtool, nbdkit, libnbd's tools,
#                    qemu-img/qemu-io, fio, Chromium, Node.js and npm, curl,
#                    a C compiler for the race detector, Python's venv,
#                    bash-completion (the CLI's completion test), Slurm
#                    (slurm-wlm) and munge
#   Go modules       go mod download (GOTOOLCHAIN=auto fetches the Go of go.mod)
#   Python           two environments (scripts/pyenv.sh): .venv-rf, the DMTF
#                    validators, sushy, statsmodels, pytest and pymemcache's
#                    integration tests; .venv-tools (Python 3.12 or newer),
#                    Ansible and DMTF's Use Case Checkers
#   npm              ui/node_modules (the console's build and its browser tests)
#
# Needs root or sudo for apt-get, and only when a package is missing. The
# tests never install anything themselves: a missing tool fails them with a
# message naming this script.
set -euo pipefail

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"

have() { command -v "$1" >/dev/null 2>&1; }

need=()
want() { # command package...
	local cmd=$1
	shift
	have "$cmd" || need+=("$@")
}
want make make
want gcc gcc
want git git
want curl curl
want go golang-go
want memcached memcached
want memccapable libmemcached-tools
want prove perl # prove and Test::More run memcached's own tests
want promtool prometheus
want nbdkit nbdkit
want nbdinfo libnbd-bin
want qemu-io qemu-utils
want fio fio
want node nodejs
want npm npm
want chromium chromium
want setsid util-linux
want slurmctld-wlm slurm-wlm # the Slurm integration's tests run slurmctld and slurmd (the -wlm builds: not the emulator's)
want munged munge
want python3 python3
if have python3 && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
	need+=(python3-venv)
fi
if [[ ! -f /usr/share/bash-completion/bash_completion ]]; then
	need+=(bash-completion)
fi
if ! have initdb && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	need+=(postgresql)
fi
if [[ ${#need[@]} -gt 0 ]]; then
	echo "setup: installing Debian packages: ${need[*]}"
	sudo=
	if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
	$sudo apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >/dev/null
fi

export GOTOOLCHAIN=${GOTOOLCHAIN:-auto} # go.mod names the Go version; fetch it if the installed one is older
go mod download
# gotestsum (scripts/test.sh runs go test through it), built once.
go run gotest.tools/gotestsum@v1.13.0 --version >/dev/null

scripts/pyenv.sh

# The console's npm packages, when ui/package-lock.json changed since the
# last install (the same stamp the Makefile's ui target checks).
if ! cmp -s ui/package-lock.json ui/node_modules/.rackpool-lock; then
	echo "setup: installing the console's npm packages (ui/package-lock.json)"
	(cd ui && npm ci --no-audit --no-fund --loglevel=error)
	cp ui/package-lock.json ui/node_modules/.rackpool-lock
fi
