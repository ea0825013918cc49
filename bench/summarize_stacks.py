#!/usr/bin/env python3
"""Turn the raw output of bench/stacks.sh into markdown tables.
Usage: summarize_stacks.py RESULTS_DIR N D R"""
import json
import os
import sys

import bench_results
from bench_results import read_runs

results_dir, n, depth, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

runs = read_runs(results_dir)


def median_ok(workload, tool):
    return bench_results.median_ok(runs, workload, tool)


def report(workload, tool):
    path = os.path.join(results_dir, f"{workload}.{tool}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def totals(data):
    """Calls, probe hits, stack copies and their tracer time over every process."""
    calls = hits = copies = copy_ns = 0
    for process in data["processes"]:
        calls += sum(process["calls"].values())
        probes = process["probes"]
        hits += probes["entry_hits"] + probes["return_hits"]
        copies += probes.get("stack_copies", 0)
        copy_ns += probes.get("stack_copy_ns", 0)
    return calls, hits, copies, copy_ns


print(f"N={n} malloc/free pairs per run, deep recursion D={depth}, R={reps} repetitions, "
      f"medians of wall seconds.\n")
for workload in ["churn", "deep"]:
    native, native_count = median_ok(workload, "native")
    print(f"### {workload}\n")
    print("| tool | median s | vs native | ok runs | µs per allocator call |")
    print("|---|---:|---:|---:|---:|")
    print(f"| native | {native:.4f} | 1.0× | {native_count} | |")
    per_call = {}
    for tool in ["memsup-caller", "memsup-full", "heaptrack"]:
        wall, count = median_ok(workload, tool)
        if wall is None:
            print(f"| {tool} | all runs failed | | {count} | |")
            continue
        data = report(workload, tool) if tool.startswith("memsup") else None
        calls = totals(data)[0] if data else 2 * n
        per_call[tool] = (wall - native) * 1e6 / calls
        print(f"| {tool} | {wall:.3f} | {wall / native:.0f}× | {count} | {per_call[tool]:.1f} |")
    print()
    caller, full = per_call.get("memsup-caller"), per_call.get("memsup-full")
    if caller and full:
        print(f"- Full stacks add {full - caller:.1f} µs per allocator call to "
              f"{caller:.1f} µs ({(full - caller) / caller * 100:.0f} %, wall clock).")
    data = report(workload, "memsup-full")
    if data:
        calls, hits, copies, copy_ns = totals(data)
        stopped_us = caller * calls / hits if caller else None
        copy_us = copy_ns / copies / 1e3 if copies else 0
        # The copy is the entry stop's one read of the tracee's stack; with --stacks caller
        # that read fetches the 8-byte return address instead.
        line = (f"- Stack copies: {copies}, {copy_us:.2f} µs each in the tracer while the thread is "
                f"stopped (the entry stop's one stack read, 8 bytes with `--stacks caller`)")
        if stopped_us:
            line += (f"; a probe hit costs {stopped_us:.1f} µs with `--stacks caller`: the whole copy "
                     f"is {copy_us / stopped_us * 100:.0f} % of the stop it is made in, an upper bound "
                     f"of what stacks add to it")
        print(line + ".")
        costs = data.get("unwind_costs")
        if costs and costs["unwind_ns"]:
            print(f"- Unwinding (collector thread, off the stop path): {costs['stacks']} stacks, "
                  f"{costs['frames'] / max(costs['stacks'], 1):.1f} frames each, "
                  f"{costs['unwind_ns'] / costs['stacks'] / 1e3:.2f} µs per stack, "
                  f"{costs['frames'] / costs['unwind_ns'] * 1e3:.1f} M frames/s; "
                  f"{costs['copied_bytes'] / max(costs['stacks'], 1) / 1024:.1f} KiB copied per stack; "
                  f"{costs['truncated']} truncated; symbolising {costs['addresses']} addresses took "
                  f"{costs['symbolize_ns'] / 1e6:.0f} ms.")
    print()
