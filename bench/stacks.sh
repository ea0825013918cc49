#!/usr/bin/env bash
# What full call stacks cost: memsup --stacks caller vs --stacks full vs heaptrack, side by
# side in one run, on churn (8 frames deep) and deep (D frames deep, recursion). See
# BENCHMARKS.md, "Call stacks".
#
# Usage: bench/stacks.sh          (N=50000 D=64 R=5)
#   N        malloc/free pairs per run
#   D        frames of recursion in deep
#   R        repetitions; tools run interleaved within each repetition; medians are reported
#   TIMEOUT  seconds before a single run counts as hung (default 600)
#   OUT      directory to keep raw results in (default: a temporary directory)
set -euo pipefail

N=${N:-50000}
D=${D:-64}
R=${R:-5}
TIMEOUT=${TIMEOUT:-600}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/measure.sh
source "$repo/bench/measure.sh"
start_bench stacks
echo "== building fixtures (N=$N D=$D R=$R) into $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -Wall -o "$work/deep" "$repo/bench/deep.c"
workloads=("churn $work/churn -n $N -t 1" "deep $work/deep -n $N -d $D")
for rep in $(seq 1 "$R"); do
    for entry in "${workloads[@]}"; do
        read -r workload program <<<"$entry"
        read -ra command <<<"$program"
        expected=$("${command[@]}" | grep -o 'checksum=[0-9]*')
        echo "== rep $rep/$R $workload" >&2
        measure "$workload" native "$rep" "" -- "${command[@]}"
        for stacks in caller full; do
            measure "$workload" "memsup-$stacks" "$rep" "$expected" -- \
                "$memsup" run -q -f --stacks "$stacks" -o "$work/profiles/$workload.memsup-$stacks.msup" -- "${command[@]}"
        done
        measure "$workload" heaptrack "$rep" "$expected" -- \
            heaptrack -o "$work/scratch/heaptrack.$workload" "${command[@]}"
        rm -f "$work/scratch/heaptrack.$workload".*
    done
done

for profile in "$work"/profiles/*.msup; do
    "$memsup" report --format json "$profile" >"$out/$(basename "$profile" .msup).json"
done
python3 "$repo/bench/summarize_stacks.py" "$out" "$N" "$D" "$R" | tee "$out/summary.md"
[[ -n ${OUT:-} ]] || echo "(raw results were in $out and are now removed; set OUT= to keep them)" >&2
