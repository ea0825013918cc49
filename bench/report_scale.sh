#!/bin/sh
# Report time and peak RSS against the number of events, on synthetic churn profiles.
# Usage: bench/report_scale.sh [N...]   (default: 2000000 20000000)
# Prints: events, profile bytes, bytes/event, report wall seconds, report peak RSS (KiB).
set -eu
cd "$(dirname "$0")/.."
# GNU time gives the peak RSS (Debian package `time`).
[ -x /usr/bin/time ] || { echo "report_scale.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
cargo build --release --quiet --example synthetic_profile
cargo build --release --quiet
directory=${TMPDIR:-/tmp}/memsup-report-scale
mkdir -p "$directory"
[ $# -gt 0 ] || set -- 2000000 20000000
printf '%12s %12s %8s %10s %14s\n' events bytes B/event seconds peak_rss_KiB
for events in "$@"; do
    profile="$directory/synthetic-$events.msup"
    target/release/examples/synthetic_profile "$events" "$profile"
    bytes=$(stat -c %s "$profile")
    /usr/bin/time -f '%e %M' -o "$directory/time" target/release/memsup report "$profile" >/dev/null
    read -r seconds rss < "$directory/time"
    printf '%12s %12s %8.2f %10s %14s\n' "$events" "$bytes" \
        "$(awk -v b="$bytes" -v e="$events" 'BEGIN { print b / e }')" "$seconds" "$rss"
done
