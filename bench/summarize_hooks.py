#!/usr/bin/env python3
"""Turn the raw output of bench/hooks.sh into a markdown table.
Usage: summarize_hooks.py RESULTS_DIR"""
import csv
import json
import os
import statistics
import sys

results_dir = sys.argv[1]
runs = {}  # (workload, tool) -> [(wall, cpu)]
failures = []
with open(os.path.join(results_dir, "results.tsv")) as f:
    for row in csv.DictReader(f, delimiter="\t"):
        key = (row["workload"], row["tool"])
        if row["status"] != "ok":
            failures.append(f"{row['workload']} {row['tool']} rep {row['rep']}: {row['status']}")
            continue
        runs.setdefault(key, []).append((float(row["seconds"]), float(row["cpu_seconds"])))

workloads = list(dict.fromkeys(workload for workload, _ in runs))
tools = list(dict.fromkeys(tool for _, tool in runs))


def cell(values):
    """median (min-max)"""
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


print("| workload | tool | wall s, median (range) | CPU s, median (range) | wall / native |")
print("|---|---|---:|---:|---:|")
for workload in workloads:
    native = runs.get((workload, "native"))
    for tool in tools:
        samples = runs.get((workload, tool))
        if not samples:
            continue
        walls = [wall for wall, _ in samples]
        cpus = [cpu for _, cpu in samples]
        ratio = ""
        if native and tool != "native":
            base = max(statistics.median(wall for wall, _ in native), 0.01)
            ratio = f"{statistics.median(walls) / base:.0f}×"
        print(f"| {workload} | {tool} | {cell(walls)} | {cell(cpus)} | {ratio} |")

print()
for workload in workloads:
    path = os.path.join(results_dir, f"{workload}.json")
    if not os.path.exists(path):
        continue
    with open(path) as f:
        report = json.load(f)
    calls = sum(sum(process["calls"].values()) for process in report["processes"])
    hooks = [process.get("hooks") or {} for process in report["processes"]]
    total = {key: sum(h.get(key, 0) for h in hooks) for key in ("records", "dropped", "late", "full_waits")}
    print(f"- {workload} (last hooks run): {calls} calls, {total['records']} records, "
          f"{total['dropped']} dropped, {total['late']} late, {total['full_waits']} full-ring waits")
for failure in failures:
    print(f"- FAILED: {failure}")
