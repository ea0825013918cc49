#!/usr/bin/env bash
# Two memsup builds side by side on allocation-heavy workloads (default engine and stacks),
# interleaved in each repetition: wall and CPU seconds of the whole run, the profile's
# size, the time the new build's `memsup report` takes on each build's profile, and the
# hooks' own sampled time per call and rule lookups per walk from that profile.
# See BENCHMARKS.md.
#
# Usage: OLD=/path/to/old/memsup NEW=/path/to/new/memsup [R=5] [WORKLOADS="churn sqlite cc"]
#        bench/builds_ab.sh
#   churn   1 M malloc/free pairs, one thread (bench/churn.c)
#   sqlite  100,000 inserts into an indexed in-memory table (sqlite3; skipped without it)
#   cc      gcc -O2 -c of a 60-function C file (bench/cc_workload.py)
set -euo pipefail
R=${R:-5}
WORKLOADS=${WORKLOADS:-churn sqlite cc}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/memsup-builds-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/churn" "$repo/bench/churn.c" -lpthread
python3 "$repo/bench/sqlite_workload.py" 100000 >"$work/sqlite.sql"
python3 "$repo/bench/cc_workload.py" 60 >"$work/cc60.c"


for rep in $(seq "$R"); do
    for workload in $WORKLOADS; do
        [[ $workload == sqlite ]] && ! command -v sqlite3 >/dev/null && continue
        case $workload in
        churn) program=("$work/churn" -n 1000000) ;;
        sqlite) program=(sqlite3 :memory: ".read $work/sqlite.sql") ;;
        cc) program=(gcc -O2 -c -o "$work/cc60.o" "$work/cc60.c") ;;
        esac
        for build in old new; do
            memsup=$OLD
            [[ $build == new ]] && memsup=$NEW
            profile="$work/$workload.$build.msup"
            /usr/bin/time -f "%e %U %S" -o "$work/time" \
                "$memsup" run -q -f -o "$profile" -- "${program[@]}" >/dev/null
            read -r wall user system <"$work/time"
            start=$(date +%s.%N)
            "$NEW" report "$profile" >/dev/null
            end=$(date +%s.%N)
            # The hooks' own sampled time per call and rule lookups per walk (0 0 without).
            hook=$("$NEW" report --format json "$profile" | python3 -c '
import json, sys
# The process that walked most (the compiler proper under a driver).
process = max(json.load(sys.stdin)["processes"],
              key=lambda process: (process.get("hook_stacks") or {}).get("walks", 0))
calls, stacks = process.get("hook_calls") or {}, process.get("hook_stacks") or {}
timed, walks = calls.get("timed_calls", 0), stacks.get("walks", 0)
print(calls["timed_ns"] / timed if timed else 0, calls["rule_lookups"] / walks if walks else 0)')
            echo "$workload $build $wall $(echo "$user + $system" | bc) $(stat -c %s "$profile") $(echo "$end - $start" | bc) $hook"
        done
    done
done | python3 -c '
import statistics, sys
runs = {}
for line in sys.stdin:
    workload, build, *values = line.split()
    runs.setdefault((workload, build), []).append([float(value) for value in values])
print("| workload | build | wall s, median (range) | CPU s, median | profile bytes | report s, median "
      "| ns in the hook per call, median (range) | rule lookups per walk |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for (workload, build), rows in runs.items():
    wall, cpu, size, report, hook, lookups = zip(*rows)
    print(f"| {workload} | {build} | {statistics.median(wall):.2f} ({min(wall):.2f}-{max(wall):.2f}) "
          f"| {statistics.median(cpu):.2f} | {int(statistics.median(size))} | {statistics.median(report):.2f} "
          f"| {statistics.median(hook):.0f} ({min(hook):.0f}-{max(hook):.0f}) | {statistics.median(lookups):.1f} |")
'
