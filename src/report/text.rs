//! The human-readable summary: a header about the recording, then one block per process image.

mod census;
mod chain;
mod components;
mod mpi_calls;
mod resident_reasons;
mod role;
mod site_lines;
mod sites;
mod summary;
mod threads;

pub use components::short_bytes;
pub use role::role_description;
pub use sites::frame_line;
pub use threads::thread_line;

use std::io::Write;

use crate::analysis::live_end::{leak_caveat, LiveEnd};
use crate::analysis::{
    cause_name, mode_name, Analysis, ImageExit, ProcessAnalysis, ProfileInfo, MAP_CALLS,
};
use crate::trace::format::{AllocFunction, Engine, HookCallCosts, HookStackCosts, ProbeCounters};

/// How many call sites each list shows unless told otherwise.
pub const DEFAULT_TOP: usize = 10;

/// Width of the label column of a process block.
const LABEL_WIDTH: usize = 20;

/// What the text report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Call sites per list.
    pub top: usize,
    /// Every list with whole stacks and every number (`--stacks full`), instead of one line
    /// per site in one list.
    pub full: bool,
    /// Also what watching cost and the diagnostics (`--verbose`).
    pub verbose: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            top: DEFAULT_TOP,
            full: false,
            verbose: false,
        }
    }
}

/// The report, as `options` says.
pub fn render(
    analysis: &Analysis,
    options: TextOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    render_header(&analysis.profile, out)?;
    if options.verbose {
        summary::render_profile_costs(&analysis.profile, out)?;
    }
    if analysis.processes.is_empty() {
        writeln!(out, "\nNo process was recorded.")?;
    }
    for image in &analysis.processes {
        writeln!(out)?;
        match (&image.snapshot, options.full) {
            (Some(snapshot), _) => render_snapshot(image, snapshot, options, out)?,
            (None, true) => render_process(image, options, out)?,
            (None, false) => summary::render_process(image, options, out)?,
        }
    }
    super::node_totals::render_text(&analysis.processes, out)
}

fn render_header(profile: &ProfileInfo, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "memsup profile {}", profile.path)?;
    let target_label = match profile.mode {
        crate::trace::format::RecordMode::Run => "command",
        crate::trace::format::RecordMode::Attach => "attached to",
        crate::trace::format::RecordMode::Snapshot => "processes",
    };
    let rows = [
        ("mode", mode_name(profile.mode).to_string()),
        (target_label, profile.target.join(" ")),
        ("host", profile.host.clone()),
        ("recorded by", format!("memsup {}", profile.memsup_version)),
    ];
    for (label, value) in rows {
        writeln!(out, "  {label:<12} {value}")?;
    }
    if profile.truncated {
        writeln!(
            out,
            "WARNING: the profile is truncated (memsup was stopped before it finished); \
             showing what was recorded up to the last whole block."
        )?;
    }
    for line in &profile.damage {
        writeln!(out, "WARNING: {line}")?;
    }
    Ok(())
}

/// `== process PID, parent PID (cause) role ==`
fn render_process_title(image: &ProcessAnalysis, out: &mut dyn Write) -> std::io::Result<()> {
    let parent = match image.parent_pid {
        Some(parent) => format!(", parent {parent}"),
        None => String::new(),
    };
    writeln!(
        out,
        "== process {}{parent} ({}){} ==",
        image.pid,
        cause_name(image.cause),
        role::header_suffix(image.role.as_ref())
    )
}

/// `--stacks full`: every number, every list, whole stacks.
fn render_process(
    image: &ProcessAnalysis,
    options: TextOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    render_process_title(image, out)?;
    let mut rows = identity_rows(image);
    rows.extend(heap_rows(image));
    rows.extend(crate::report::size_classes::text_row(image));
    rows.extend(mapping_rows(image));
    rows.extend(residency_rows(image));
    if options.verbose {
        rows.extend(probe_rows(&image.probes));
        rows.extend(engine_rows(image));
    }
    render_rows_components_and_warnings(image, rows, options.verbose, out)?;
    mpi_calls::render_mpi_calls(&image.mpi_calls, out)?;
    sites::render_heap_sites(&image.source_sites, options.top, LiveEnd::of(image), out)?;
    sites::render_mapping_sites(&image.mapping_sites, options.top, out)
}

