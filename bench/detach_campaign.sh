#!/usr/bin/env bash
# memsup attach --engine hooks, detached with SIGINT at random moments, N times, each against
# a fresh fixtures/hook_chaos.c (threads allocating, mapping and dlopen'ing all the time): how
# often does the detach leave its hook pages mapped (a thread may still be inside them), and
# does the target keep its native output and exit status? See BENCHMARKS.md.
#
# Usage: bench/detach_campaign.sh          (N=50, detach 100..MAX_MS ms after memsup starts)
#        SEED=123 N=20 MEMSUP=/path/to/memsup bench/detach_campaign.sh
#   N          detaches (one fresh target each)
#   MAX_MS     latest SIGINT, in ms after memsup was started (default 600; never before 100,
#              so the hooks are in place)
#   SEED       seeds bash's RANDOM (printed; the same seed gives the same moments)
#   MEMSUP     the memsup binary (default target/release/memsup)
set -euo pipefail

N=${N:-50}
MAX_MS=${MAX_MS:-600}
SEED=${SEED:-$(date +%s)}
repo=$(cd "$(dirname "$0")/.." && pwd)
MEMSUP=${MEMSUP:-$repo/target/release/memsup}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck source=bench/hook_chaos_target.sh
source "$repo/bench/hook_chaos_target.sh"
build_target "$work" "$repo"

RANDOM=$SEED
echo "detach campaign: N=$N MAX_MS=$MAX_MS SEED=$SEED memsup=$MEMSUP" >&2


clean=0 left=0 broken=0
for run in $(seq 1 "$N"); do
    dir=$work/run$run
    start_target "$dir"
    detach_ms=$((100 + RANDOM % (MAX_MS - 99)))
    "$MEMSUP" attach -q --engine hooks -o "$dir/profile.msup" "$pid" 2>"$dir/memsup.stderr" &
    memsup=$!
    sleep "$(seconds "$detach_ms")"
    kill -INT "$memsup"
    wait "$memsup" || echo "run $run: memsup ended with $?" >&2
    mapped=$(grep -c -e 'memsup-hooks' -e ' r-xp 00000000 00:00 0 *$' "/proc/$pid/maps" || true)
    exec 3>&-
    wait "$target_shell" 2>/dev/null || true
    got=$(tail -n +2 "$dir/stdout")
    if [[ $got != "$expected" || -s $dir/stderr ]]; then
        broken=$((broken + 1))
        echo "run $run: detach at ${detach_ms} ms: $(echo "$got" | tail -1)" >&2
    elif grep -q "stays mapped" "$dir/memsup.stderr" || [[ $mapped != 0 ]]; then
        left=$((left + 1))
    else
        clean=$((clean + 1))
    fi
    rm -rf "$dir"
done
echo "clean $clean, pages left mapped $left, target changed $broken, of $N (SEED=$SEED MAX_MS=$MAX_MS)"
