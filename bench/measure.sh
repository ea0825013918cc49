# Sourced by the benchmark drivers, with $repo set to the repository.
#
# start_bench NAME
# Makes the scratch directory $work (removed on exit) and the results directory $out
# ($OUT if set), starts $results (TSV: workload tool rep seconds status), and sets $memsup:
# $MEMSUP if set (a build to measure as it is), else this tree's release build, built now.
start_bench() {
    work=$(mktemp -d "/tmp/memsup-$1.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    out=${OUT:-$work/results}
    mkdir -p "$out" "$work/profiles" "$work/scratch"
    results=$out/results.tsv
    printf 'workload\ttool\trep\tseconds\tstatus\n' >"$results"
    if [[ -n ${MEMSUP:-} ]]; then
        memsup=$(realpath "$MEMSUP")
        [[ -x $memsup ]] || { echo "MEMSUP=$MEMSUP is not an executable" >&2; exit 1; }
    else
        (cd "$repo" && cargo build --release --quiet)
        memsup=$repo/target/release/memsup
    fi
}

# Needs $TIMEOUT too.
#
# measure WORKLOAD TOOL REP EXPECTED -- CMD...
# Times CMD (wall, from bash's EPOCHREALTIME), checks its exit status and that its output
# contains EXPECTED (native's "checksum=..."; "" = no check), and appends a row to
# results.tsv. A failure, a hang or a wrong output is recorded, not fatal.
# Optional, set for one call (MEASURE_PROFILE=... measure ...):
#   MEASURE_OUTPUT   a file CMD writes: EXPECTED is then its md5sum instead of a stdout string
#   MEASURE_PROFILE  a profile CMD must leave behind (removed before the run)
measure() {
    local workload=$1 tool=$2 rep=$3 expected=$4
    shift 5
    local log=$work/scratch/$workload.$tool.$rep
    local start end rc=0 status=ok
    rm -f "${MEASURE_OUTPUT:-}" "${MEASURE_PROFILE:-}"
    start=$EPOCHREALTIME
    timeout "$TIMEOUT" "$@" >"$log.out" 2>"$log.err" || rc=$?
    end=$EPOCHREALTIME
    if ((rc == 124)); then
        status="hung(>${TIMEOUT}s)"
    elif ((rc != 0)); then
        status="failed(rc=$rc)"
    elif [[ -n $expected ]] && ! output_matches "$expected" "$log.out"; then
        status="wrong-output"
    elif [[ -n ${MEASURE_PROFILE:-} && ! -s $MEASURE_PROFILE ]]; then
        status="no-profile"
    fi
    if [[ $status != ok ]]; then
        echo "!! $workload $tool rep $rep: $status: $*" >&2
        cp "$log.out" "$log.err" "$out/" 2>/dev/null || true
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$workload" "$tool" "$rep" \
        "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f", b - a }')" "$status" >>"$results"
}

# output_matches EXPECTED STDOUT_LOG: the md5sum of $MEASURE_OUTPUT if set, else a word of stdout.
output_matches() {
    if [[ -n ${MEASURE_OUTPUT:-} ]]; then
        [[ -f $MEASURE_OUTPUT && $(md5sum <"$MEASURE_OUTPUT") == "$1" ]]
    else
        grep -qwF "$1" "$2"
    fi
}