/// The labelled rows, then the components (with what their snapshots cost when `costs`)
/// and the warnings of `image`.
fn render_rows_components_and_warnings(
    image: &ProcessAnalysis,
    rows: Vec<(&str, String)>,
    costs: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for (label, value) in rows {
        writeln!(out, "  {label:<LABEL_WIDTH$} {value}")?;
    }
    components::render_components(&image.components, costs, out)?;
    resident_reasons::render_resident_reasons(image, out)?;
    render_warnings(image, out)
}

fn render_warnings(image: &ProcessAnalysis, out: &mut dyn Write) -> std::io::Result<()> {
    for (position, warning) in image.warnings.iter().enumerate() {
        let label = if position == 0 { "warnings" } else { "" };
        writeln!(out, "  {label:<LABEL_WIDTH$} {warning}")?;
    }
    Ok(())
}

/// A process a snapshot stopped: what it runs, how long it was stopped, its memory by
/// component and its threads; it made no calls memsup saw.
fn render_snapshot(
    image: &ProcessAnalysis,
    snapshot: &crate::analysis::ProcessSnapshot,
    options: TextOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let role = role::header_suffix(image.role.as_ref());
    writeln!(out, "== process {} (snapshot){role} ==", image.pid)?;
    let mut rows = identity_rows(image);
    rows.truncate(2);
    rows.push(("stopped for", human_duration(snapshot.stopped_ns)));
    render_rows_components_and_warnings(image, rows, options.verbose, out)?;
    if let Some(census) = &snapshot.heap_census {
        census::render_census(census, out)?;
    }
    threads::render_threads(snapshot, out)
}

