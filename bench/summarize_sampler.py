#!/usr/bin/env python3
"""Turn the raw output of bench/sampler.sh into sampler.tsv (one row per run) and markdown
tables on stdout.
Usage: summarize_sampler.py RESULTS_DIR R SMAPS_INTERVAL GIB COUNT

Every cost is CPU time of memsup's sampler thread (CLOCK_THREAD_CPUTIME_ID, from the
report's sampler_costs) or of procread's thread, not wall time. Full smaps snapshot costs
come from a per-process `snapshots` list in the JSON report when the report has one."""
import csv
import json
import os
import statistics
import sys

from bench_results import read_runs

results_dir, reps, smaps_interval, gib, count = sys.argv[1:6]
BUDGET = 5.0  # % of one core, the sampler's target (src/sampler/budget.rs)
FIXTURES = {"resident": f"resident ({gib} GiB held)", "mappings": f"mappings ({count} one-page VMAs)"}
FIXTURES_ORDER = ["resident", "mappings"]
runs = read_runs(results_dir)


def tool_key(tool):
    """interval-N by N, then the smaps-interval run."""
    kind, _, value = tool.partition("-")
    return (kind != "interval", int(value) if value.isdigit() else 0)


def snapshots(data):
    """Every full smaps snapshot the report lists (any process), [] when it lists none."""
    found = []
    for process in data.get("processes", []):
        for holder in (process, process.get("residency") or {}):
            for snapshot in holder.get("snapshots") or []:
                if isinstance(snapshot, dict) and "cost_ns" in snapshot:
                    found.append(snapshot)
    return found


def mapping_count(snapshot):
    mappings = snapshot.get("mappings")
    return len(mappings) if isinstance(mappings, list) else mappings


rows = []
for name in sorted(os.listdir(results_dir)):
    if not name.endswith(".json"):
        continue
    fixture, tool, rep = name[: -len(".json")].split(".")
    with open(os.path.join(results_dir, name)) as f:
        data = json.load(f)
    costs = data.get("sampler_costs")
    if not costs or not costs.get("elapsed_ns"):
        print(f"(no sampler_costs in {name})", file=sys.stderr)
        continue
    status = [s for (_, s) in runs.get((fixture, tool), [])]
    elapsed = costs["elapsed_ns"]
    taken = snapshots(data)
    row = {
        "fixture": fixture,
        "tool": tool,
        "rep": rep,
        "status_interval_ms": costs["status_interval_ns"] / 1e6,
        "elapsed_s": elapsed / 1e9,
        "status_samples": costs["status_samples"],
        "status_reads_per_s": costs["status_samples"] / (elapsed / 1e9),
        "status_us_per_read": costs["status_cpu_ns"] / max(costs["status_samples"], 1) / 1e3,
        "rollup_samples": costs["rollup_samples"],
        "rollup_ms_per_read": costs["rollup_cpu_ns"] / max(costs["rollup_samples"], 1) / 1e6,
        "rollup_interval_ms": costs["rollup_interval_ns"] / 1e6,
        "rollup_mean_interval_ms": elapsed / max(costs["rollup_samples"], 1) / 1e6,
        "status_cpu_pct": 100 * costs["status_cpu_ns"] / elapsed,
        "rollup_cpu_pct": 100 * costs["rollup_cpu_ns"] / elapsed,
        "sampler_cpu_pct": 100 * (costs["status_cpu_ns"] + costs["rollup_cpu_ns"]) / elapsed,
        "snapshots": len(taken) if taken else "",
        "snapshot_ms_median": statistics.median(s["cost_ns"] for s in taken) / 1e6 if taken else "",
        "snapshot_mappings_max": max((mapping_count(s) or 0) for s in taken) if taken else "",
        "snapshot_reasons": ",".join(sorted({str(s.get("reason", "?")) for s in taken})),
    }
    rows.append(row)

rows.sort(key=lambda r: (FIXTURES_ORDER.index(r["fixture"]) if r["fixture"] in FIXTURES_ORDER else 9,
                         tool_key(r["tool"]), r["rep"]))
