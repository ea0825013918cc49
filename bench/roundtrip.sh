#!/usr/bin/env bash
# Driver for roundtrip.c: R interleaved repetitions of three placements
# (unpinned, tracer and child on the same CPU, on different CPUs).
# Usage: bench/roundtrip.sh ROUNDTRIP_BINARY K R
# Prints TSV: placement rep wall_seconds(K) wall_seconds(0) us_per_roundtrip_internal
set -euo pipefail
binary=$1 k=$2 r=$3

wall() {
    local start end
    start=$EPOCHREALTIME
    "$@" >"$tmp_out"
    end=$EPOCHREALTIME
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f", b - a }'
}

tmp_out=$(mktemp)
trap 'rm -f "$tmp_out"' EXIT
printf 'placement\trep\twall_k\twall_0\tinternal_us\n'
for rep in $(seq 1 "$r"); do
    for placement in "unpinned -1 -1" "same-cpu 0 0" "different-cpus 0 1"; do
        read -r name tracer child <<<"$placement"
        wall0=$(wall "$binary" -k 0 -T "$tracer" -C "$child")
        wallk=$(wall "$binary" -k "$k" -T "$tracer" -C "$child")
        internal=$(sed -n 's/.*us_per_roundtrip=\([0-9.]*\).*/\1/p' "$tmp_out")
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rep" "$wallk" "$wall0" "$internal"
    done
done
