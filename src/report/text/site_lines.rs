//! The call sites of the short text report: one line each, in one list by bytes live at the
//! peak (its other numbers as columns), then the mapping sites but the dynamic loader's.

use std::io::Write;

use super::chain::compact_chain;
use super::{plural, short_bytes};
use crate::analysis::live_end::LiveEnd;
use crate::analysis::{MappingSite, ProcessAnalysis};
use crate::platform::libraries::LibraryKind;

/// The columns of a heap site line: bytes at the peak, allocations, bytes allocated,
/// temporary allocations, leaked bytes and blocks, then the stack.
fn heap_columns(cells: [&str; 6]) -> String {
    let [peak, allocations, allocated, temporary, leaked, site] = cells;
    format!("  {peak:>11}  {allocations:>6}  {allocated:>11}  {temporary:>9}  {leaked:>22}  {site}")
}

/// The heap sites (merged by source location, in the analysis order: bytes at the peak,
/// then bytes allocated), at most `top`.
pub(super) fn render_heap_sites(
    image: &ProcessAnalysis,
    top: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let (sites, executable) = (&image.source_sites, &image.exe);
    if sites.is_empty() || top == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "  heap sites by bytes live at the peak{}",
        more_note(sites.len(), top)
    )?;
    let header = [
        "at peak",
        "allocs",
        "allocated",
        "temporary",
        LiveEnd::of(image).column(),
        "site",
    ];
    writeln!(out, "{}", heap_columns(header))?;
    for site in sites.iter().take(top) {
        let metrics = &site.metrics;
        let leaked = match metrics.leaked_blocks {
            0 => "0".to_string(),
            blocks => format!(
                "{} in {}",
                short_bytes(metrics.leaked_bytes),
                plural(blocks, "block")
            ),
        };
        let line = heap_columns([
            &short_bytes(metrics.peak_bytes),
            &metrics.allocations.to_string(),
            &short_bytes(metrics.bytes_allocated),
            &metrics.temporary_allocations.to_string(),
            &leaked,
            &compact_chain(&site.stack, executable),
        ]);
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The sites that mapped memory, by bytes mapped, at most `top`, without those whose
/// innermost frame is the dynamic loader's (mapping the program's libraries: `--stacks full`
/// shows them).
pub(super) fn render_mapping_sites(
    sites: &[MappingSite],
    executable: &str,
    top: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mapping: Vec<&MappingSite> = sites
        .iter()
        .filter(|site| site.mappings.bytes_mapped() > 0)
        .collect();
    let (loader, shown): (Vec<&MappingSite>, Vec<&MappingSite>) =
        mapping.into_iter().partition(|site| is_loader_site(site));
    if top == 0 || (shown.is_empty() && loader.is_empty()) {
        return Ok(());
    }
    let hidden = match loader.len() {
        0 => String::new(),
        count => format!(
            "; {} of the dynamic loader not shown (--stacks full)",
            plural(count as u64, "site")
        ),
    };
    writeln!(
        out,
        "  mapping sites by bytes mapped{}{hidden}",
        more_note(shown.len(), top)
    )?;
    for site in shown.iter().take(top) {
        let mappings = &site.mappings;
        let calls = super::sites::call_counts(mappings);
        writeln!(
            out,
            "  {:>11}  {:<16}  {}",
            short_bytes(mappings.bytes_mapped()),
            calls.join(", "),
            compact_chain(&site.stack, executable)
        )?;
    }
    Ok(())
}

/// ` (10 of 23; --top N)` when only `top` of `count` are shown.
fn more_note(count: usize, top: usize) -> String {
    if count > top {
        format!(" ({top} of {count}; --top N for more)")
    } else {
        String::new()
    }
}

fn is_loader_site(site: &MappingSite) -> bool {
    site.stack
        .first()
        .is_some_and(|frame| LibraryKind::of(&frame.module) == LibraryKind::DynamicLinker)
}
