#!/usr/bin/env bash
# Replays a rackpool trace in CloudSim Plus 8.5.7 (see README.md).
#
#   bench/cloudsim/run.sh --trace FILE --hosts N --host-cores C --host-ram-gb R \
#       --policy first-fit|next-fit|best-fit|worst-fit [--accepted-ids FILE] \
#       [--submit delay|dynamic] [--same-instant release-first|arrival-first] [--check]
#
# Builds target/cloudsim-replay-all.jar once (again only when pom.xml or a source
# file is newer), installing a JDK 17+ and Maven with apt-get only if missing.
# Prints one JSON object on stdout. JAVA_OPTS is passed to the JVM.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/cloudsim-replay-all.jar"

java_major() {
    # "17.0.15" -> 17, "1.8.0_392" -> 8
    local v
    v="$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)"
    v="${v#1.}"
    echo "${v%%[.+-]*}"
}

have_toolchain() {
    command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 &&
        command -v mvn >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null
}

ensure_toolchain() {
    have_toolchain && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "run.sh: need java/javac 17+ and mvn on PATH (no apt-get to install them)" >&2
        exit 1
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
            echo "run.sh: need java/javac 17+ and mvn; not root and no sudo to apt-get install them" >&2
            exit 1
        fi
    fi
    echo "run.sh: installing openjdk-17-jdk-headless and maven with apt-get" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jdk-headless maven >&2
    have_toolchain || { echo "run.sh: java 17+ and mvn still not usable after apt-get install" >&2; exit 1; }
}

needs_build() {
    [ -f "$jar" ] || return 0
    [ -n "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]
}

build() {
    mkdir -p "$here/target"
    local log="$here/target/build.log"
    # Offline first (works once ~/.m2 holds CloudSim Plus and the plugins), then online.
    if ! mvn -q -B -o -Dstyle.color=never -f "$here/pom.xml" package >"$log" 2>&1; then
        if ! mvn -q -B -Dstyle.color=never -f "$here/pom.xml" package >"$log" 2>&1; then
            echo "run.sh: maven build failed; log follows ($log)" >&2
            cat "$log" >&2
            exit 1
        fi
    fi
}

if needs_build; then
    ensure_toolchain
    mkdir -p "$here/target"
    if command -v flock >/dev/null 2>&1; then
        # Serialise concurrent first runs; re-check once we hold the lock.
        exec 9>"$here/target/.build.lock"
        flock 9
        if needs_build; then build; fi
        flock -u 9
        exec 9>&-
    else
        build
    fi
fi

command -v java >/dev/null 2>&1 || ensure_toolchain
# shellcheck disable=SC2086
exec java ${JAVA_OPTS:-} -jar "$jar" "$@"
