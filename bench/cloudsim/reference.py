#!/usr/bin/env python3
"""Reference replay of a rackpool VM-request trace (stdlib only).

An independent, event-driven implementation of the semantics that
Replay.java makes CloudSim Plus follow, used to check CloudSim's accepted ids.

  reference.py --trace FILE --hosts N --host-cores C --host-ram-gb R \
      --policy first-fit|next-fit|best-fit|worst-fit [--accepted-ids FILE] \
      [--same-instant release-first|arrival-first]

Semantics:
  * N identical hosts, each C cores and round(R*1024) MB RAM. A request takes
    `cores` cores and round(ram_gb*1024) MB from one host for [arrival, arrival+hold).
  * Arrivals are handled in file order (rows sorted by arrival; ties keep file order).
    A request that fits nowhere is rejected for good.
  * release-first (default): every release with time <= t happens before the
    arrivals at t. A VM's release time is computed as arrival + hold in IEEE
    doubles, exactly as CloudSim does (clock + delay). A hold-0 VM is released
    right after all arrivals at its own instant (CloudSim: its release event is
    created while that instant's arrivals are being processed).
    arrival-first: releases at t happen after the arrivals at t.
  * Policies (ties: lowest host index):
      first-fit  lowest-index host that fits
      next-fit   CloudSim Plus VmAllocationPolicyFirstFit: scan N hosts starting
                 at the host that received the last placed VM (initially host 0),
                 wrapping; the pointer moves only on a successful placement
      best-fit   among hosts that fit, fewest free cores (RAM not ranked)
      worst-fit  among hosts that fit, most free cores (RAM not ranked)
Prints one JSON object like Replay.java (peer "reference-py").
"""
import argparse
import csv
import heapq
import json
import math
import sys
import time


class TraceError(Exception):
    pass


def gb_to_mb(gb):
    # Java's Math.round: floor(x + 0.5)
    return math.floor(gb * 1024.0 + 0.5)


def read_trace(path):
    reqs = []
    ids = set()
    with open(path, newline="", encoding="utf-8-sig") as f:
        rd = csv.reader(f)
        col = None
        last = -math.inf
        for row in rd:
            ln = rd.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if col is None:
                col = {h.strip().lower(): i for i, h in enumerate(row)}
                for need in ("id", "arrival", "cores", "ram_gb", "hold"):
                    if need not in col:
                        raise TraceError(f"{path}:{ln}: header lacks column '{need}'")
                ncols = len(row)
                continue
            if len(row) != ncols:
                raise TraceError(f"{path}:{ln}: expected {ncols} fields like the header, got {len(row)}")

            def num(name):
                s = row[col[name]].strip()
                try:
                    v = float(s)
                except ValueError:
                    raise TraceError(f"{path}:{ln}: {name} is not a finite number: '{s}'")
                if not math.isfinite(v):
                    raise TraceError(f"{path}:{ln}: {name} is not a finite number: '{s}'")
                return v

            rid = row[col["id"]].strip()
            if not rid:
                raise TraceError(f"{path}:{ln}: empty id")
            if rid in ids:
                raise TraceError(f"{path}:{ln}: duplicate id '{rid}'")
            ids.add(rid)
            arrival, cores, ram, hold = num("arrival"), num("cores"), num("ram_gb"), num("hold")
            if arrival < 0:
                raise TraceError(f"{path}:{ln}: arrival must be >= 0")
            if arrival < last:
                raise TraceError(f"{path}:{ln}: rows must be sorted by arrival")
            last = arrival
            if cores < 1 or cores != int(cores):
                raise TraceError(f"{path}:{ln}: cores must be a positive integer")
            if ram < 0:
                raise TraceError(f"{path}:{ln}: ram_gb must be >= 0")
            if hold < 0:
                raise TraceError(f"{path}:{ln}: hold must be >= 0")
            reqs.append((rid, arrival, int(cores), gb_to_mb(ram), hold))
        if col is None:
            raise TraceError(f"{path}:1: empty trace: header required")
    return reqs


def simulate(reqs, n_hosts, host_cores, host_ram_mb, policy, release_first=True):
    free_c = [host_cores] * n_hosts
    free_m = [host_ram_mb] * n_hosts
    releases = []  # heap of (time, seq, host, cores, ram)
    seq = 0
    last_host = 0  # next-fit pointer
    accepted = []

    def release_until(t, inclusive):
        while releases and (releases[0][0] < t or (inclusive and releases[0][0] == t)):
            _, _, h, c, m = heapq.heappop(releases)
            free_c[h] += c
            free_m[h] += m

    def find(c, m):
        nonlocal last_host
        if policy == "first-fit":
            for h in range(n_hosts):
                if free_c[h] >= c and free_m[h] >= m:
                    return h
            return None
        if policy == "next-fit":
            for i in range(n_hosts):
                h = (last_host + i) % n_hosts
                if free_c[h] >= c and free_m[h] >= m:
                    last_host = h
                    return h
            return None
        best = None
        for h in range(n_hosts):
            if free_c[h] >= c and free_m[h] >= m:
                if best is None:
                    best = h
                elif policy == "best-fit" and free_c[h] < free_c[best]:
                    best = h
                elif policy == "worst-fit" and free_c[h] > free_c[best]:
                    best = h
        return best

    i = 0
    n = len(reqs)
    while i < n:
        t = reqs[i][1]
        # releases strictly before t always happen first; those at t only if release-first
        release_until(t, release_first)
        # the batch of arrivals at the same instant, in file order
        while i < n and reqs[i][1] == t:
            rid, arrival, c, m, hold = reqs[i]
            h = find(c, m)
            if h is not None:
                free_c[h] -= c
                free_m[h] -= m
                heapq.heappush(releases, (arrival + hold, seq, h, c, m))
                seq += 1
                accepted.append(rid)
            i += 1
    return accepted


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("--host-cores", type=int, required=True)
    ap.add_argument("--host-ram-gb", type=float, required=True)
    ap.add_argument("--policy", required=True, choices=["first-fit", "next-fit", "best-fit", "worst-fit"])
    ap.add_argument("--accepted-ids")
    ap.add_argument("--same-instant", default="release-first", choices=["release-first", "arrival-first"])
    a = ap.parse_args()
    if a.hosts <= 0 or a.host_cores <= 0 or not a.host_ram_gb > 0:
        ap.error("--hosts, --host-cores and --host-ram-gb must be positive")
    t0 = time.perf_counter()
    try:
        reqs = read_trace(a.trace)
    except TraceError as e:
        print(f"reference.py: {e}", file=sys.stderr)
        sys.exit(1)
    acc = simulate(reqs, a.hosts, a.host_cores, gb_to_mb(a.host_ram_gb), a.policy,
                   a.same_instant == "release-first")
    wall = time.perf_counter() - t0
    if a.accepted_ids:
        with open(a.accepted_ids, "w") as f:
            for rid in acc:
                f.write(rid + "\n")
    print(json.dumps({
        "peer": "reference-py", "policy": a.policy, "hosts": a.hosts,
        "requests": len(reqs), "accepted": len(acc),
        "acceptance_ratio": len(acc) / len(reqs) if reqs else 0,
        "wall_seconds": round(wall, 6), "same_instant": a.same_instant,
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
