//! The MPI calls of a process image: one row per MPI function, in the order of first calls.

use std::io::Write;

use super::components::short_bytes;
use super::human_duration;
use crate::analysis::mpi_calls::MpiFunctionStats;

/// "+1.50 MiB", "-12 bytes", "0 bytes".
fn signed_bytes(bytes: i64) -> String {
    let sign = match bytes {
        1.. => "+",
        ..=-1 => "-",
        0 => "",
    };
    format!("{sign}{}", short_bytes(bytes.unsigned_abs()))
}

/// RSS before the first call and after the last, from the nearest status samples, or read
/// at the stops with PSS.
fn rss_around(stats: &MpiFunctionStats) -> String {
    let shown = |bytes: Option<u64>| bytes.map_or_else(|| "?".to_string(), short_bytes);
    let rss = format!(
        "{} -> {}",
        shown(stats.rss_before_bytes),
        shown(stats.rss_after_bytes)
    );
    if !stats.residency_at_stops {
        return rss;
    }
    let pss_before = shown(stats.pss_before_bytes);
    let pss_after = shown(stats.pss_after_bytes);
    format!("{rss}, PSS {pss_before} -> {pss_after} (at the stops)")
}

/// The table, when the image made MPI calls.
pub(super) fn render_mpi_calls(
    functions: &[MpiFunctionStats],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if functions.is_empty() {
        return Ok(());
    }
    let name_width = functions
        .iter()
        .map(|stats| stats.function.len())
        .max()
        .unwrap_or(0)
        .max(12);
    writeln!(
        out,
        "  MPI calls (allocations made inside each call; delta: live requested bytes after \
         its return minus before its entry; RSS sampled but where read at the stops)"
    )?;
    writeln!(
        out,
        "    {:<name_width$} {:>7} {:>11} {:>9} {:>11} {:>11} {:>11}  RSS first/last call",
        "function", "calls", "time", "blocks", "bytes", "still live", "delta"
    )?;
    for stats in functions {
        writeln!(
            out,
            "    {:<name_width$} {:>7} {:>11} {:>9} {:>11} {:>11} {:>11}  {}",
            stats.function,
            stats.calls,
            human_duration(stats.time_ns),
            stats.allocations,
            short_bytes(stats.allocated_bytes),
            short_bytes(stats.live_bytes_at_finalize),
            signed_bytes(stats.delta_bytes),
            rss_around(stats)
        )?;
    }
    Ok(())
}
