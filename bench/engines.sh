#!/usr/bin/env bash
# memsup's recording engines side by side with native, heaptrack and valgrind massif on
# churn, a sqlite workload and a compiler run, all tools interleaved in each repetition:
# the default (hooks walking full stacks), hooks recording the caller only, and int3 with
# either. See BENCHMARKS.md.
#
# Usage: bench/engines.sh
#        WORKLOADS="churn-1t sqlite" R=5 MEMSUP=/path/to/memsup OUT=results bench/engines.sh
#   WORKLOADS  any of: churn-1t churn-4t static-1t static-4t sqlite cc (default: all)
#   R          repetitions (default 3); medians and ranges are reported
#   MEMSUP     the memsup binary to measure (default: this tree's release build, built first)
#   N          malloc/free pairs per churn run (default 1000000)
#   ROWS       rows the sqlite workload inserts one statement each (default 100000)
#   FUNCTIONS  functions in the C file the compiler run compiles (default 60)
#   INT3_N, INT3_ROWS, INT3_FUNCTIONS
#              the smaller sizes the int3 runs get, since at full size they take minutes
#              (defaults 20000, 2000, 4); native is re-run at that size for their ratios
#   TIMEOUT    seconds before one run counts as hung (default 600)
#   OUT        directory to keep raw results in (default: a temporary directory)
# heaptrack, valgrind and sqlite3 are optional: a missing one's column or workload is
# skipped and says so.
set -euo pipefail

WORKLOADS=${WORKLOADS:-churn-1t churn-4t static-1t static-4t sqlite cc}
R=${R:-3}
N=${N:-1000000}
ROWS=${ROWS:-100000}
FUNCTIONS=${FUNCTIONS:-60}
INT3_N=${INT3_N:-20000}
INT3_ROWS=${INT3_ROWS:-2000}
INT3_FUNCTIONS=${INT3_FUNCTIONS:-4}
TIMEOUT=${TIMEOUT:-600}
# The default run must be memsup's default (hooks, full stacks), whatever the caller's shell says.
unset MEMSUP_ENGINE

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/measure.sh
source "$repo/bench/measure.sh"
start_bench engines
skipped=$out/skipped.tsv
: >"$skipped"

have() { command -v "$1" >/dev/null; }
for tool in heaptrack valgrind; do
    have "$tool" || echo "!! $tool is not installed: its column is skipped" >&2
done

# size_of WORKLOAD [int3]: the workload's size, or the smaller one the int3 runs get.
size_of() {
    case $1:${2:-} in
    churn-*: | static-*:) echo "$N" ;;
    churn-*:int3 | static-*:int3) echo "$INT3_N" ;;
    sqlite:) echo "$ROWS" ;;
    sqlite:int3) echo "$INT3_ROWS" ;;
    cc:) echo "$FUNCTIONS" ;;
    cc:int3) echo "$INT3_FUNCTIONS" ;;
    esac
}

# command_for WORKLOAD SIZE: sets $program (the command) and $output (the file it writes
# and is checked by, or "" when its stdout's checksum= is).
command_for() {
    output=""
    case $1 in
    churn-1t) program=("$work/churn" -n "$2" -t 1) ;;
    churn-4t) program=("$work/churn" -n "$2" -t 4) ;;
    static-1t) program=("$work/churn_static" -n "$2" -t 1) ;;
    static-4t) program=("$work/churn_static" -n "$2" -t 4) ;;
    sqlite) program=(sqlite3 :memory: ".read $work/sqlite.$2.sql") ;;
    cc)
        # The compiler proper exactly as `gcc -O2 -c` runs it (from gcc -###): heaptrack and
        # massif do not follow the driver's children, so the driver itself is not measured.
        output=$work/scratch/cc.$2.s
        local line
        # Read whole, then searched: grep -m1 in the pipe could kill gcc with SIGPIPE.
        line=$(gcc -O2 -c "$work/cc.$2.c" -o /dev/null -### 2>&1)
        line=$(grep -m1 '/cc1 ' <<<"$line")
        read -ra program <<<"${line//\"/}"
        local i
        for i in "${!program[@]}"; do
            if [[ ${program[i]} == -o ]]; then program[i + 1]=$output; fi
        done
        ;;
    esac
}

# prepare WORKLOAD SIZE: writes its input, runs it once natively (a warm-up) and prints
# what every run must reproduce: stdout's checksum= or the md5sum of its output file.
prepare() {
    case $1 in
    sqlite) python3 "$repo/bench/sqlite_workload.py" "$2" >"$work/sqlite.$2.sql" ;;
    cc) python3 "$repo/bench/cc_workload.py" "$2" >"$work/cc.$2.c" ;;
    esac
    command_for "$1" "$2"
    local stdout
    stdout=$("${program[@]}") || { echo "$1 fails natively: ${program[*]}" >&2; exit 1; }
    if [[ -n $output ]]; then md5sum <"$output"; else grep -o 'checksum=[0-9]*' <<<"$stdout"; fi
}

