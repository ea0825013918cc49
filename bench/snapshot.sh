#!/usr/bin/env bash
# How long `memsup snapshot` stops a process (its own measure, `stopped_ns` in the JSON
# report) against the heap size and the number of threads, with snapshot_hold.c: heaps of
# 10, 100 and 1024 MiB in 4 KiB blocks, and 1, 64 and 1000 threads blocked in a condition
# wait. Prints one row per case: the median and range of R snapshots, and the threads seen.
#
# Usage: bench/snapshot.sh   (MEMSUP=target/release/memsup R=5 HEAPS="10 100 1024"
#                             THREADS="1 64 1000")
set -euo pipefail

cd "$(dirname "$0")/.."
MEMSUP=${MEMSUP:-target/release/memsup}
R=${R:-5}
HEAPS=${HEAPS:-10 100 1024}
THREADS=${THREADS:-1 64 1000}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/snapshot_hold" bench/snapshot_hold.c

echo "| heap | threads | stopped, median (min–max) of $R | threads seen |"
echo "|---:|---:|---:|---:|"
for heap in $HEAPS; do
    for threads in $THREADS; do
        mkfifo "$work/input"
        "$work/snapshot_hold" "$heap" "$threads" <"$work/input" >"$work/output" &
        holder=$!
        exec 3>"$work/input"
        until grep -q ready "$work/output" 2>/dev/null; do sleep 0.1; done
        : >"$work/times"
        for _ in $(seq "$R"); do
            "$MEMSUP" snapshot -q -f -o "$work/s.msup" "$holder"
            "$MEMSUP" report --format json "$work/s.msup" >"$work/s.json"
            python3 - "$work/s.json" >>"$work/times" <<'PY'
import json, sys
process = json.load(open(sys.argv[1]))["processes"][0]
threads = process["threads"]
print(threads["stopped_ns"], sum(len(g["threads"]) for g in threads["groups"]))
PY
        done
        exec 3>&-
        wait "$holder"
        rm "$work/input"
        python3 - "$heap" "$threads" "$work/times" <<'PY'
import statistics, sys
heap, threads, path = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [line.split() for line in open(path)]
times = [int(t) / 1e6 for t, _ in rows]
seen = {n for _, n in rows}
print(f"| {heap} MiB | {threads} | {statistics.median(times):.1f} ms "
      f"({min(times):.1f}–{max(times):.1f}) | {', '.join(sorted(seen))} |")
PY
    done
done