type Rows = Vec<(&'static str, String)>;

fn identity_rows(image: &ProcessAnalysis) -> Rows {
    let command = if image.argv.is_empty() {
        "(unknown)".to_string()
    } else {
        image.argv.join(" ")
    };
    vec![
        ("command", command),
        ("executable", or_unknown(&image.exe)),
        ("exit", exit_description(image.exit)),
        (
            "duration",
            format!(
                "{} (started {} into the recording)",
                human_duration(image.duration_ns),
                human_duration(image.start_ns)
            ),
        ),
    ]
}

fn heap_rows(image: &ProcessAnalysis) -> Rows {
    let calls = calls_summary(image);
    // An image that never called the allocator (a shell before its exec) needs no zero rows.
    if calls.is_empty() {
        return vec![("calls", "none".to_string())];
    }
    vec![
        ("calls", calls),
        (
            "allocations",
            format!(
                "{}, {}",
                plural(image.allocations, "block"),
                human_bytes(image.bytes_allocated)
            ),
        ),
        (
            "frees",
            format!("{} (+ {} free(NULL))", image.frees, image.null_frees),
        ),
        ("unknown frees", unknown_frees_value(image)),
        ("failed allocations", image.failed_allocations.to_string()),
        ("largest allocation", human_bytes(image.largest_allocation)),
        ("peak live requested", peak_value(image)),
        (LiveEnd::of(image).label(), leaked_value(image)),
    ]
}

/// How many frees were of blocks never seen allocated, and where those come from.
fn unknown_frees_value(image: &ProcessAnalysis) -> String {
    let sources = &image.unknown_free_sources;
    match sources.explained_with(&human_bytes) {
        // A profile whose frees cannot all be placed still counts them all.
        Some(explained) if sources.total() == image.unknown_frees => explained,
        _ => image.unknown_frees.to_string(),
    }
}

/// "12.00 MiB in 3 blocks, 1.20 ms after start".
fn peak_value(image: &ProcessAnalysis) -> String {
    format!(
        "{} in {}, {} after start",
        human_bytes(image.peak_live_bytes),
        plural(image.peak_live_blocks, "block"),
        human_duration(image.peak_time_ns)
    )
}

/// "1.10 KiB in 3 blocks", and what the count cannot know.
fn leaked_value(image: &ProcessAnalysis) -> String {
    let mut value = format!(
        "{} in {}",
        human_bytes(image.live_bytes_at_exit),
        plural(image.live_blocks_at_exit, "block")
    );
    if let Some(caveat) = leak_caveat(image) {
        value.push_str(&format!(" ({caveat})"));
    }
    let suppressed = &image.suppressed;
    if suppressed.blocks > 0 {
        value.push_str(&format!(
            "; {}, {} suppressed ({})",
            plural(suppressed.blocks, "block"),
            human_bytes(suppressed.bytes),
            plural(suppressed.rules, "rule")
        ));
    }
    value
}

/// The sampled residency, when the recording sampled this image.
fn residency_rows(image: &ProcessAnalysis) -> Rows {
    let residency = &image.residency;
    if residency.status_samples + residency.rollup_samples == 0 {
        return Vec::new();
    }
    let pss = if residency.rollup_samples > 0 {
        format!(", PSS {}", human_bytes(residency.peak_pss_bytes))
    } else {
        String::new()
    };
    vec![(
        "resident (sampled)",
        format!(
            "peak RSS {}{pss}, swap {} ({}, {})",
            human_bytes(residency.peak_rss_bytes),
            human_bytes(residency.peak_swap_bytes),
            plural(residency.status_samples, "status sample"),
            plural(residency.rollup_samples, "smaps_rollup sample")
        ),
    )]
}

fn mapping_rows(image: &ProcessAnalysis) -> Rows {
    let mappings = &image.mappings;
    let calls: Vec<String> = MAP_CALLS
        .iter()
        .filter_map(|&call| {
            let count = mappings.calls.get(&call).copied().unwrap_or(0);
            (count > 0).then(|| format!("{} {count}", call.name()))
        })
        .collect();
    if calls.is_empty() {
        return vec![("mapping calls", "none".to_string())];
    }
    vec![
        ("mapping calls", calls.join(", ")),
        ("mmap'd", human_bytes(mappings.mmap_bytes)),
        ("munmap'd", human_bytes(mappings.munmap_bytes)),
        ("brk growth", human_bytes(mappings.brk_growth_bytes)),
    ]
}

fn calls_summary(image: &ProcessAnalysis) -> String {
    let calls: Vec<String> = AllocFunction::ALL
        .iter()
        .filter_map(|&function| {
            let count = image.call_count(function);
            (count > 0).then(|| format!("{} {count}", function.name()))
        })
        .collect();
    calls.join(", ")
}

/// What recorded the allocator calls; with hooks, what the rings counted and which
/// functions kept a breakpoint.
fn engine_rows(image: &ProcessAnalysis) -> Rows {
    if image.engine == Engine::Int3 {
        return vec![("engine", "int3 (a stop per allocator call)".to_string())];
    }
    let hooked = image
        .probe_sites
        .iter()
        .filter(|site| site.implementation == "hook")
        .count();
    let hooks = &image.hooks;
    let mut rows = vec![
        (
            "engine",
            format!(
                "hooks ({}, no stop per call)",
                plural(hooked as u64, "function")
            ),
        ),
        (
            "",
            format!(
                "ring records {}, nested {}, dropped {}, full waits {}, torn {}, late {}",
                hooks.records,
                hooks.nested,
                hooks.dropped,
                hooks.full_waits,
                hooks.torn,
                hooks.late
            ),
        ),
    ];
    if let Some(costs) = &image.hook_stacks {
        rows.push(("", hook_stack_line(costs)));
    }
    if let Some(costs) = &image.hook_calls {
        rows.push(("", hook_call_line(costs, image.hook_stacks.as_ref())));
    }
    for site in &image.probe_sites {
        if site.implementation.contains("no hook") {
            rows.push(("", format!("{} {}", site.function, site.implementation)));
        }
    }
    rows
}

/// What the hooks' stack walks cost, in one line.
fn hook_stack_line(costs: &HookStackCosts) -> String {
    let per_walk = match costs.walks {
        0 => 0.0,
        walks => costs.frames as f64 / walks as f64,
    };
    format!(
        "stacks walked {} ({:.1} frames each, {} truncated, {} not walked), {} stored in {}, \
         {} lost; unwind tables {}",
        costs.walks,
        per_walk,
        costs.truncated,
        costs.unwalked,
        costs.stored_stacks,
        human_bytes(costs.stored_bytes),
        costs.lost,
        human_bytes(costs.table_bytes),
    )
}

/// The hooks' rule cache (when they walked stacks), the share of frames a walk took from
/// its thread's last walk, and their time per call (when a call was timed), in one line.
fn hook_call_line(costs: &HookCallCosts, stacks: Option<&HookStackCosts>) -> String {
    let mut parts = Vec::new();
    if costs.rule_lookups > 0 {
        let hits = costs.rule_lookups - costs.cache_misses.min(costs.rule_lookups);
        parts.push(format!(
            "rule lookups {} ({:.1} % from the cache)",
            costs.rule_lookups,
            100.0 * hits as f64 / costs.rule_lookups as f64
        ));
    }
    if let Some(remembered) = stacks.and_then(|stacks| remembered_frames(costs, stacks)) {
        parts.push(format!(
            "{:.1} % of the frames from the thread's last walk",
            100.0 * remembered as f64 / stacks.map_or(1, |stacks| stacks.frames.max(1)) as f64
        ));
    }
    parts.push(match costs.timed_calls {
        0 => "no call timed".to_string(),
        calls => format!(
            "{:.0} ns in the hook per call ({calls} timed)",
            costs.timed_ns as f64 / calls as f64
        ),
    });
    parts.join("; ")
}

/// Frames the walks took from their thread's last walk instead of looking up their rules:
/// each frame walked is one or the other, and a new stack's second pass, into the store,
/// looks up all its frames but the last. None without walks.
fn remembered_frames(costs: &HookCallCosts, stacks: &HookStackCosts) -> Option<u64> {
    let second_passes = (stacks.stored_bytes / 8).saturating_sub(stacks.stored_stacks);
    (stacks.frames > 0).then(|| (stacks.frames + second_passes).saturating_sub(costs.rule_lookups))
}

/// The costs users ask about first, then the rest.
fn probe_rows(probes: &ProbeCounters) -> Rows {
    let main = format!(
        "{}, {}, {}",
        plural(probes.stops, "stop"),
        plural(probes.single_steps, "single-step"),
        plural(probes.stop_the_world, "stop-the-world fallback")
    );
    let rest = format!(
        "entry hits {}, return hits {}, emulated {}, out of line {}, syscall stops {}, \
         nested calls {}, foreign patches {}, stack copies {} ({})",
        probes.entry_hits,
        probes.return_hits,
        probes.emulated,
        probes.out_of_line,
        probes.syscall_stops,
        probes.nested_calls,
        probes.foreign_patches,
        probes.stack_copies,
        human_duration(probes.stack_copy_ns)
    );
    vec![("probes", main), ("", rest)]
}

pub fn exit_description(exit: ImageExit) -> String {
    match exit {
        ImageExit::Code(code) => format!("exited with status {code}"),
        ImageExit::Signal(signal) => match signal_name(signal) {
            Some(name) => format!("killed by signal {signal} ({name})"),
            None => format!("killed by signal {signal}"),
        },
        ImageExit::Exec => "replaced by exec".to_string(),
        ImageExit::Detached => "detached".to_string(),
        ImageExit::Unknown => "unknown (the recording ended first)".to_string(),
    }
}

fn signal_name(signal: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(signal)
        .ok()
        .map(|signal| signal.as_str())
}

/// "100 bytes", or "1.50 MiB (1572864 bytes)" from 1 KiB up.
pub fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return plural(bytes, "byte");
    }
    format!("{} ({bytes} bytes)", short_bytes(bytes))
}

/// "850 ns", "1.30 µs", "12.50 ms", "3.20 s", "2 min 5.00 s".
pub fn human_duration(nanoseconds: u64) -> String {
    let seconds = nanoseconds as f64 / 1e9;
    match nanoseconds {
        0..=999 => format!("{nanoseconds} ns"),
        1_000..=999_999 => format!("{:.2} µs", nanoseconds as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2} ms", nanoseconds as f64 / 1e6),
        1_000_000_000..=59_999_999_999 => format!("{seconds:.2} s"),
        _ => format!(
            "{} min {:.2} s",
            nanoseconds / 60_000_000_000,
            seconds % 60.0
        ),
    }
}

pub fn plural(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn or_unknown(text: &str) -> String {
    if text.is_empty() {
        "(unknown)".to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod short_tests;
#[cfg(test)]
mod tests;