echo "== preparing (WORKLOADS=\"$WORKLOADS\" R=$R N=$N ROWS=$ROWS FUNCTIONS=$FUNCTIONS" \
    "INT3_N=$INT3_N INT3_ROWS=$INT3_ROWS INT3_FUNCTIONS=$INT3_FUNCTIONS) in $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -pthread -Wall -static -o "$work/churn_static" "$repo/bench/churn.c"
declare -A expected
selected=()
printf 'workload\tsize\tint3_size\n' >"$out/sizes.tsv"
for workload in $WORKLOADS; do
    if [[ $workload == sqlite ]] && ! have sqlite3; then
        echo "!! sqlite3 is not installed: the sqlite workload is skipped" >&2
        printf 'sqlite\t*\tsqlite3 not installed\n' >>"$skipped"
        continue
    fi
    [[ -n $(size_of "$workload") ]] || { echo "unknown workload $workload" >&2; exit 1; }
    selected+=("$workload")
    for kind in "" int3; do
        size=$(size_of "$workload" $kind)
        expected[$workload.$size]=$(prepare "$workload" "$size")
    done
    printf '%s\t%s\t%s\n' "$workload" "$(size_of "$workload")" "$(size_of "$workload" int3)" >>"$out/sizes.tsv"
done

# run_memsup WORKLOAD TOOL REP SIZE OPTIONS...: one memsup run of the workload, profile kept.
run_memsup() {
    local workload=$1 tool=$2 rep=$3 size=$4
    shift 4
    command_for "$workload" "$size"
    local profile=$work/profiles/$workload.$tool.msup
    MEASURE_PROFILE=$profile MEASURE_OUTPUT=$output measure "$workload" "$tool" "$rep" \
        "${expected[$workload.$size]}" -- "$memsup" run -q -f -o "$profile" "$@" -- "${program[@]}"
}

# run_other WORKLOAD TOOL REP: heaptrack or massif at full size, on dynamic programs only:
# neither can see the heap of a static one (heaptrack hangs, massif reports 0 bytes).
run_other() {
    local workload=$1 tool=$2 rep=$3 size binary
    size=$(size_of "$workload")
    binary=$([[ $tool == heaptrack ]] && echo heaptrack || echo valgrind)
    if [[ $workload == static-* ]]; then
        printf '%s\t%s\tn/a (static)\n' "$workload" "$tool" >>"$skipped"
        return
    elif ! have "$binary"; then
        printf '%s\t%s\tnot installed\n' "$workload" "$tool" >>"$skipped"
        return
    fi
    command_for "$workload" "$size"
    local data=$work/scratch/$tool.$workload
    local wrapper=(heaptrack -o "$data")
    if [[ $tool == massif ]]; then wrapper=(valgrind --tool=massif "--massif-out-file=$data"); fi
    MEASURE_OUTPUT=$output measure "$workload" "$tool" "$rep" "${expected[$workload.$size]}" -- \
        "${wrapper[@]}" "${program[@]}"
    rm -f "$data" "$data".*
}

for rep in $(seq 1 "$R"); do
    for workload in "${selected[@]}"; do
        echo "== rep $rep/$R $workload" >&2
        size=$(size_of "$workload")
        command_for "$workload" "$size"
        MEASURE_OUTPUT=$output measure "$workload" native "$rep" "${expected[$workload.$size]}" -- "${program[@]}"
        run_memsup "$workload" hooks-full "$rep" "$size"
        run_memsup "$workload" hooks-caller "$rep" "$size" --engine hooks --stacks caller
        run_other "$workload" heaptrack "$rep"
        run_other "$workload" massif "$rep"
        size=$(size_of "$workload" int3)
        command_for "$workload" "$size"
        MEASURE_OUTPUT=$output measure "$workload" native-small "$rep" "${expected[$workload.$size]}" -- "${program[@]}"
        run_memsup "$workload" int3-caller "$rep" "$size" --engine int3 --stacks caller
        run_memsup "$workload" int3-full "$rep" "$size" --engine int3
    done
done

# Calls, engines, probes and hook counters of the last profile of each memsup run (the
# whole JSON report would be megabytes of sites and timeline).
slim='import json, sys
keep = ("pid", "exe", "engine", "calls", "probes", "probe_sites", "hooks")
report = json.load(sys.stdin)
json.dump({"processes": [{key: process[key] for key in keep if key in process}
                         for process in report["processes"]]}, sys.stdout, indent=1)'
for profile in "$work"/profiles/*.msup; do
    [[ -e $profile ]] || continue
    "$memsup" report --format json "$profile" | python3 -c "$slim" >"$out/$(basename "$profile" .msup).json" ||
        echo "!! cannot report $profile" >&2
done

python3 "$repo/bench/summarize_engines.py" "$out" "$R" | tee "$out/summary.md"
[[ -n ${OUT:-} ]] || echo "(raw results were in $out and are now removed; set OUT= to keep them)" >&2
