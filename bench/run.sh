#!/usr/bin/env bash
# Benchmark memsup against native, heaptrack and valgrind massif on churn,
# plus the bare ptrace round trip (roundtrip.c). See BENCHMARKS.md.
#
# Usage: bench/run.sh            (N=100000 R=5 K=50000)
#        N=1000000 R=3 bench/run.sh
#   N          malloc/free pairs per churn run (every tool runs at this N)
#   MASSIF_N   pairs for the massif runs (default N; native is re-run at MASSIF_N when it differs)
#   R          repetitions; tools run interleaved within each repetition; medians are reported
#   K          round trips per roundtrip run
#   TIMEOUT    seconds before a single run counts as hung (default 600)
#   OUT        directory to keep raw results in (default: a temporary directory)
set -euo pipefail

N=${N:-100000}
MASSIF_N=${MASSIF_N:-$N}
R=${R:-5}
K=${K:-50000}
TIMEOUT=${TIMEOUT:-600}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/measure.sh
source "$repo/bench/measure.sh"
start_bench bench
echo "== building fixtures (N=$N MASSIF_N=$MASSIF_N R=$R K=$K) into $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -pthread -Wall -static -o "$work/churn_static" "$repo/bench/churn.c"
gcc -O2 -g -Wall -o "$work/roundtrip" "$repo/bench/roundtrip.c"

workloads=("dynamic-1t churn 1" "dynamic-4t churn 4" "static-1t churn_static 1" "static-4t churn_static 4")

for rep in $(seq 1 "$R"); do
    for entry in "${workloads[@]}"; do
        read -r workload binary threads <<<"$entry"
        program=("$work/$binary" -n "$N" -t "$threads")
        expected=$("${program[@]}" | grep -o 'checksum=[0-9]*')
        profile=$work/profiles/$workload
        echo "== rep $rep/$R $workload" >&2
        measure "$workload" native "$rep" "" -- "${program[@]}"
        measure "$workload" memsup "$rep" "$expected" -- \
            "$memsup" run -q -f -o "$profile.memsup.msup" -- "${program[@]}"
        measure "$workload" memsup-out-of-line "$rep" "$expected" -- \
            "$memsup" run -q -f -o "$profile.memsup-out-of-line.msup" --step-over out-of-line -- "${program[@]}"
        measure "$workload" memsup-taskset-c0 "$rep" "$expected" -- \
            taskset -c 0 "$memsup" run -q -f -o "$profile.memsup-taskset-c0.msup" -- "${program[@]}"
        if [[ $binary == churn ]]; then
            # heaptrack and massif only see the heap of dynamic programs
            # (heaptrack hangs on a static one; massif reports 0 heap bytes).
            measure "$workload" heaptrack "$rep" "$expected" -- \
                heaptrack -o "$work/scratch/heaptrack.$workload" "${program[@]}"
            rm -f "$work/scratch/heaptrack.$workload".*
            massif_program=("$work/$binary" -n "$MASSIF_N" -t "$threads")
            if [[ $MASSIF_N != "$N" ]]; then
                measure "$workload" native-at-massif-n "$rep" "" -- "${massif_program[@]}"
            fi
            measure "$workload" massif "$rep" "" -- \
                valgrind --tool=massif --massif-out-file="$work/scratch/massif.$workload" "${massif_program[@]}"
        fi
    done
done

# The probe counts of the last profile of each memsup variant.
for profile in "$work"/profiles/*.msup; do
    "$memsup" report --format json "$profile" >"$out/$(basename "$profile" .msup).json"
done

echo "== roundtrip (K=$K)" >&2
"$repo/bench/roundtrip.sh" "$work/roundtrip" "$K" "$R" >"$out/roundtrip.tsv"

python3 "$repo/bench/summarize.py" "$out" "$N" "$MASSIF_N" "$R" "$K" | tee "$out/summary.md"
[[ -n ${OUT:-} ]] || echo "(raw results were in $out and are now removed; set OUT= to keep them)" >&2
