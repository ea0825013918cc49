#!/usr/bin/env bash
# Two memsup builds side by side, interleaved, on what memsup does per mapping call and per
# mapping: mappings.c "churn" (COUNT one-page mmap/munmap pairs: wall seconds and the CPU
# seconds of memsup and the program together) and "merged" (MAPPINGS one-page mappings the kernel
# merges into a few VMAs, held HOLD seconds: each snapshot's cost and how many mappings it
# lists, from the profile). See BENCHMARKS.md.
#
# Usage: OLD=/path/to/old/memsup NEW=/path/to/new/memsup [R=5] [COUNT=200000]
#        [MAPPINGS=20000] [HOLD=3] bench/mapping_calls_ab.sh
set -euo pipefail
R=${R:-5}
COUNT=${COUNT:-200000}
MAPPINGS=${MAPPINGS:-20000}
HOLD=${HOLD:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/memsup-mapping-calls.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -o "$work/mappings" "$repo/bench/mappings.c"
TIMEFORMAT='%R %U %S'
for rep in $(seq "$R"); do
    for build in old new; do
        memsup=$OLD
        [[ $build == new ]] && memsup=$NEW
        { time "$memsup" run -q -f -o "$work/$build-churn-$rep.msup" -- \
            "$work/mappings" "$COUNT" 0 churn >/dev/null 2>"$work/memsup.err" ||
            { cat "$work/memsup.err" >&2; exit 1; }; } 2>"$work/$build-churn-$rep.time"
        "$memsup" run -q -f -o "$work/$build-merged-$rep.msup" -- \
            "$work/mappings" "$MAPPINGS" "$HOLD" merged >/dev/null
    done
done
for build in old new; do
    echo "== $build: mappings $COUNT 0 churn (wall s, user+system s)"
    for rep in $(seq "$R"); do
        awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/$build-churn-$rep.time"
    done
    echo "== $build: mappings $MAPPINGS merged (per snapshot: reason, mappings listed, cost ms)"
    for rep in $(seq "$R"); do
        "$NEW" report --format json "$work/$build-merged-$rep.msup" | python3 -c '
import json, sys
process = json.load(sys.stdin)["processes"][0]
print([(s["reason"], s["mappings"], round(s["cost_ns"] / 1e6, 1)) for s in process["snapshots"]])'
    done
done
