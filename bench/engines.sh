#!/usr/bin/env bash
# memsup's recording engines side by side with native, heaptrack and valgrind massif on
# churn, a sqlite workload, C and C++ compiler runs, a Python program and a stencil code,
# all tools interleaved in each repetition: the default (hooks walking full stacks), hooks
# recording the caller only, and int3 with either. See BENCHMARKS.md.
#
# Usage: bench/engines.sh
#        WORKLOADS="churn-1t sqlite" R=5 MEMSUP=/path/to/memsup OUT=results bench/engines.sh
#   WORKLOADS  any of: churn-1t churn-4t static-1t static-4t sqlite cc gxx python3 stencil
#              (default: all)
#   R          repetitions (default 3); medians and ranges are reported
#   MEMSUP     the memsup binary to measure (default: this tree's release build, built first)
#   N          malloc/free pairs per churn run (default 1000000)
#   ROWS       rows the sqlite workload inserts one statement each (default 100000)
#   FUNCTIONS  functions in the C file the cc run compiles (default 60)
#   GXX_N      class templates in the C++ file the gxx run compiles (default 10)
#   PY_N       rounds of bench/python_workload.py (default 200)
#   STENCIL_N  Jacobi sweeps of bench/stencil.c over its 2000x2000 grids (default 150)
#   INT3_N, INT3_ROWS, INT3_FUNCTIONS, INT3_GXX_N, INT3_PY_N, INT3_STENCIL_N
#              the smaller sizes the int3 runs get, since at full size they take minutes
#              (defaults 20000, 2000, 4, 0, 4, 3; gxx at 0 compiles the headers alone, as
#              the first <regex> use costs seconds); native is re-run at that size for
#              their ratios
#   TIMEOUT    seconds before one run counts as hung (default 600)
#   HEAPTRACK_GXX  set to run heaptrack on the g++ workload too (its interpreter needs
#              more than 17 GB there and fails; skipped by default)
#   OUT        directory to keep raw results in (default: a temporary directory)
# heaptrack, valgrind and sqlite3 are optional: a missing one's column or workload is
# skipped and says so.
set -euo pipefail

WORKLOADS=${WORKLOADS:-churn-1t churn-4t static-1t static-4t sqlite cc gxx python3 stencil}
R=${R:-3}
N=${N:-1000000}
ROWS=${ROWS:-100000}
FUNCTIONS=${FUNCTIONS:-60}
INT3_N=${INT3_N:-20000}
INT3_ROWS=${INT3_ROWS:-2000}
INT3_FUNCTIONS=${INT3_FUNCTIONS:-4}
GXX_N=${GXX_N:-10}
INT3_GXX_N=${INT3_GXX_N:-0}
PY_N=${PY_N:-200}
INT3_PY_N=${INT3_PY_N:-4}
STENCIL_N=${STENCIL_N:-150}
INT3_STENCIL_N=${INT3_STENCIL_N:-3}
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
    gxx:) echo "$GXX_N" ;;
    gxx:int3) echo "$INT3_GXX_N" ;;
    python3:) echo "$PY_N" ;;
    python3:int3) echo "$INT3_PY_N" ;;
    stencil:) echo "$STENCIL_N" ;;
    stencil:int3) echo "$INT3_STENCIL_N" ;;
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
    cc) compiler_proper gcc cc1 "$work/cc.$2.c" "$work/scratch/cc.$2.s" ;;
    gxx) compiler_proper g++ cc1plus "$work/gxx.$2.cpp" "$work/scratch/gxx.$2.s" ;;
    python3) program=("$python" "$repo/bench/python_workload.py" "$2") ;;
    stencil) program=("$work/stencil" -k "$2") ;;
    esac
}

# compiler_proper DRIVER COMPILER SOURCE OUTPUT: sets $program to the compiler proper exactly
# as `DRIVER -O2 -c SOURCE` runs it (from DRIVER -###), writing assembly to OUTPUT, and
# $output: heaptrack and massif do not follow the driver's children, so the driver itself
# is not measured.
compiler_proper() {
    output=$4
    local line i
    # Read whole, then searched: grep -m1 in the pipe could kill the driver with SIGPIPE.
    line=$("$1" -O2 -c "$3" -o /dev/null -### 2>&1)
    line=$(grep -m1 "/$2 " <<<"$line")
    read -ra program <<<"${line//\"/}"
    for i in "${!program[@]}"; do
        if [[ ${program[i]} == -o ]]; then program[i + 1]=$output; fi
    done
}

# prepare WORKLOAD SIZE: writes its input, runs it once natively (a warm-up) and prints
# what every run must reproduce: stdout's checksum= or the md5sum of its output file.
prepare() {
    case $1 in
    sqlite) python3 "$repo/bench/sqlite_workload.py" "$2" >"$work/sqlite.$2.sql" ;;
    cc) python3 "$repo/bench/cc_workload.py" "$2" >"$work/cc.$2.c" ;;
    gxx) python3 "$repo/bench/cxx_workload.py" "$2" >"$work/gxx.$2.cpp" ;;
    esac
    command_for "$1" "$2"
    local stdout
    stdout=$("${program[@]}") || { echo "$1 fails natively: ${program[*]}" >&2; exit 1; }
    if [[ -n $output ]]; then md5sum <"$output"; else grep -o 'checksum=[0-9]*' <<<"$stdout"; fi
}

