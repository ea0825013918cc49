//! The short text report of a process image (the default): what it peaked at and when, what
//! it left live, who held its memory, then one line per call site (`site_lines`).

use std::io::Write;

use super::components::render_components;
use super::{
    calls_summary, engine_rows, exit_description, human_bytes, human_duration, mapping_rows,
    mpi_calls, plural, probe_rows, render_process_title, render_warnings, short_bytes, site_lines,
    Rows, TextOptions, LABEL_WIDTH,
};
use crate::analysis::live_end::LiveEnd;
use crate::analysis::{ProcessAnalysis, ProfileInfo};
use crate::trace::census_format::HeapCensus;

/// The components named on the summary line; the others are counted.
const COMPONENTS_SHOWN: usize = 6;

pub(super) fn render_process(
    image: &ProcessAnalysis,
    options: TextOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    render_process_title(image, out)?;
    let mut rows = summary_rows(image);
    if options.verbose {
        rows.extend(probe_rows(&image.probes));
        rows.extend(engine_rows(image));
    }
    for (label, value) in rows {
        writeln!(out, "  {label:<LABEL_WIDTH$} {value}")?;
    }
    if options.verbose {
        render_components(&image.components, true, out)?;
    } else if let Some((label, line)) = components_line(image) {
        writeln!(out, "  {label:<LABEL_WIDTH$} {line}")?;
    }
    super::resident_reasons::render_resident_reasons(image, out)?;
    render_warnings(image, out)?;
    mpi_calls::render_mpi_calls(&image.mpi_calls, out)?;
    site_lines::render_heap_sites(image, options.top, out)?;
    site_lines::render_mapping_sites(&image.mapping_sites, &image.exe, options.top, out)
}

fn summary_rows(image: &ProcessAnalysis) -> Rows {
    let command = match image.argv.is_empty() {
        true => format!("(unknown), executable {}", image.exe),
        false => image.argv.join(" "),
    };
    let exit = format!(
        "{} after {} (started {} into the recording)",
        exit_description(image.exit),
        human_duration(image.duration_ns),
        human_duration(image.start_ns)
    );
    let mut rows = vec![("command", command), ("exit", exit)];
    rows.extend(before_attach_row(image));
    let calls = calls_summary(image);
    if calls.is_empty() {
        rows.push(("calls", "none".to_string()));
    } else {
        rows.extend(heap_rows(image, calls));
    }
    rows.extend(resident_row(image));
    rows.extend(mapping_row(image));
    rows
}

/// What glibc's heap held when memsup attached, by its census.
fn before_attach_row(image: &ProcessAnalysis) -> Rows {
    let value = match &image.census_at_attach {
        None => return Vec::new(),
        Some(HeapCensus::Untrusted { reason }) => format!("not counted: {reason}"),
        Some(HeapCensus::Walked(census)) => {
            let mut live = census.mmapped;
            for arena in &census.arenas {
                live.merge(arena.in_use);
            }
            format!(
                "{}, {} (glibc's chunks in use when memsup attached, by its heap census)",
                plural(live.count, "block"),
                human_bytes(live.bytes)
            )
        }
    };
    vec![("live before attach", value)]
}

/// Peak, leaks, then what made them.
fn heap_rows(image: &ProcessAnalysis, calls: String) -> Rows {
    let mut allocations = format!(
        "{}, {}: {calls}",
        plural(image.allocations, "block"),
        human_bytes(image.bytes_allocated)
    );
    if image.failed_allocations > 0 {
        allocations.push_str(&format!("; {} failed", image.failed_allocations));
    }
    let mut rows = vec![
        ("peak requested", super::peak_value(image)),
        (LiveEnd::of(image).label(), super::leaked_value(image)),
        ("allocations", allocations),
    ];
    if image.unknown_frees > 0 {
        rows.push(("unknown frees", super::unknown_frees_value(image)));
    }
    rows.extend(crate::report::size_classes::text_row(image));
    rows
}

