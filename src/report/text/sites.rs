//! The call-site lists of the text report: the top sites by peak, allocations, leaks and
//! temporary allocations, then the mapping sites, each with its numbers and its stack.

use std::io::Write;

use super::{human_bytes, human_duration, plural};
use crate::analysis::live_end::LiveEnd;
use crate::analysis::{Frame, MappingSite, MappingStats, Site, SiteMetrics, MAP_CALLS};

/// One list: its title, the number it ranks by, and how the number reads, given the words
/// for what was live at the end ("leaked", "live at detach", ...: `LiveEnd::words`).
struct SiteList {
    title: fn(&str) -> String,
    key: fn(&SiteMetrics) -> u64,
    headline: fn(&SiteMetrics, &str) -> String,
}

const HEAP_LISTS: [SiteList; 4] = [
    SiteList {
        title: |_| "call sites by bytes live at the peak".to_string(),
        key: |metrics| metrics.peak_bytes,
        headline: |metrics, _| {
            format!(
                "{} live at the peak in {}",
                human_bytes(metrics.peak_bytes),
                plural(metrics.peak_blocks, "block")
            )
        },
    },
    SiteList {
        title: |_| "call sites by allocations".to_string(),
        key: |metrics| metrics.allocations,
        headline: |metrics, _| {
            format!(
                "{}, {}",
                plural(metrics.allocations, "allocation"),
                human_bytes(metrics.bytes_allocated)
            )
        },
    },
    SiteList {
        title: |live| format!("call sites by bytes {live}"),
        key: |metrics| metrics.leaked_bytes,
        headline: |metrics, live| {
            format!(
                "{} {live} in {}",
                human_bytes(metrics.leaked_bytes),
                plural(metrics.leaked_blocks, "block")
            )
        },
    },
    SiteList {
        title: |_| "call sites by temporary allocations".to_string(),
        key: |metrics| metrics.temporary_allocations,
        headline: |metrics, _| {
            format!(
                "{}, {}",
                plural(metrics.temporary_allocations, "temporary allocation"),
                human_bytes(metrics.temporary_bytes)
            )
        },
    },
];

/// Each list with at least one site whose number is not 0, at most `top` sites long; `live`
/// says what the blocks live at the end are.
pub(super) fn render_heap_sites(
    sites: &[Site],
    top: usize,
    live: LiveEnd,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let live = live.words();
    for list in &HEAP_LISTS {
        let mut ranked: Vec<&Site> = sites
            .iter()
            .filter(|site| (list.key)(&site.metrics) > 0)
            .collect();
        if ranked.is_empty() || top == 0 {
            continue;
        }
        // Stable: ties keep the analysis order (peak bytes, then bytes allocated).
        ranked.sort_by_key(|site| std::cmp::Reverse((list.key)(&site.metrics)));
        writeln!(out, "  {}", (list.title)(live))?;
        for (rank, site) in ranked.iter().take(top).enumerate() {
            let headline = (list.headline)(&site.metrics, live);
            writeln!(out, "    #{} {headline}", rank + 1)?;
            for line in detail_lines(&site.metrics, live) {
                writeln!(out, "       {line}")?;
            }
            render_stack(&site.stack, out)?;
        }
    }
    Ok(())
}

/// The mapping sites that mapped memory, by bytes mapped, at most `top`.
pub(super) fn render_mapping_sites(
    sites: &[MappingSite],
    top: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mapping: Vec<&MappingSite> = sites
        .iter()
        .filter(|site| site.mappings.bytes_mapped() > 0)
        .take(top)
        .collect();
    if mapping.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  mapping call sites by bytes mapped (mmap and brk growth)"
    )?;
    for (rank, site) in mapping.iter().enumerate() {
        let mappings = &site.mappings;
        writeln!(
            out,
            "    #{} {} mapped (mmap {}, brk growth {})",
            rank + 1,
            human_bytes(mappings.bytes_mapped()),
            plural(mappings.mmap_bytes, "byte"),
            plural(mappings.brk_growth_bytes, "byte")
        )?;
        let calls = call_counts(mappings);
        writeln!(
            out,
            "       calls: {}; munmap'd {}",
            calls.join(", "),
            plural(mappings.munmap_bytes, "byte")
        )?;
        render_stack(&site.stack, out)?;
    }
    Ok(())
}

/// Every number of a site, in three lines.
/// "mmap 3", "brk 2": the mapping calls a site made, those it did not left out.
pub(super) fn call_counts(mappings: &MappingStats) -> Vec<String> {
    MAP_CALLS
        .iter()
        .filter_map(|call| {
            let count = mappings.calls.get(call).copied().unwrap_or(0);
            (count > 0).then(|| format!("{} {count}", call.name()))
        })
        .collect()
}

fn detail_lines(metrics: &SiteMetrics, live: &str) -> [String; 3] {
    let recycling = match metrics.recycling_ratio() {
        Some(ratio) => format!("{ratio:.2}"),
        None => "none".to_string(),
    };
    let freed = match metrics.lifetimes_ns() {
        Some((min, average, max)) => format!(
            "freed {}: lifetime min {}, average {}, max {}",
            plural(metrics.freed_blocks, "block"),
            human_duration(min),
            human_duration(average),
            human_duration(max)
        ),
        None => "freed none (lifetimes are those of freed blocks)".to_string(),
    };
    [
        format!(
            "{}, {}: size min {}, average {}, max {}",
            plural(metrics.allocations, "allocation"),
            plural(metrics.bytes_allocated, "byte"),
            metrics.min_size,
            metrics.average_size(),
            metrics.max_size
        ),
        format!(
            "peak {} in {}, local peak {}, recycling ratio {recycling}; {live} {} in {}; \
             temporary {} ({})",
            plural(metrics.peak_bytes, "byte"),
            plural(metrics.peak_blocks, "block"),
            plural(metrics.local_peak_bytes, "byte"),
            plural(metrics.leaked_bytes, "byte"),
            plural(metrics.leaked_blocks, "block"),
            metrics.temporary_allocations,
            plural(metrics.temporary_bytes, "byte")
        ),
        freed,
    ]
}

fn render_stack(stack: &[Frame], out: &mut dyn Write) -> std::io::Result<()> {
    if stack.is_empty() {
        return writeln!(out, "       (no stack recorded)");
    }
    for frame in stack {
        writeln!(out, "       {}", frame_line(frame))?;
    }
    Ok(())
}

/// `function (inlined) at file:line in module`; `function+0xOFFSET in module` without a
/// source position; `0xADDRESS in module` for an unknown function.
pub fn frame_line(frame: &Frame) -> String {
    let mut line = if frame.function.is_empty() {
        format!("{:#x}", frame.address)
    } else {
        frame.function.clone()
    };
    if frame.file.is_none() && !frame.function.is_empty() && !frame.module.is_empty() {
        line.push_str(&format!("+{:#x}", frame.offset));
    }
    if frame.inlined {
        line.push_str(" (inlined)");
    }
    if let Some(file) = &frame.file {
        line.push_str(" at ");
        line.push_str(file);
        if let Some(number) = frame.line {
            line.push_str(&format!(":{number}"));
        }
    }
    if !frame.module.is_empty() {
        line.push_str(" in ");
        line.push_str(frame.module_file_name());
    }
    line
}
