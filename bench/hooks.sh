#!/usr/bin/env bash
# The hook engine's cost on churn against native and heaptrack, side by side in one run:
# 1 and 4 threads, dynamic and static churn, tools interleaved within each repetition.
# Wall and CPU seconds (user + system of the whole process tree, memsup's threads and the
# target's together) of every run, by bench/measure.sh; a median and a range per workload
# and tool. See BENCHMARKS.md.
#
# Usage: bench/hooks.sh                 (N=1000000 R=3)
#        BASE=/tmp/memsup-old bench/hooks.sh
#   N        malloc/free pairs per churn run
#   R        repetitions
#   MEMSUP   the memsup binary to measure (default: this tree's release build, built first)
#   BASE     another memsup binary to run beside it (e.g. the commit before a change)
#   TIMEOUT  seconds before a single run counts as hung (default 300)
#   OUT      directory to keep raw results in (default: a temporary directory)
set -euo pipefail

N=${N:-1000000}
R=${R:-3}
TIMEOUT=${TIMEOUT:-300}
BASE=${BASE:-}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/measure.sh
source "$repo/bench/measure.sh"
start_bench hooks
echo "== building churn (N=$N R=$R) into $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -pthread -Wall -static -o "$work/churn_static" "$repo/bench/churn.c"

workloads=("dynamic-1t churn 1" "dynamic-4t churn 4" "static-1t churn_static 1" "static-4t churn_static 4")
for rep in $(seq 1 "$R"); do
    for entry in "${workloads[@]}"; do
        read -r workload binary threads <<<"$entry"
        program=("$work/$binary" -n "$N" -t "$threads")
        expected=$("${program[@]}" | grep -o 'checksum=[0-9]*')
        profile=$work/profiles/$workload
        echo "== rep $rep/$R $workload" >&2
        measure "$workload" native "$rep" "$expected" -- "${program[@]}"
        measure "$workload" hooks "$rep" "$expected" -- \
            "$memsup" run -q -f --stacks caller --engine hooks -o "$profile.hooks.msup" -- "${program[@]}"
        if [[ -n $BASE ]]; then
            measure "$workload" base "$rep" "$expected" -- \
                "$BASE" run -q -f --stacks caller --engine hooks -o "$profile.base.msup" -- "${program[@]}"
        fi
        # heaptrack only sees the heap of dynamic programs (it hangs on a static one).
        if [[ $binary == churn ]]; then
            measure "$workload" heaptrack "$rep" "$expected" -- \
                heaptrack -o "$work/scratch/heaptrack.$workload" "${program[@]}"
            rm -f "$work/scratch/heaptrack.$workload".*
        fi
    done
done
# The last profile of each workload: every call recorded, nothing dropped.
for entry in "${workloads[@]}"; do
    read -r workload _ <<<"$entry"
    "$memsup" report --format json "$work/profiles/$workload.hooks.msup" >"$out/$workload.json"
done
python3 "$repo/bench/summarize_hooks.py" "$out"
