#!/usr/bin/env bash
# kill -9 of an attached memsup (--engine hooks) at random moments, N times, each against a
# fresh fixtures/hook_chaos.c (threads allocating, mapping and dlopen'ing): does the target
# survive with its native output and exit status? See BENCHMARKS.md.
#
# Usage: bench/kill_campaign.sh          (N=100, kill 0..MAX_MS ms after memsup starts)
#        SEED=123 N=20 bench/kill_campaign.sh
#   N          kills (one fresh target each)
#   MAX_MS     latest kill, in ms after memsup was started (default 400: the attach and hook
#              placement take roughly the first 30-150 ms of that on this machine)
#   AFTER_MS   how long the target runs on after the kill before its stdin is closed (0..AFTER_MS)
#   SEED       seeds bash's RANDOM (printed; the same seed gives the same moments)
#   MEMSUP     the memsup binary (default target/release/memsup)
#   KEEP       directory to keep each failed run's files in (default: a temporary directory)
set -euo pipefail

N=${N:-100}
MAX_MS=${MAX_MS:-400}
AFTER_MS=${AFTER_MS:-300}
SEED=${SEED:-$(date +%s)}
repo=$(cd "$(dirname "$0")/.." && pwd)
MEMSUP=${MEMSUP:-$repo/target/release/memsup}
work=$(mktemp -d)
KEEP=${KEEP:-$work/failed}
trap 'rm -rf "$work"' EXIT
mkdir -p "$KEEP"

# shellcheck source=bench/hook_chaos_target.sh
source "$repo/bench/hook_chaos_target.sh"
build_target "$work" "$repo"

RANDOM=$SEED
echo "kill campaign: N=$N MAX_MS=$MAX_MS AFTER_MS=$AFTER_MS SEED=$SEED memsup=$MEMSUP" >&2


survived=0
for run in $(seq 1 "$N"); do
    dir=$work/run$run
    start_target "$dir"
    kill_ms=$(((RANDOM * 32768 + RANDOM) % (MAX_MS + 1)))
    after_ms=$((RANDOM % (AFTER_MS + 1)))
    "$MEMSUP" attach -q --engine hooks -o "$dir/profile.msup" "$pid" 2>"$dir/memsup.stderr" &
    memsup=$!
    sleep "$(seconds "$kill_ms")"
    kill -9 "$memsup" 2>/dev/null || true
    wait "$memsup" 2>/dev/null || true
    sleep "$(seconds "$after_ms")"
    exec 3>&-
    # A target that hangs counts as killed by the campaign.
    for _ in $(seq 1 600); do
        kill -0 "$target_shell" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$target_shell" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null || true
        echo "hung" >>"$dir/stdout"
    fi
    wait "$target_shell" 2>/dev/null || true
    got=$(tail -n +2 "$dir/stdout")
    if [[ $got == "$expected" && ! -s $dir/stderr ]]; then
        survived=$((survived + 1))
    else
        echo "run $run: kill at ${kill_ms} ms, target ran on ${after_ms} ms: $(echo "$got" | tail -1)" >&2
        cp -r "$dir" "$KEEP/run$run"
    fi
    rm -rf "$dir"
done
echo "survived $survived of $N (SEED=$SEED MAX_MS=$MAX_MS AFTER_MS=$AFTER_MS)"
