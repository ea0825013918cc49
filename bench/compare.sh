#!/usr/bin/env bash
# Two builds of memsup side by side on the same workloads, interleaved in each repetition:
# what a change costs, as ratios measured in one run. See BENCHMARKS.md.
#
# Usage: BASE=/path/to/other/memsup bench/compare.sh
#   BASE      the memsup binary to compare this tree's build with (required)
#   N         malloc/free pairs per churn run (default 100000)
#   THREADS   threads created one after another by spawn.c (default 2000)
#   R         repetitions (default 5); medians are reported
#   TIMEOUT   seconds before a run counts as hung (default 600)
#   OUT       directory to keep raw results in (default: a temporary directory)
set -euo pipefail

: "${BASE:?set BASE to the memsup binary to compare with}"
N=${N:-100000}
THREADS=${THREADS:-2000}
R=${R:-5}
TIMEOUT=${TIMEOUT:-600}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/measure.sh
source "$repo/bench/measure.sh"
start_bench compare
echo "== building fixtures (N=$N THREADS=$THREADS R=$R) into $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -pthread -Wall -o "$work/spawn" "$repo/bench/spawn.c"

workloads=("churn-1t churn -n $N -t 1" "churn-4t churn -n $N -t 4" "spawn spawn -n $THREADS")

for rep in $(seq 1 "$R"); do
    for entry in "${workloads[@]}"; do
        read -r workload binary arguments <<<"$entry"
        read -ra arguments <<<"$arguments"
        program=("$work/$binary" "${arguments[@]}")
        expected=$("${program[@]}" | grep -o 'checksum=[0-9]*')
        echo "== rep $rep/$R $workload" >&2
        measure "$workload" native "$rep" "" -- "${program[@]}"
        measure "$workload" memsup "$rep" "$expected" -- \
            "$memsup" run -q -f -o "$work/profiles/$workload.msup" -- "${program[@]}"
        # The base build may predate --force: its profile from the last repetition goes first.
        rm -f "$work/profiles/$workload.base.msup"
        measure "$workload" memsup-base "$rep" "$expected" -- \
            "$BASE" run -q -o "$work/profiles/$workload.base.msup" -- "${program[@]}"
    done
done

python3 "$repo/bench/summarize_compare.py" "$out" "$R" | tee "$out/summary.md"
[[ -n ${OUT:-} ]] || echo "(raw results were in $out and are now removed; set OUT= to keep them)" >&2
