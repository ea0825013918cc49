# Sourced by the benchmark drivers, with $repo set to the repository.
#
# start_bench NAME
# Makes the scratch directory $work (removed on exit) and the results directory $out
# ($OUT if set), starts $results (TSV: workload tool rep seconds status cpu_seconds), and
# sets $memsup:
# $MEMSUP if set (a build to measure as it is), else this tree's release build, built now.
start_bench() {
    work=$(mktemp -d "/tmp/memsup-$1.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    out=${OUT:-$work/results}
    mkdir -p "$out" "$work/profiles" "$work/scratch"
    results=$out/results.tsv
    printf 'workload\ttool\trep\tseconds\tstatus\tcpu_seconds\n' >"$results"
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
# results.tsv, with the CPU seconds (user + system) of CMD's whole process tree.
# A failure, a hang or a wrong output is recorded, not fatal.
# Optional, set for one call (MEASURE_PROFILE=... measure ...):
#   MEASURE_OUTPUT   a file CMD writes: EXPECTED is then its md5sum instead of a stdout string
#   MEASURE_PROFILE  a profile CMD must leave behind (removed before the run)
measure() {
    local workload=$1 tool=$2 rep=$3 expected=$4
    shift 5
    local log=$work/scratch/$workload.$tool.$rep
    local start end rc=0 status=ok cpu_before cpu_after
    rm -f "${MEASURE_OUTPUT:-}" "${MEASURE_PROFILE:-}"
    read_children_times cpu_before
    start=$EPOCHREALTIME
    timeout "$TIMEOUT" "$@" >"$log.out" 2>"$log.err" || rc=$?
    end=$EPOCHREALTIME
    read_children_times cpu_after
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
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$workload" "$tool" "$rep" \
        "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f", b - a }')" "$status" \
        "$(cpu_seconds_between "$cpu_before" "$cpu_after")" >>"$results"
}

# read_children_times VAR: sets VAR to the user and system times (`times`' "1m2.345s"
# format) of this shell's waited-for descendants so far. Builtins only, so that nothing
# it runs is counted: a command substitution would also be a fresh child with no times.
read_children_times() {
    local shell_times user system
    times >"$work/scratch/times"
    { read -r shell_times && read -r user system; } <"$work/scratch/times"
    printf -v "$1" '%s %s' "$user" "$system"
}

# cpu_seconds_between BEFORE AFTER: user + system seconds from one reading to the other.
cpu_seconds_between() {
    awk -v before="$1" -v after="$2" 'function seconds(pair, fields, total, i, part) {
        split(pair, fields, " ")
        for (i = 1; i <= 2; i++) { split(fields[i], part, "m"); sub("s", "", part[2]); total += part[1] * 60 + part[2] }
        return total }
        BEGIN { printf "%.3f", seconds(after) - seconds(before) }'
}

# output_matches EXPECTED STDOUT_LOG: the md5sum of $MEASURE_OUTPUT if set, else a word of stdout.
output_matches() {
    if [[ -n ${MEASURE_OUTPUT:-} ]]; then
        [[ -f $MEASURE_OUTPUT && $(md5sum <"$MEASURE_OUTPUT") == "$1" ]]
    else
        grep -qwF "$1" "$2"
    fi
}
