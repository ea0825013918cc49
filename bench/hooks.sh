#!/usr/bin/env bash
# The hook engine's cost on churn against native and heaptrack, side by side in one run:
# 1 and 4 threads, dynamic and static churn, tools interleaved within each repetition.
# Wall and CPU seconds (user + system, memsup's threads and the target's together) of
# every run; a median and a range per workload and tool. See BENCHMARKS.md.
#
# Usage: bench/hooks.sh                 (N=1000000 R=3)
#        BASE=/tmp/memsup-old bench/hooks.sh
#   N        malloc/free pairs per churn run
#   R        repetitions
#   BASE     another memsup binary to run beside this build (e.g. the commit before a change)
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
printf 'workload\ttool\trep\twall\tcpu\tstatus\n' >"$results"
echo "== building churn (N=$N R=$R) into $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -pthread -Wall -static -o "$work/churn_static" "$repo/bench/churn.c"

# timed WORKLOAD TOOL REP EXPECTED -- CMD...: wall and CPU of CMD (GNU time), its output
# checked for EXPECTED (native's checksum), one row of results.tsv.
timed() {
    local workload=$1 tool=$2 rep=$3 expected=$4
    shift 5
    local log=$work/scratch/$workload.$tool.$rep rc=0 status=ok
    timeout "$TIMEOUT" /usr/bin/time -o "$log.time" -f '%e %U %S' "$@" \
        >"$log.out" 2>"$log.err" || rc=$?
    if ((rc == 124)); then
        status="hung(>${TIMEOUT}s)"
    elif ((rc != 0)); then
        status="failed(rc=$rc)"
    elif ! grep -qwF "$expected" "$log.out"; then
        status="wrong-output"
    fi
    [[ $status == ok ]] || echo "!! $workload $tool rep $rep: $status: $*" >&2
    local wall=0 user=0 system=0
    read -r wall user system < <(tail -n 1 "$log.time") || true
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$workload" "$tool" "$rep" "$wall" \
        "$(awk -v u="$user" -v s="$system" 'BEGIN { printf "%.2f", u + s }')" \
        "$status" >>"$results"
}

workloads=("dynamic-1t churn 1" "dynamic-4t churn 4" "static-1t churn_static 1" "static-4t churn_static 4")
for rep in $(seq 1 "$R"); do
    for entry in "${workloads[@]}"; do
        read -r workload binary threads <<<"$entry"
        program=("$work/$binary" -n "$N" -t "$threads")
        expected=$("${program[@]}" | grep -o 'checksum=[0-9]*')
        profile=$work/profiles/$workload
        echo "== rep $rep/$R $workload" >&2
        timed "$workload" native "$rep" "$expected" -- "${program[@]}"
        timed "$workload" hooks "$rep" "$expected" -- \
            "$memsup" run -q -f --stacks caller --engine hooks -o "$profile.hooks.msup" -- "${program[@]}"
        if [[ -n $BASE ]]; then
            timed "$workload" base "$rep" "$expected" -- \
                "$BASE" run -q -f --stacks caller --engine hooks -o "$profile.base.msup" -- "${program[@]}"
        fi
        # heaptrack only sees the heap of dynamic programs (it hangs on a static one).
        if [[ $binary == churn ]]; then
            timed "$workload" heaptrack "$rep" "$expected" -- \
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
