"""One line of sampler costs for a profile's first process (memsup report --format json on
stdin): status reads, rollups and snapshots for highs as shares of one core over the run,
their total, and for each high its MiB, the delay and cost of its snapshot in ms, and "e"
for an estimate (pagemap of the mappings changed since the last snapshot or estimate) or
"f" for a full snapshot; then how long after it the level the growth stopped at was first
measured."""
import json
import sys

report = json.load(sys.stdin)
process = report["processes"][0]
costs = report.get("sampler_costs")
if not costs:
    # A recording that ended before its sampler wrote its costs (memsup killed, say).
    sys.exit("no sampler costs in this profile")
elapsed = costs["elapsed_ns"]
highs = [snapshot for snapshot in process["snapshots"] if snapshot.get("high")]
highs_ns = sum(snapshot["cost_ns"] for snapshot in highs)
total = costs["status_cpu_ns"] + costs["rollup_cpu_ns"] + highs_ns


def share(ns):
    return f"{100 * ns / elapsed:.2f} %"


print(
    f"elapsed {elapsed / 1e9:.2f} s, status {costs['status_samples']} ({share(costs['status_cpu_ns'])}), "
    f"rollups {costs['rollup_samples']} ({share(costs['rollup_cpu_ns'])}), "
    f"highs {len(highs)} ({share(highs_ns)}), total {share(total)}"
)
print(
    "highs (MiB, delay ms, cost ms, kind):",
    [
        (
            s["high"]["bytes"] >> 20,
            round(s["high"]["delay_ns"] / 1e6, 1),
            round(s["cost_ns"] / 1e6, 1),
            "e" if s.get("estimated") else "f",
        )
        for s in highs
    ],
)
if highs:
    # The level the growth stopped at: the first measurement of a high within 3 % of the
    # highest, however it was taken.
    top = max(s["high"]["bytes"] for s in highs)
    first = next(s for s in highs if s["high"]["bytes"] >= top * 0.97)
    print(
        f"last level {top >> 20} MiB, first measured {first['high']['delay_ns'] / 1e6:.0f} ms "
        f"after ({'e' if first.get('estimated') else 'f'})"
    )
