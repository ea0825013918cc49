"""What the benchmark drivers write, read back: results.tsv and the median of the ok runs."""
import csv
import os
import statistics


def read_runs(results_dir):
    """(workload, tool) -> [(seconds, status)] from results.tsv."""
    runs = {}
    with open(os.path.join(results_dir, "results.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            runs.setdefault((row["workload"], row["tool"]), []).append((float(row["seconds"]), row["status"]))
    return runs


def median_ok(runs, workload, tool):
    """Median wall seconds over the successful runs (None if none), and 'ok/total'."""
    entries = runs.get((workload, tool), [])
    ok = [s for s, status in entries if status == "ok"]
    return (statistics.median(ok) if ok else None), f"{len(ok)}/{len(entries)}"
