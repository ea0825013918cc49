//! `memsup report --format html`: the flamegraph page of a profile, one graph per metric,
//! then the charts of memory over time of each process image.

use std::io::Write;

use super::folded::{stacks, Metric};
use super::html::charts::process_section_in;
use super::html::moment_graphs::moment_graphs;
use super::html::palette::Palette;
use super::html::site_stacks::{detailed_graph, mapped_graph};
use super::html::site_table::site_table_section;
use super::html::thread_groups;
use super::html::{render_detailed, DetailedGraph, FlameGraph};
use super::text::human_bytes;
use crate::analysis::live_end::LiveEnd;
use crate::analysis::Analysis;

fn description(metric: Metric) -> &'static str {
    match metric {
        Metric::Peak => "bytes live at the peak of live requested bytes, by call stack",
        Metric::Leaked => "bytes still live when the process ended, by call stack",
        Metric::Allocated => "bytes allocated over the whole recording, by call stack",
        Metric::Temporary => {
            "bytes of temporary allocations (freed before any other allocation or free), by call stack"
        }
    }
}

/// The lines above the graphs: the profile, and each process image's peak and leaks.
fn summary(analysis: &Analysis) -> Vec<String> {
    let profile = &analysis.profile;
    let mut lines = vec![format!(
        "profile {}{}, recorded by memsup {} on {}",
        profile.path,
        if profile.truncated {
            " (truncated)"
        } else {
            ""
        },
        profile.memsup_version,
        profile.host
    )];
    lines.extend(profile.damage.iter().cloned());
    for image in &analysis.processes {
        lines.push(format!(
            "{} (pid {}): peak {} in {} blocks, {} allocated, {} {} in {} blocks",
            image.exe,
            image.pid,
            human_bytes(image.peak_live_bytes),
            image.peak_live_blocks,
            human_bytes(image.bytes_allocated),
            human_bytes(image.live_bytes_at_exit),
            LiveEnd::of(image).label(),
            image.live_blocks_at_exit
        ));
    }
    lines
}

pub fn render(analysis: &Analysis, out: &mut dyn Write) -> std::io::Result<()> {
    let graphs = detailed_graphs(analysis);
    let title = analysis.profile.target.join(" ");
    let palette = Palette::of_images(&analysis.processes);
    // A snapshot's threads first: where each thread is, is what a snapshot is taken for.
    let mut sections: Vec<String> = analysis
        .processes
        .iter()
        .enumerate()
        .map(|(index, image)| thread_groups::html_section(image, index))
        .filter(|section| !section.is_empty())
        .collect();
    sections.extend(
        analysis
            .processes
            .iter()
            .enumerate()
            .map(|(index, image)| process_section_in(image, index, &palette)),
    );
    let sizes = analysis.processes.iter().enumerate();
    sections.extend(sizes.map(|(index, image)| super::size_classes::html_section(image, index)));
    let selector = super::choose::html_selector::selector_section(std::slice::from_ref(analysis));
    sections.insert(0, selector);
    sections.insert(0, site_table_section(analysis));
    render_detailed(&title, &summary(analysis), &graphs, &sections, out)
}

/// A flame graph per metric of every image of `analysis`, frames with their modules and
/// source lines, stacks with their block counts.
pub fn detailed_graphs(analysis: &Analysis) -> Vec<DetailedGraph> {
    let mut graphs: Vec<DetailedGraph> = Metric::ALL
        .iter()
        .map(|&metric| detailed_graph(analysis, metric, description(metric)))
        .collect();
    graphs.push(mapped_graph(analysis));
    graphs.extend(moment_graphs(analysis));
    graphs
}

/// A flame graph per metric of every image of `analysis`.
pub fn graphs(analysis: &Analysis) -> Vec<FlameGraph> {
    Metric::ALL
        .iter()
        .map(|&metric| FlameGraph {
            metric: metric.name().to_string(),
            description: description(metric).to_string(),
            stacks: stacks(analysis, metric),
        })
        .collect()
}
