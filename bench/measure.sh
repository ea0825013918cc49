# Sourced by the benchmark drivers, with $repo set to the repository.
#
# start_bench NAME
# Makes the scratch directory $work (removed on exit) and the results directory $out
# ($OUT if set), starts $results (TSV: workload tool rep seconds status), builds memsup
# and sets $memsup.
start_bench() {
    work=$(mktemp -d "/tmp/memsup-$1.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    out=${OUT:-$work/results}
    mkdir -p "$out" "$work/profiles" "$work/scratch"
    results=$out/results.tsv
    printf 'workload\ttool\trep\tseconds\tstatus\n' >"$results"
    (cd "$repo" && cargo build --release --quiet)
    memsup=$repo/target/release/memsup
}

# Needs $TIMEOUT too.
#
# measure WORKLOAD TOOL REP EXPECTED -- CMD...
# Times CMD (wall, from bash's EPOCHREALTIME), checks that its output
# contains EXPECTED (native's "checksum=..."; "" = no check) and appends a
# row to results.tsv. A failure, a hang or a wrong checksum is recorded, not fatal.
measure() {
    local workload=$1 tool=$2 rep=$3 expected=$4
    shift 5
    local log=$work/scratch/$workload.$tool.$rep
    local start end rc=0 status=ok
    start=$EPOCHREALTIME
    timeout "$TIMEOUT" "$@" >"$log.out" 2>"$log.err" || rc=$?
    end=$EPOCHREALTIME
    if ((rc == 124)); then
        status="hung(>${TIMEOUT}s)"
    elif ((rc != 0)); then
        status="failed(rc=$rc)"
    elif [[ -n $expected ]] && ! grep -qwF "$expected" "$log.out"; then
        status="wrong-output"
    fi
    if [[ $status != ok ]]; then
        echo "!! $workload $tool rep $rep: $status: $*" >&2
        cp "$log.out" "$log.err" "$out/" 2>/dev/null || true
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$workload" "$tool" "$rep" \
        "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f", b - a }')" "$status" >>"$results"
}
