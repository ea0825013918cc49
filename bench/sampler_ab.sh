#!/usr/bin/env bash
# Two memsup builds side by side on the sampler's fixtures (4 GiB resident, 20,000 mappings,
# each held HOLD seconds), interleaved: the sampler's CPU as a share of one core (status
# reads, rollups and the snapshots taken for new highs, from each profile's
# `sampler_costs` and `snapshots`) and how long after each high its snapshot came.
# See BENCHMARKS.md.
#
# Usage: OLD=/path/to/old/memsup NEW=/path/to/new/memsup [R=2] [HOLD=10] bench/sampler_ab.sh
set -euo pipefail
R=${R:-2}
HOLD=${HOLD:-10}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/memsup-sampler-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -o "$work/resident" "$repo/bench/resident.c"
gcc -O2 -g -o "$work/mappings" "$repo/bench/mappings.c"
for rep in $(seq "$R"); do
    for build in old new; do
        memsup=$OLD
        [[ $build == new ]] && memsup=$NEW
        "$memsup" run -q -f -o "$work/$build-resident-$rep.msup" -- "$work/resident" 4 "$HOLD" >/dev/null
        "$memsup" run -q -f -o "$work/$build-mappings-$rep.msup" -- "$work/mappings" 20000 "$HOLD" >/dev/null
    done
done
for profile in "$work"/*.msup; do
    echo "== $(basename "$profile" .msup)"
    "$NEW" report --format json "$profile" | python3 "$repo/bench/summarize_sampler_ab.py"
done
