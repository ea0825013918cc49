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

gcc -O2 -g -pthread -Wall -I"$repo/fixtures" -o "$work/hook_chaos" "$repo/fixtures/hook_chaos.c" -ldl
gcc -O2 -g -Wall -shared -fPIC -o "$work/dlopen_arena.so" "$repo/fixtures/dlopen_arena.c"
expected=$'hook_chaos: ready\nhook_chaos: 5 threads, every check passed\nexit 0'

RANDOM=$SEED
echo "kill campaign: N=$N MAX_MS=$MAX_MS AFTER_MS=$AFTER_MS SEED=$SEED memsup=$MEMSUP" >&2

# Milliseconds as a sleep(1) argument.
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

survived=0
for run in $(seq 1 "$N"); do
    dir=$work/run$run
    mkdir -p "$dir"
    mkfifo "$dir/stdin"
    (
        "$work/hook_chaos" "$work/dlopen_arena.so" <"$dir/stdin" >"$dir/stdout" 2>"$dir/stderr"
        echo "exit $?" >>"$dir/stdout"
    ) &
    target_shell=$!
    exec 3>"$dir/stdin"
    for _ in $(seq 1 2000); do
        grep -q ready "$dir/stdout" 2>/dev/null && break
        sleep 0.005
    done
    pid=$(awk 'NR == 1 { print $3 }' "$dir/stdout")
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
