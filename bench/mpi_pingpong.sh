#!/usr/bin/env bash
# MPI small-message latency and message rate (bench/mpi_pingpong.c, 2 ranks) natively and
# under `memsup run --engine int3` and `--engine hooks`, one memsup over mpirun and both ranks
# (int3, hooks) or one per rank inside mpirun (int3-per-rank, hooks-per-rank, `-o DIR/%r.msup`;
# the binding then holds memsup with its rank), interleaved in each repetition, under Open MPI and MPICH (`-bind-to core`, as Open
# MPI binds 2 ranks by default). See BENCHMARKS.md.
#
# Usage: bench/mpi_pingpong.sh
#   TRIPS     round trips of the latency test (default 2000)
#   MESSAGES  messages of the rate test (default 20000)
#   R         repetitions (default 5); medians and ranges are reported
#   TIMEOUT   seconds before a run counts as hung (default 300)
#   MEMSUP    a memsup binary to measure (default: this tree's release build, built now)
#   BASELINE  another memsup binary, measured beside it as baseline-hooks and
#             baseline-hooks-per-rank (a build before a change)
#   TOOLS     the runs to make, in order (default: native int3 hooks int3-per-rank
#             hooks-per-rank, then the baseline's when BASELINE is set)
set -euo pipefail

TRIPS=${TRIPS:-2000}
MESSAGES=${MESSAGES:-20000}
R=${R:-5}
TIMEOUT=${TIMEOUT:-300}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

TOOLS=${TOOLS:-native int3 hooks int3-per-rank hooks-per-rank${BASELINE:+ baseline-hooks baseline-hooks-per-rank}}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/memsup-mpi-pingpong.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [[ -n ${MEMSUP:-} ]]; then
    memsup=$(realpath "$MEMSUP")
else
    (cd "$repo" && cargo build --release --quiet)
    memsup=$repo/target/release/memsup
fi
results=$work/results.tsv
printf 'mpi\ttool\trep\tlatency_us\trate\n' >"$results"
for mpi in openmpi mpich; do
    "mpicc.$mpi" -O2 -o "$work/pingpong.$mpi" "$repo/bench/mpi_pingpong.c"
done

run() {
    local mpi=$1 tool=$2 rep=$3 line
    # Open MPI binds each of 2 ranks to a core by default, hydra does not: unbound, both
    # ranks may spin on one core and a round trip waits for a time slice (5 ms seen).
    local bind=()
    [[ $mpi == mpich ]] && bind=(-bind-to core)
    local launch=("mpirun.$mpi" "${bind[@]}" -n 2)
    local pingpong=("$work/pingpong.$mpi" "$TRIPS" "$MESSAGES")
    local program=("${launch[@]}" "${pingpong[@]}")
    local binary=$memsup engine=${tool#baseline-}
    engine=${engine%-per-rank}
    [[ $tool == baseline-* ]] && binary=$(realpath "$BASELINE")
    case $tool in
    native) ;;
    *-per-rank)
        program=("${launch[@]}" "$binary" run -q -f --engine "$engine"
            -o "$work/$mpi.$tool.%r.msup" -- "${pingpong[@]}") ;;
    *) program=("$binary" run -q -f --engine "$engine" -o "$work/$mpi.$tool.msup" -- "${program[@]}") ;;
    esac
    if ! line=$(timeout "$TIMEOUT" "${program[@]}" 2>"$work/err" | grep '^latency_us='); then
        echo "!! $mpi $tool rep $rep failed: $(tail -n 3 "$work/err")" >&2
        return
    fi
    line=${line//=/ }
    read -r _ latency _ rate _ <<<"$line"
    printf '%s\t%s\t%s\t%s\t%s\n' "$mpi" "$tool" "$rep" "$latency" "$rate" >>"$results"
    echo "== $mpi $tool rep $rep: latency ${latency} us, ${rate} msgs/s" >&2
}

for rep in $(seq 1 "$R"); do
    for mpi in openmpi mpich; do
        for tool in $TOOLS; do
            run "$mpi" "$tool" "$rep"
        done
    done
done

python3 - "$results" "$TRIPS" "$MESSAGES" "$R" "$TOOLS" <<'PY'
import csv, statistics, sys
path, trips, messages, reps, tools = sys.argv[1:]
rows = list(csv.DictReader(open(path), delimiter="\t"))
print(f"TRIPS={trips} MESSAGES={messages} R={reps}: median (min-max)\n")
print("| MPI | run | one-way latency (us) | x native | message rate (msgs/s) | % of native |")
print("|---|---|---|---|---|---|")
for mpi in ("openmpi", "mpich"):
    native = None
    for tool in tools.split():
        got = [r for r in rows if r["mpi"] == mpi and r["tool"] == tool]
        if not got:
            print(f"| {mpi} | {tool} | failed | | | |")
            continue
        latency = [float(r["latency_us"]) for r in got]
        rate = [float(r["rate"]) for r in got]
        med = (statistics.median(latency), statistics.median(rate))
        if tool == "native":
            native = med
        ratio = f"{med[0] / native[0]:.2f}x" if native else ""
        share = f"{100 * med[1] / native[1]:.3g} %" if native else ""
        print(f"| {mpi} | {tool} | {med[0]:.2f} ({min(latency):.2f}-{max(latency):.2f}) | {ratio} "
              f"| {med[1]:.0f} ({min(rate):.0f}-{max(rate):.0f}) | {share} |")
PY
