#!/usr/bin/env bash
# Two memsup builds side by side on churn (1 M malloc/free pairs, one thread, hook engine,
# full stacks), interleaved: wall time against native, and the record routine's own time
# per timed record from each run's profile (`hook_calls`). See BENCHMARKS.md.
#
# Usage: OLD=/path/to/old/memsup NEW=/path/to/new/memsup [R=7] bench/hook_record_ab.sh
set -euo pipefail
R=${R:-7}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/memsup-record-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -o "$work/churn" "$repo/bench/churn.c" -lpthread
for rep in $(seq "$R"); do
    for tool in native old new; do
        start=$(date +%s.%N)
        case $tool in
        native) "$work/churn" -n 1000000 >/dev/null ;;
        old) "$OLD" run -q -f -o "$work/old.msup" -- "$work/churn" -n 1000000 >/dev/null ;;
        new) "$NEW" run -q -f -o "$work/new.msup" -- "$work/churn" -n 1000000 >/dev/null ;;
        esac
        end=$(date +%s.%N)
        per_record=""
        if [[ $tool != native ]]; then
            per_record=$("$NEW" report --format json "$work/$tool.msup" | python3 -c '
import json, sys
calls = json.load(sys.stdin)["processes"][0]["hook_calls"]
print(round(calls["timed_ns"] / calls["timed_calls"], 1))')
        fi
        echo "$tool $(echo "$end - $start" | bc) $per_record"
    done
done | python3 -c '
import statistics, sys
wall, record = {}, {}
for line in sys.stdin:
    fields = line.split()
    wall.setdefault(fields[0], []).append(float(fields[1]))
    if len(fields) > 2:
        record.setdefault(fields[0], []).append(float(fields[2]))
native = statistics.median(wall["native"])
for tool, times in wall.items():
    line = f"{tool}: wall {statistics.median(times):.3f} s ({statistics.median(times) / native:.1f}x native)"
    if tool in record:
        r = record[tool]
        line += f", record routine {statistics.median(r):.1f} ns ({min(r):.1f}-{max(r):.1f})"
    print(line)
'
