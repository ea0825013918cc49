#!/bin/sh
# The job report over many rank profiles: `memsup report DIR` on RANKS synthetic rank
# profiles of EVENTS heap events each (examples/rank_profiles.rs), each format, with rayon
# given 1 thread and then 2, side by side, REPEAT times.
# Usage: bench/job_merge.sh [RANKS [EVENTS [REPEAT]]]   (default: 1024 4000 3)
# Prints: threads, format, wall seconds, user and system CPU seconds, peak RSS (KiB), output bytes.
set -eu
cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "job_merge.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
ranks=${1:-1024}
events=${2:-4000}
repeat=${3:-3}
cargo build --release --quiet --example rank_profiles
cargo build --release --quiet
directory=${TMPDIR:-/tmp}/memsup-job-merge
rm -rf "$directory"
mkdir -p "$directory/job"
target/release/examples/rank_profiles "$ranks" "$events" "$directory/job"
echo "$ranks profiles, $(du -sk "$directory/job" | cut -f1) KiB on disk; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%7s %6s %8s %8s %8s %12s %12s\n' threads format wall_s user_s sys_s peak_rss_KiB output_bytes
for round in $(seq "$repeat"); do
    for format in csv text json; do
        for threads in 1 2; do
            RAYON_NUM_THREADS=$threads /usr/bin/time -f '%e %U %S %M' -o "$directory/time" \
                target/release/memsup report --format "$format" "$directory/job" > "$directory/out"
            read -r wall user system rss < "$directory/time"
            printf '%7s %6s %8s %8s %8s %12s %12s\n' "$threads" "$format" "$wall" "$user" "$system" "$rss" \
                "$(stat -c %s "$directory/out")"
        done
    done
done
