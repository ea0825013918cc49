#!/usr/bin/env bash
# memnesia's study on our micro-benchmarks: the MPI library's memory per rank, by PSS and by
# RSS, for a Trivial program (bench/mpi_trivial.c: init, barrier, finalize) and the Alltoall
# loop (fixtures/mpi_alltoall.c), under Open MPI and MPICH, with 1, 2 and 4 ranks; each job
# run once as `memsup run -- mpirun -n N PROGRAM` and read from `memsup report --format json`.
# Prints one markdown table (means over the ranks of each job; see BENCHMARKS.md).
#
# Usage: bench/mpi_memory.sh
#   RANKS       rank counts (default "1 2 4")
#   ITERATIONS  MPI_Alltoall calls of the Alltoall loop (default 20)
#   OUT         directory to keep the profiles in (default: a temporary directory)
set -euo pipefail

RANKS=${RANKS:-"1 2 4"}
ITERATIONS=${ITERATIONS:-20}
repo=$(cd "$(dirname "$0")/.." && pwd)
memsup="$repo/target/release/memsup"
work=${OUT:-$(mktemp -d)}
mkdir -p "$work"
[ -x "$memsup" ] || (cd "$repo" && cargo build --release -q)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

for library in openmpi mpich; do
    "mpicc.$library" -O1 -g -o "$work/trivial-$library" "$repo/bench/mpi_trivial.c"
    "mpicc.$library" -O1 -g -I"$repo/fixtures" -o "$work/alltoall-$library" \
        "$repo/fixtures/mpi_alltoall.c"
done

# mean over the ranks of component NAME's peak FIELD, in KiB
mean_kib() {
    jq --arg exe "$2" --arg name "$3" --arg field "$4" '
        [.processes[] | select(.exe == $exe)
         | ([.components[] | select(.name == $name) | .[$field]] | add // 0)]
        | (add / length / 1024 | round)' "$1"
}
ranks_in() { jq --arg exe "$2" '[.processes[] | select(.exe == $exe)] | length' "$1"; }

echo "| MPI | program | ranks | mpi PSS | mpi RSS | mpi:shm PSS | mpi:shm RSS | MPI PSS (mpi + mpi:shm) | MPI heap requested | node MPI PSS |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for library in openmpi mpich; do
    for program in trivial alltoall; do
        for ranks in $RANKS; do
            binary="$work/$program-$library"
            arguments=()
            [ "$program" = alltoall ] && arguments=("$ITERATIONS")
            profile="$work/$program-$library-$ranks.msup"
            "$memsup" run -q -f -o "$profile" -- "mpirun.$library" -n "$ranks" \
                "$binary" "${arguments[@]}" >/dev/null
            json="$work/$program-$library-$ranks.json"
            "$memsup" report --format json "$profile" >"$json"
            found=$(ranks_in "$json" "$binary")
            [ "$found" = "$ranks" ] || { echo "$profile: $found ranks, expected $ranks" >&2; exit 1; }
            mpi_pss=$(mean_kib "$json" "$binary" mpi peak_pss_bytes)
            mpi_rss=$(mean_kib "$json" "$binary" mpi peak_rss_bytes)
            shm_pss=$(mean_kib "$json" "$binary" mpi:shm peak_pss_bytes)
            shm_rss=$(mean_kib "$json" "$binary" mpi:shm peak_rss_bytes)
            heap=$(mean_kib "$json" "$binary" mpi peak_requested_bytes)
            echo "| $library | $program | $ranks | $mpi_pss KiB | $mpi_rss KiB | $shm_pss KiB" \
                "| $shm_rss KiB | $((mpi_pss + shm_pss)) KiB | $heap KiB" \
                "| $(((mpi_pss + shm_pss) * ranks)) KiB |"
        done
    done
done
echo "profiles in $work" >&2