/// The highest RSS and PSS seen, by the samples or by an smaps snapshot.
fn resident_row(image: &ProcessAnalysis) -> Rows {
    let (rss, pss, swap) = image.peak_resident();
    if rss == 0 {
        return Vec::new();
    }
    let mut value = format!("RSS {}", human_bytes(rss));
    if pss > 0 {
        value.push_str(&format!(", PSS {}", human_bytes(pss)));
    }
    if swap > 0 {
        value.push_str(&format!(", swap {}", human_bytes(swap)));
    }
    vec![("peak resident", value)]
}

/// The mapping calls and bytes in one row.
fn mapping_row(image: &ProcessAnalysis) -> Rows {
    let rows = mapping_rows(image);
    let Some((_, calls)) = rows.first() else {
        return Vec::new();
    };
    if rows.len() == 1 {
        // "none": a process that mapped nothing needs no row.
        return Vec::new();
    }
    let mappings = &image.mappings;
    vec![(
        "mapping calls",
        format!(
            "{calls}: {} mmap'd, {} munmap'd, {} brk growth",
            short_bytes(mappings.mmap_bytes),
            short_bytes(mappings.munmap_bytes),
            short_bytes(mappings.brk_growth_bytes)
        ),
    )]
}

/// Each component's peak RSS (and peak requested, where it requested any), highest first;
/// without snapshots, its peak requested.
fn components_line(image: &ProcessAnalysis) -> Option<(&'static str, String)> {
    let mut components: Vec<_> = image
        .components
        .components
        .iter()
        .filter(|component| component.peak_rss_bytes + component.peak_requested_bytes > 0)
        .collect();
    if components.is_empty() {
        return None;
    }
    components.sort_by_key(|component| std::cmp::Reverse(component.peak_rss_bytes));
    let measured = components[0].peak_rss_bytes > 0;
    let mut parts: Vec<String> = components
        .iter()
        .take(COMPONENTS_SHOWN)
        .map(|component| {
            if component.peak_rss_bytes == 0 {
                let requested = short_bytes(component.peak_requested_bytes);
                return format!("{} {requested} requested", component.name);
            }
            let mut part = format!(
                "{} {}",
                component.name,
                short_bytes(component.peak_rss_bytes)
            );
            if component.peak_requested_bytes > 0 {
                part.push_str(&format!(
                    " ({} requested)",
                    short_bytes(component.peak_requested_bytes)
                ));
            }
            part
        })
        .collect();
    if components.len() > COMPONENTS_SHOWN {
        parts.push(format!("{} more", components.len() - COMPONENTS_SHOWN));
    }
    let label = if measured {
        "components (RSS)"
    } else {
        "components"
    };
    Some((label, parts.join(", ")))
}

/// What the residency sampler and the unwinding cost, for the whole recording.
pub(super) fn render_profile_costs(
    profile: &ProfileInfo,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(sampler) = &profile.sampler_costs {
        writeln!(
            out,
            "  {:<12} {} ({} CPU), {} ({} CPU), over {}",
            "sampler",
            plural(sampler.status_samples, "status sample"),
            human_duration(sampler.status_cpu_ns),
            plural(sampler.rollup_samples, "smaps_rollup sample"),
            human_duration(sampler.rollup_cpu_ns),
            human_duration(sampler.elapsed_ns)
        )?;
    }
    if let Some(unwind) = &profile.unwind_costs {
        writeln!(
            out,
            "  {:<12} {}, {} ({} stopped early), {} copied; unwinding {}, symbolising {} ({} addresses)",
            "unwinding",
            plural(unwind.stacks, "stack"),
            plural(unwind.frames, "frame"),
            unwind.truncated,
            short_bytes(unwind.copied_bytes),
            human_duration(unwind.unwind_ns),
            human_duration(unwind.symbolize_ns),
            unwind.addresses
        )?;
    }
    if let Some(recorder) = &profile.recorder_costs {
        writeln!(
            out,
            "  {:<12} peak RSS {}, {} CPU",
            "memsup",
            short_bytes(recorder.peak_rss_bytes),
            human_duration(recorder.cpu_ns)
        )?;
    }
    Ok(())
}
