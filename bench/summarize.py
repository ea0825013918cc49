#!/usr/bin/env python3
"""Turn the raw output of bench/run.sh into markdown tables.
Usage: summarize.py RESULTS_DIR N MASSIF_N R K"""
import csv
import json
import os
import statistics
import sys

import bench_results
from bench_results import read_runs

results_dir, n, massif_n, reps, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])

runs = read_runs(results_dir)

roundtrip = {}  # placement -> (wall-based us list, internal us list)
with open(os.path.join(results_dir, "roundtrip.tsv")) as f:
    for row in csv.DictReader(f, delimiter="\t"):
        wall_us = (float(row["wall_k"]) - float(row["wall_0"])) * 1e6 / k
        walls, internals = roundtrip.setdefault(row["placement"], ([], []))
        walls.append(wall_us)
        internals.append(float(row["internal_us"]))


def median_ok(workload, tool):
    return bench_results.median_ok(runs, workload, tool)


def probes(workload, tool):
    path = os.path.join(results_dir, f"{workload}.{tool}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        report = json.load(f)
    total = {"calls": 0, "stops": 0, "entry_hits": 0, "return_hits": 0,
             "emulated": 0, "out_of_line": 0, "single_steps": 0, "stop_the_world": 0}
    for process in report["processes"]:
        total["calls"] += sum(process["calls"].values())
        for key in total:
            if key != "calls":
                total[key] += process["probes"][key]
    return total


bare = {name: statistics.median(walls) for name, (walls, _) in roundtrip.items()}
# memsup runs unpinned unless taskset pins the pair to CPU 0.
bare_for = {"memsup": "unpinned", "memsup-out-of-line": "unpinned", "memsup-taskset-c0": "same-cpu"}

print(f"N={n} pairs per run (massif: {massif_n}), R={reps} repetitions, medians of wall seconds.\n")
for workload in ["dynamic-1t", "dynamic-4t", "static-1t", "static-4t"]:
    native, native_count = median_ok(workload, "native")
    print(f"### {workload}\n")
    print("| tool | median s | vs native | ok runs | stops/event | µs/hit | vs bare round trip |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| native | {native:.4f} | 1.0× | {native_count} | | | |")
    for tool in ["memsup", "memsup-out-of-line", "memsup-taskset-c0", "heaptrack", "massif"]:
        if (workload, tool) not in runs:
            print(f"| {tool} | n/a (static) | | | | | |")
            continue
        wall, count = median_ok(workload, tool)
        base = native
        if tool == "massif" and massif_n != n:
            base, _ = median_ok(workload, "native-at-massif-n")
        if wall is None:
            print(f"| {tool} | all runs failed | | {count} | | | |")
            continue
        line = f"| {tool} | {wall:.3f} | {wall / base:.0f}× | {count} |"
        p = probes(workload, tool)
        if p and tool.startswith("memsup"):
            hits = p["entry_hits"] + p["return_hits"]
            us_per_hit = (wall - native) * 1e6 / hits
            ref = bare[bare_for[tool]]
            line += f" {p['stops'] / p['calls']:.2f} | {us_per_hit:.1f} | {us_per_hit / ref:.2f}× ({bare_for[tool]} {ref:.1f} µs) |"
        else:
            line += " | | |"
        print(line)
    print()
    for tool in ["memsup", "memsup-out-of-line", "memsup-taskset-c0"]:
        p = probes(workload, tool)
        if p:
            print(f"- {tool}: calls {p['calls']}, stops {p['stops']}, entry_hits {p['entry_hits']}, "
                  f"return_hits {p['return_hits']}, emulated {p['emulated']}, out_of_line {p['out_of_line']}, "
                  f"single_steps {p['single_steps']}, stop_the_world {p['stop_the_world']}")
    print()

print(f"### Bare ptrace round trip (roundtrip.c, K={k})\n")
print("| placement | median µs (wall, same harness) | median µs (tracer's own clock) | range (wall) |")
print("|---|---:|---:|---|")
for name, (walls, internals) in roundtrip.items():
    print(f"| {name} | {statistics.median(walls):.1f} | {statistics.median(internals):.1f} | "
          f"{min(walls):.1f}–{max(walls):.1f} |")
