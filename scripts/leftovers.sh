#!/usr/bin/env bash
# Finds what a test run left behind: every process whose environment
# carries RACKPOOL_SUITE=ID (as everything scripts/test.sh starts does),
# but this script and its ancestors, and every file left in the run's
# temporary folder. Prints them and exits 1 when there is any.
#
#   scripts/leftovers.sh [--kill] ID TMPDIR
#
# --kill also kills those processes (SIGKILL), as scripts/test.sh does on
# its way out whatever happened.
set -euo pipefail

kill=
if [[ ${1:-} == --kill ]]; then
	kill=1
	shift
fi
if [[ $# -ne 2 ]]; then
	echo "usage: $0 [--kill] ID TMPDIR" >&2
	exit 2
fi
id=$1
tmp=$2

# This script and its ancestors carry the ID too.
declare -A mine
pid=$$
while [[ $pid -gt 1 ]]; do
	mine[$pid]=1
	pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 1)
done

found=0
for dir in /proc/[0-9]*; do
	pid=${dir#/proc/}
	[[ -n ${mine[$pid]:-} ]] && continue
	if { tr '\0' '\n' <"$dir/environ"; } 2>/dev/null | grep -qxF "RACKPOOL_SUITE=$id"; then
		args=$({ tr '\0' ' ' <"$dir/cmdline"; } 2>/dev/null | cut -c1-200)
		[[ -z $args ]] && continue # a zombie, or gone meanwhile
		echo "left running: pid $pid: $args"
		found=1
		if [[ -n $kill ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
	fi
done

if [[ -d $tmp ]]; then
	left=$(find "$tmp" -mindepth 1 -maxdepth 1 2>/dev/null | head -20)
	if [[ -n $left ]]; then
		echo "left in the run's temporary folder:"
		while IFS= read -r f; do
			printf '  %s (%s)\n' "${f#"$tmp"/}" "$(du -sh "$f" 2>/dev/null | cut -f1)"
		done <<<"$left"
		found=1
	fi
fi

if [[ $found -eq 0 ]]; then
	echo "nothing left behind"
fi
exit $found
