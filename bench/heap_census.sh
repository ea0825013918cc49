#!/usr/bin/env bash
# How long `memsup snapshot` stops a process with the glibc heap census (its own measure,
# `stopped_ns`), against the heap size, with bench/census_hold.c: heaps of 10, 100 and
# 1024 MiB in blocks of about 1 KiB spread over 4 arenas, every third block freed. Each
# heap is snapshotted R times with libc's debug file and R times without
# (MEMSUP_CENSUS_IGNORE_DEBUG_FILE=1); each row gives the median and range of the stop, the
# chunks the census counted, and whether its mallinfo2 totals equal the program's.
#
# Usage: bench/heap_census.sh   (MEMSUP=target/release/memsup R=3 HEAPS="10 100 1024"
#                                THREADS=4)
set -euo pipefail

cd "$(dirname "$0")/.."
MEMSUP=${MEMSUP:-target/release/memsup}
R=${R:-3}
HEAPS=${HEAPS:-10 100 1024}
THREADS=${THREADS:-4}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/census_hold" bench/census_hold.c

echo "| heap | symbols | stopped, median (min–max) of $R | chunks counted | mallinfo2 equal |"
echo "|---:|---|---:|---:|---|"
for heap in $HEAPS; do
    mkfifo "$work/input"
    "$work/census_hold" "$heap" "$THREADS" <"$work/input" >"$work/output" &
    holder=$!
    exec 3>"$work/input"
    until grep -q ready "$work/output" 2>/dev/null; do sleep 0.1; done
    for ignore in "" 1; do
        : >"$work/times"
        for _ in $(seq "$R"); do
            MEMSUP_CENSUS_IGNORE_DEBUG_FILE=$ignore "$MEMSUP" snapshot -q -f -o "$work/s.msup" "$holder"
            "$MEMSUP" report --format json "$work/s.msup" >"$work/s.json"
            python3 - "$work/s.json" "$work/output" >>"$work/times" <<'PY'
import json, sys
process = json.load(open(sys.argv[1]))["processes"][0]
census = process["heap_census"]
totals = census["totals"]
chunks = sum(totals[k]["count"] for k in ("in_use", "tcache", "tcache_structs", "fastbins", "free"))
truth = open(sys.argv[2]).readline().split()[1:]
info = census["mallinfo2"]
mine = [str(info[k]) for k in ("arena", "uordblks", "fordblks", "ordblks")]
print(process["threads"]["stopped_ns"], census["symbols"].replace(" ", "_"), chunks, mine == truth)
PY
        done
        python3 - "$heap" "$work/times" <<'PY'
import statistics, sys
heap, path = sys.argv[1], sys.argv[2]
rows = [line.split() for line in open(path)]
times = [int(row[0]) / 1e6 for row in rows]
symbols = {row[1].replace("_", " ") for row in rows}
chunks = {row[2] for row in rows}
equal = {row[3] for row in rows}
print(f"| {heap} MiB | {', '.join(symbols)} | {statistics.median(times):.1f} ms "
      f"({min(times):.1f}–{max(times):.1f}) | {', '.join(chunks)} | {', '.join(equal)} |")
PY
    done
    exec 3>&-
    wait "$holder"
    rm "$work/input"
done