echo "== preparing (WORKLOADS=\"$WORKLOADS\" R=$R N=$N ROWS=$ROWS FUNCTIONS=$FUNCTIONS" \
    "GXX_N=$GXX_N PY_N=$PY_N STENCIL_N=$STENCIL_N INT3_N=$INT3_N INT3_ROWS=$INT3_ROWS" \
    "INT3_FUNCTIONS=$INT3_FUNCTIONS INT3_GXX_N=$INT3_GXX_N INT3_PY_N=$INT3_PY_N" \
    "INT3_STENCIL_N=$INT3_STENCIL_N) in $work" >&2
gcc -O2 -g -pthread -Wall -o "$work/churn" "$repo/bench/churn.c"
gcc -O2 -g -pthread -Wall -static -o "$work/churn_static" "$repo/bench/churn.c"
gcc -O2 -g -Wall -o "$work/stencil" "$repo/bench/stencil.c"
# The interpreter itself: a launcher such as pyenv's shim is a shell script, which massif
# would measure instead of Python (it does not follow exec).
python=$(python3 -c 'import sys; print(sys.executable)')
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

# Calls, engines, probes and hook counters of each process, and the recorder's own
# figures (top level; newer memsup only), of a memsup profile (the whole JSON report would
# be megabytes of sites and timeline): written to the file argv[1], and the recorder's
# peak RSS and CPU printed as two tab-separated fields ("" when the report has none).
slim='import json, sys
keep = ("pid", "exe", "engine", "calls", "probes", "probe_sites", "hooks")
report = json.load(sys.stdin)
slimmed = {"processes": [{key: process[key] for key in keep if key in process}
                         for process in report["processes"]]}
recorder = report.get("recorder") or {}
if recorder:
    slimmed["recorder"] = recorder
with open(sys.argv[1], "w") as f:
    json.dump(slimmed, f, indent=1)
print(recorder.get("peak_rss_bytes", ""), recorder.get("cpu_ns", ""), sep="\t")'
printf 'workload\ttool\trep\tpeak_rss_bytes\tcpu_ns\n' >"$out/recorder.tsv"

# run_memsup WORKLOAD TOOL REP SIZE OPTIONS...: one memsup run of the workload; its profile
# slimmed to $out/WORKLOAD.TOOL.json (the last repetition's stays) and the recorder's
# figures appended to recorder.tsv, per repetition for their medians.
run_memsup() {
    local workload=$1 tool=$2 rep=$3 size=$4
    shift 4
    command_for "$workload" "$size"
    local profile=$work/profiles/$workload.$tool.msup fields
    MEASURE_PROFILE=$profile MEASURE_OUTPUT=$output measure "$workload" "$tool" "$rep" \
        "${expected[$workload.$size]}" -- "$memsup" run -q -f -o "$profile" "$@" -- "${program[@]}"
    [[ -s $profile ]] || return 0
    if fields=$("$memsup" report --format json "$profile" | python3 -c "$slim" "$out/$workload.$tool.json"); then
        printf '%s\t%s\t%s\t%s\n' "$workload" "$tool" "$rep" "$fields" >>"$out/recorder.tsv"
    else
        echo "!! cannot report $profile" >&2
    fi
    rm -f "$profile"
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
    elif [[ $workload == gxx && $tool == heaptrack && -z ${HEAPTRACK_GXX:-} ]]; then
        # heaptrack 1.4's heaptrack_interpret grows past 17 GB on this compiler run and dies
        # (bad_alloc), taking the compiler down with SIGPIPE after about a minute.
        printf '%s\t%s\tskipped: its interpreter exhausts memory (HEAPTRACK_GXX=1 runs it)\n' \
            "$workload" "$tool" >>"$skipped"
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

python3 "$repo/bench/summarize_engines.py" "$out" "$R" | tee "$out/summary.md"
[[ -n ${OUT:-} ]] || echo "(raw results were in $out and are now removed; set OUT= to keep them)" >&2