if rows:
    with open(os.path.join(results_dir, "sampler.tsv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()})

reads = {}
reads_path = os.path.join(results_dir, "reads.tsv")
if os.path.exists(reads_path):
    with open(reads_path) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            reads[(row["fixture"], row["file"], int(row["gap_ms"]))] = row


def read_cost(fixture, file, gap=0):
    row = reads.get((fixture, file, gap))
    return int(row["median_ns"]) if row else None


machine = ""
if os.path.exists(os.path.join(results_dir, "machine.txt")):
    with open(os.path.join(results_dir, "machine.txt")) as f:
        machine = f.read().strip()
print(f"{machine}\n\nR={reps} repetitions per interval (medians), plus one run with "
      f"--smaps-interval {smaps_interval} per fixture. CPU time of memsup's sampler thread "
      f"(CLOCK_THREAD_CPUTIME_ID), not wall time; sampler CPU = (status + rollup CPU) / "
      f"elapsed; the budget is {BUDGET:g} % of one core. The rollup interval at the end is the "
      f"adapted one when the sampler stopped; the mean is elapsed / rollup reads (it includes "
      f"the cheaper reads while the fixture builds up its memory).\n")


def median(values):
    values = [v for v in values if v != ""]
    return statistics.median(values) if values else None


for fixture in FIXTURES_ORDER:
    mine = [r for r in rows if r["fixture"] == fixture]
    if not mine:
        continue
    print(f"### {FIXTURES.get(fixture, fixture)}\n")
    print("| run | ok runs | status reads/s | µs CPU per status read | rollup interval at the end "
          "(mean) | ms CPU per rollup read | rollup reads | sampler CPU % of a core | within 5 %? | "
          "full smaps ms per snapshot |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for tool in sorted({r["tool"] for r in mine}, key=tool_key):
        group = [r for r in mine if r["tool"] == tool]
        _, ok = None, sum(1 for (_, s) in runs.get((fixture, tool), []) if s == "ok")
        total = len(runs.get((fixture, tool), []))
        cpu = [r["sampler_cpu_pct"] for r in group]
        worst = max(cpu)
        snapshot_ms = median([r["snapshot_ms_median"] for r in group])
        if snapshot_ms is not None:
            count = median([r["snapshots"] for r in group])
            snapshot = f"{snapshot_ms:.1f} ({count:g} taken)"
        else:
            smaps = read_cost(fixture, "smaps")
            snapshot = f"n/a in report; read alone {smaps / 1e6:.1f}" if smaps else "n/a"
        label = (f"--interval {tool.split('-')[1]}" if tool.startswith("interval-")
                 else f"--smaps-interval {tool.split('-')[1]} (status 20 ms)")
        print(f"| {label} | {ok}/{total} "
              f"| {median([r['status_reads_per_s'] for r in group]):.1f} "
              f"| {median([r['status_us_per_read'] for r in group]):.1f} "
              f"| {median([r['rollup_interval_ms'] for r in group]):.0f} ms "
              f"({median([r['rollup_mean_interval_ms'] for r in group]):.0f} ms) "
              f"| {median([r['rollup_ms_per_read'] for r in group]):.2f} "
              f"| {median([r['rollup_samples'] for r in group]):g} "
              f"| {median(cpu):.2f} (max {worst:.2f}) "
              f"| {'yes' if worst <= BUDGET else 'NO'} "
              f"| {snapshot} |")
    print()

if reads:
    gaps = sorted({gap for (_, _, gap) in reads})
    paced = max(gaps)
    print("### One read of each file, outside memsup (procread.c, median CPU time)\n")
    print(f"Back to back, and (after the slash) {paced} ms apart, as the sampler reads: cold caches.\n")
    print("| process | VMAs | VmRSS | status | smaps_rollup | smaps | smaps text |")
    print("|---|---:|---:|---:|---:|---:|---:|")

    def both(fixture, file, unit, digits):
        hot, cold = read_cost(fixture, file, 0), read_cost(fixture, file, paced)
        text = f"{hot / unit:.{digits}f}" if hot is not None else "n/a"
        if paced and cold is not None:
            text += f" / {cold / unit:.{digits}f}"
        return text

    for fixture in ["idle"] + FIXTURES_ORDER:
        status, rollup, smaps = (reads.get((fixture, f, 0)) for f in ("status", "smaps_rollup", "smaps"))
        if not (status and rollup and smaps):
            continue
        label = "idle (resident 0)" if fixture == "idle" else FIXTURES.get(fixture, fixture)
        print(f"| {label} | {status['vmas']} | {int(status['rss_kib']) / 1024:.0f} MiB "
              f"| {both(fixture, 'status', 1e3, 1)} µs "
              f"| {both(fixture, 'smaps_rollup', 1e6, 2)} ms "
              f"| {both(fixture, 'smaps', 1e6, 1)} ms "
              f"| {int(smaps['bytes']) / 1024:.0f} KiB |")
    print()
