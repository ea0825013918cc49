#!/usr/bin/env bash
# What memsup's residency sampler costs: for a 4 GiB resident heap (resident.c) and 20 000
# one-page mappings (mappings.c), records each at several --interval values (and once with
# --smaps-interval), and takes from the JSON report the sampler's own CPU time per
# /proc/PID/status and smaps_rollup read, the rollup interval it adapted to and its share
# of a core. procread.c times the same reads (and full smaps) outside memsup on the same
# fixtures. CPU time, not wall time: the numbers hold on a loaded machine. See
# BENCHMARKS.md, "Residency sampler".
#
# Usage: bench/sampler.sh         (INTERVALS="10 20 50 100" R=2 HOLD=10)
#   INTERVALS       --interval values (ms) to record at
#   R               repetitions; intervals and fixtures run interleaved within each
#   HOLD            seconds each fixture holds its memory under memsup
#   GIB, COUNT      size of the fixtures (default 4 GiB resident, 20000 mappings)
#   SMAPS_INTERVAL  --smaps-interval (ms) of the one extra run per fixture (default 1000)
#   READS           reads of status and smaps_rollup per file for procread (default 200);
#   SMAPS_READS     reads of smaps (default 10)
#   GAP_MS          procread also reads READS/4 and SMAPS_READS/3 times GAP_MS apart (default
#                   20, memsup's default --interval): cold caches, as in the sampler
#   TIMEOUT         seconds before a single run counts as hung (default 300)
#   OUT             directory to keep raw results in (default: a temporary directory)
set -euo pipefail

INTERVALS=${INTERVALS:-10 20 50 100}
R=${R:-2}
HOLD=${HOLD:-10}
GIB=${GIB:-4}
COUNT=${COUNT:-20000}
SMAPS_INTERVAL=${SMAPS_INTERVAL:-1000}
READS=${READS:-200}
SMAPS_READS=${SMAPS_READS:-10}
GAP_MS=${GAP_MS:-20}
TIMEOUT=${TIMEOUT:-300}

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/measure.sh
source "$repo/bench/measure.sh"
start_bench sampler
echo "== building fixtures (INTERVALS=$INTERVALS R=$R HOLD=$HOLD GIB=$GIB COUNT=$COUNT) into $work" >&2
for fixture in resident mappings procread; do
    gcc -O2 -g -Wall -o "$work/$fixture" "$repo/bench/$fixture.c"
done
resident_mib=$(awk -v g="$GIB" 'BEGIN { printf "%d", int(g * 16 + 0.5) * 64 }')
# name, the line it prints when ready, its command (without HOLD).
fixtures=("resident|resident $resident_mib MiB|$work/resident $GIB"
          "mappings|mappings $COUNT|$work/mappings $COUNT")

# record FIXTURE TOOL REP EXPECTED -- MEMSUP-OPTIONS... -- PROGRAM...: one memsup run, then
# its JSON report (the profile itself is removed: it can be large).
record() {
    local fixture=$1 tool=$2 rep=$3 expected=$4
    shift 5
    local profile=$work/profiles/$fixture.$tool.$rep.msup
    measure "$fixture" "$tool" "$rep" "$expected" -- "$memsup" run -q -o "$profile" "$@"
    if [[ -s $profile ]]; then
        "$memsup" report --format json "$profile" >"$out/$fixture.$tool.$rep.json" ||
            echo "!! report of $fixture $tool rep $rep failed" >&2
    fi
    rm -f "$profile"
}

for rep in $(seq 1 "$R"); do
    for entry in "${fixtures[@]}"; do
        IFS='|' read -r fixture expected program <<<"$entry"
        read -ra command <<<"$program"
        for interval in $INTERVALS; do
            echo "== rep $rep/$R $fixture --interval $interval" >&2
            record "$fixture" "interval-$interval" "$rep" "$expected" -- \
                --interval "$interval" -- "${command[@]}" "$HOLD"
        done
    done
done
for entry in "${fixtures[@]}"; do
    IFS='|' read -r fixture expected program <<<"$entry"
    read -ra command <<<"$program"
    echo "== $fixture --smaps-interval $SMAPS_INTERVAL" >&2
    record "$fixture" "smaps-$SMAPS_INTERVAL" 1 "$expected" -- \
        --smaps-interval "$SMAPS_INTERVAL" -- "${command[@]}" "$HOLD"
done

# read_costs NAME READY -- PROGRAM...: runs PROGRAM natively (it holds its memory far longer
# than needed), waits for READY on its output, times the reads with procread and appends
# them to reads.tsv with the process's VMA count and VmRSS, then ends it. Twice: back to
# back, then GAP_MS apart.
reads=$out/reads.tsv
printf 'fixture\tfile\treads\tgap_ms\tmedian_ns\tmin_ns\tbytes\tvmas\trss_kib\n' >"$reads"
read_costs() {
    local name=$1 ready=$2
    shift 3
    local log=$work/scratch/reader.$name waited=0
    "$@" >"$log.out" 2>"$log.err" &
    local pid=$!
    until grep -qF "$ready" "$log.out" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || ((waited >= 1200)); then
            echo "!! $name never printed '$ready'; no read costs for it" >&2
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            return 0
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    local vmas rss
    vmas=$(wc -l <"/proc/$pid/maps")
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
    local paced=$((READS / 4)) paced_smaps=$((SMAPS_READS / 3))
    ((paced >= 1)) || paced=1
    ((paced_smaps >= 1)) || paced_smaps=1
    if "$work/procread" "$pid" "$READS" "$SMAPS_READS" 0 >"$log.reads" &&
        "$work/procread" "$pid" "$paced" "$paced_smaps" "$GAP_MS" >"$log.paced"; then
        tail -q -n +2 "$log.reads" "$log.paced" |
            awk -v f="$name" -v v="$vmas" -v r="$rss" 'BEGIN { OFS = "\t" } { print f, $0, v, r }' >>"$reads"
    else
        echo "!! procread failed on $name" >&2
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
echo "== read costs outside memsup (READS=$READS SMAPS_READS=$SMAPS_READS)" >&2
read_costs idle "resident 0 MiB" -- "$work/resident" 0 3600
for entry in "${fixtures[@]}"; do
    IFS='|' read -r fixture expected program <<<"$entry"
    read -ra command <<<"$program"
    read_costs "$fixture" "$expected" -- "${command[@]}" 3600
done

{
    echo "kernel $(uname -r), $(nproc) CPUs, memsup $(git -C "$repo" rev-parse --short HEAD)," \
        "$(date -u '+%Y-%m-%d %H:%M UTC'), HOLD=$HOLD s GIB=$GIB COUNT=$COUNT" \
        "READS=$READS SMAPS_READS=$SMAPS_READS GAP_MS=$GAP_MS"
} >"$out/machine.txt"
python3 "$repo/bench/summarize_sampler.py" "$out" "$R" "$SMAPS_INTERVAL" "$GIB" "$COUNT" | tee "$out/summary.md"
[[ -n ${OUT:-} ]] || echo "(raw results were in $out and are now removed; set OUT= to keep them)" >&2
