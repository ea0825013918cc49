//! The components of a process image: who held its memory at the peaks, and the allocator
//! arenas at the last smaps snapshot.

use std::io::Write;

use super::{human_duration, plural, LABEL_WIDTH};
use crate::analysis::components::Components;

/// Width of each number column of the table.
const COLUMN_WIDTH: usize = 12;

/// The table of components (when there are any), then the snapshot and arena lines (when
/// there are snapshots).
pub(super) fn render_components(
    components: &Components,
    costs: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if !components.components.is_empty() {
        // The names are indented by two more than the labels.
        let name_width = components
            .components
            .iter()
            .map(|component| component.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(LABEL_WIDTH - 2);
        let title = "components (peaks)";
        let title_width = name_width + 2;
        writeln!(
            out,
            "  {title:<title_width$} {:>COLUMN_WIDTH$} {:>COLUMN_WIDTH$} {:>COLUMN_WIDTH$} {:>COLUMN_WIDTH$}",
            "requested", "RSS", "PSS", "swap"
        )?;
        for component in &components.components {
            // A name wider than the others' column widens it for every row.
            writeln!(
                out,
                "    {:<name_width$} {:>COLUMN_WIDTH$} {:>COLUMN_WIDTH$} {:>COLUMN_WIDTH$} {:>COLUMN_WIDTH$}",
                component.name,
                short_bytes(component.peak_requested_bytes),
                short_bytes(component.peak_rss_bytes),
                short_bytes(component.peak_pss_bytes),
                short_bytes(component.peak_swap_bytes)
            )?;
        }
    }
    if let Some(last) = components.snapshots.last() {
        let cost: u64 = components
            .snapshots
            .iter()
            .map(|snapshot| snapshot.cost_ns)
            .sum();
        let label = "smaps snapshots";
        if costs {
            let estimates = components
                .snapshots
                .iter()
                .filter(|snapshot| snapshot.pagemap_mappings.is_some())
                .count();
            let count = match estimates {
                0 => components.snapshots.len().to_string(),
                _ => format!(
                    "{} ({estimates} estimated from pagemap)",
                    components.snapshots.len()
                ),
            };
            writeln!(
                out,
                "  {label:<LABEL_WIDTH$} {count}, costing {}; the last ({}) {} into the recording",
                human_duration(cost),
                last.reason.name(),
                human_duration(last.time_ns)
            )?;
        }
        if let Some(split) = components.peak_split.filter(|split| split.peak_rss > 0) {
            let label = "split at peak RSS";
            let what = match split.measured {
                true => "measured",
                false => "not measured",
            };
            let highest = match split.estimated {
                true => "the highest snapshot (an estimate from pagemap)",
                false => "the highest snapshot",
            };
            writeln!(
                out,
                "  {label:<LABEL_WIDTH$} {what}: {highest} holds {} ({} into the \
                 recording), the status samples' peak RSS is {}",
                short_bytes(split.snapshot_rss),
                human_duration(split.snapshot_time_ns),
                short_bytes(split.peak_rss)
            )?;
        }
        let label = "allocator arenas";
        writeln!(
            out,
            "  {label:<LABEL_WIDTH$} {} resident, {} requested live, {} overhead (last snapshot)",
            short_bytes(last.arena_rss),
            short_bytes(last.arena_requested),
            short_bytes(last.arena_overhead_rss)
        )?;
    }
    Ok(())
}

/// "100 bytes", or "1.50 MiB" from 1 KiB up: `human_bytes` without the exact count.
pub fn short_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return plural(bytes, "byte");
    }
    let mut scaled = bytes as f64 / 1024.0;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{scaled:.2} {}", UNITS[unit])
}
