//! The graphs of what was live at each moment of each image (`analysis::moments`): the
//! sites merged by source location with their live bytes then, the largest `MAX_SITES`.

use std::io::Write;

use super::escape;
use super::merge::{DetailedGraph, DetailedStack, GraphMoment};
use super::site_stacks::labels;
use crate::analysis::moments::MomentKind;
use crate::analysis::Analysis;

/// Sites per moment past this many (those holding the least) are left out, to keep the
/// page's size bounded: 22 moments per image each carry a tree.
pub const MAX_SITES: usize = 200;

/// Images whose moments the page carries, those with the highest peaks.
pub const MAX_IMAGES: usize = 8;

/// One graph per moment, images in order, each image's moments by time.
pub fn moment_graphs(analysis: &Analysis) -> Vec<DetailedGraph> {
    let name_images = analysis.processes.len() > 1;
    let mut graphs = Vec::new();
    // The images with the highest peaks only: a shell script's dozens of short processes
    // would otherwise carry 22 trees each.
    let mut by_peak: Vec<usize> = (0..analysis.processes.len()).collect();
    by_peak.sort_by_key(|&index| std::cmp::Reverse(analysis.processes[index].peak_live_bytes));
    by_peak.truncate(MAX_IMAGES);
    by_peak.sort_unstable();
    for index in by_peak {
        let image = &analysis.processes[index];
        for moment in &image.moments {
            let mut live: Vec<(usize, u64)> = (moment.live_bytes.iter().copied().enumerate())
                .filter(|&(_, bytes)| bytes > 0)
                .collect();
            live.sort_by_key(|&(site, bytes)| (std::cmp::Reverse(bytes), site));
            let cut = live.len() > MAX_SITES;
            live.truncate(MAX_SITES);
            let time = time_text(image.start_ns + moment.time_ns, image.duration_ns);
            let when = match moment.kind {
                MomentKind::Peak => format!("peak, {time}"),
                MomentKind::PeakRss => format!("peak RSS, {time}"),
                MomentKind::Even => time,
            };
            let label = if name_images {
                format!("{} {when}", image.pid)
            } else {
                when
            };
            let stacks = live
                .iter()
                .map(|&(site, bytes)| DetailedStack {
                    frames: labels(image, &image.source_sites[site].stack, false),
                    value: bytes,
                    count: 0,
                })
                .collect();
            graphs.push(DetailedGraph {
                metric: "moment".to_string(),
                description: format!(
                    "bytes live at {label} (pid {}), by call stack{}",
                    image.pid,
                    if cut {
                        format!(", the {MAX_SITES} sites holding the most")
                    } else {
                        String::new()
                    }
                ),
                count_label: String::new(),
                stacks,
                moment: Some(GraphMoment {
                    image: index,
                    time_ns: image.start_ns + moment.time_ns,
                    label,
                    kind: match moment.kind {
                        MomentKind::Peak => "peak",
                        MomentKind::PeakRss => "peak RSS",
                        MomentKind::Even => "even",
                    },
                }),
            });
        }
    }
    graphs
}

/// A time since the recording started, in ms for an image shorter than a second, so that
/// its evenly spaced moments read apart.
fn time_text(time_ns: u64, duration_ns: u64) -> String {
    if duration_ns < 1_000_000_000 {
        format!("{:.3} ms", time_ns as f64 / 1e6)
    } else {
        format!("{:.3} s", time_ns as f64 / 1e9)
    }
}

/// The tab of the moments (it shows the first image's peak) and, hidden until a moment's
/// graph is shown, a button per moment; nothing without moments.
pub(super) fn render_picker(graphs: &[DetailedGraph], out: &mut dyn Write) -> std::io::Result<()> {
    let moments: Vec<(usize, &GraphMoment)> = (graphs.iter().enumerate())
        .filter_map(|(index, graph)| graph.moment.as_ref().map(|moment| (index, moment)))
        .collect();
    let Some(&(first, _)) = moments
        .iter()
        .find(|(_, moment)| moment.kind == "peak")
        .or(moments.first())
    else {
        return Ok(());
    };
    writeln!(
        out,
        "<nav class=\"moments\" id=\"moments\" data-first=\"{first}\" hidden>Live at:"
    )?;
    for (index, moment) in moments {
        writeln!(
            out,
            "<button type=\"button\" class=\"moment\" data-graph=\"{index}\" \
             data-kind=\"{}\" aria-pressed=\"false\">{}</button>",
            moment.kind,
            escape(&moment.label)
        )?;
    }
    writeln!(out, "</nav>")
}
