"""Summary of bench/compare.sh: per workload, the medians of native, this build and the base
build, and this build against the base (the ratio the change costs)."""
import sys

from bench_results import median_ok, read_runs


def main():
    out, repetitions = sys.argv[1], sys.argv[2]
    runs = read_runs(out)
    workloads = sorted({workload for workload, _ in runs})
    print(f"R={repetitions} (medians of the ok runs; wall time)\n")
    print("| workload | native | memsup | memsup-base | memsup / base | ok runs |")
    print("|---|---:|---:|---:|---:|---|")
    for workload in workloads:
        native, _ = median_ok(runs, workload, "native")
        head, head_ok = median_ok(runs, workload, "memsup")
        base, base_ok = median_ok(runs, workload, "memsup-base")
        ratio = f"{head / base:.3f}" if head and base else "n/a"
        cell = lambda value: f"{value:.3f} s" if value is not None else "n/a"
        print(f"| {workload} | {cell(native)} | {cell(head)} | {cell(base)} | {ratio} | {head_ok}, {base_ok} |")


if __name__ == "__main__":
    main()
