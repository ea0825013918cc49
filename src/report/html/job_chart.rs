//! The job's chart: each rank's high-water mark as a bar, stacked by component group at the
//! smaps snapshot of its peak RSS (`analysis::job::Split`), inline SVG like the timelines.
//!
//! `<svg data-chart="job-hwm" data-axis-max=BYTES>`; one `<rect class="bar">` per rank and
//! group with `data-rank`, `data-component` (a group of `GROUPS`, or `unsplit`: the peak
//! sampled RSS of a rank without a snapshot) and `data-bytes`, bottom to top in `GROUPS`
//! order, ranks left to right in table order, and a `<title>` tooltip; a rank whose snapshot
//! is an estimate from pagemap has `data-estimated="true"` on its bars.

use std::fmt::Write as _;

use super::charts::{
    colour, ValueAxis, HEIGHT, PLOT_BOTTOM, PLOT_LEFT, PLOT_RIGHT, PLOT_TOP, WIDTH,
};
use super::escape;
use crate::analysis::job::{Job, RankRow, GROUPS};
use crate::report::text::short_bytes;

/// The component of a rank's bar when it has no snapshot.
pub const UNSPLIT: &str = "unsplit";

/// The section: a heading, the legend and the chart; a note instead when there is no rank.
pub fn job_section(job: &Job) -> String {
    let mut html = String::from("<section class=\"job\" id=\"job\">\n");
    html.push_str(
        "<h2>High-water mark per rank, by component (RSS at its peak RSS snapshot)</h2>\n",
    );
    if job.ranks.is_empty() {
        html.push_str("<p class=\"empty\">Nothing to show: no image has an MPI rank.</p>\n");
        html.push_str("</section>\n");
        return html;
    }
    html.push_str("<ul class=\"legend\">\n");
    for name in GROUPS.iter().chain([UNSPLIT].iter()) {
        let _ = writeln!(
            html,
            "<li data-component=\"{name}\"><svg class=\"swatch\" width=\"12\" height=\"12\" \
             aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg>{name}</li>",
            colour(name)
        );
    }
    html.push_str("</ul>\n");
    let highest = job.ranks.iter().map(bar_height).max().unwrap_or(0);
    let axis = ValueAxis::new(highest);
    let caption = "RSS per rank at its peak RSS snapshot, stacked by component";
    let _ = writeln!(
        html,
        "<figure class=\"timeline\" data-chart=\"job-hwm\">\n<figcaption>{caption}</figcaption>\n\
         <svg class=\"timeline-chart\" data-chart=\"job-hwm\" data-highest=\"{highest}\" \
         data-axis-max=\"{}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{caption}\">",
        axis.max_bytes
    );
    html.push_str("<g class=\"axis\" data-axis=\"bytes\">\n");
    for (y, label) in axis.ticks() {
        let _ = writeln!(
            html,
            "<line class=\"grid\" x1=\"{PLOT_LEFT:.2}\" x2=\"{PLOT_RIGHT:.2}\" y1=\"{y:.2}\" \
             y2=\"{y:.2}\"/><text x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"end\">{label}</text>",
            PLOT_LEFT - 6.0,
            y + 4.0
        );
    }
    html.push_str("</g>\n");
    bars(job, &axis, &mut html);
    html.push_str("</svg>\n</figure>\n</section>\n");
    html
}

/// What a rank's bar shows: its groups at the peak snapshot, or its peak sampled RSS.
fn segments(row: &RankRow) -> Vec<(&'static str, u64)> {
    match &row.split {
        Some(split) => GROUPS
            .iter()
            .zip(&split.groups)
            .map(|(&name, group)| (name, group.rss))
            .collect(),
        None => vec![(UNSPLIT, row.peak_rss_bytes)],
    }
}

fn bar_height(row: &RankRow) -> u64 {
    segments(row).iter().map(|(_, bytes)| bytes).sum()
}

fn bars(job: &Job, axis: &ValueAxis, html: &mut String) {
    let slot = (PLOT_RIGHT - PLOT_LEFT) / job.ranks.len() as f64;
    // A gap between bars while they are wide enough to show one.
    let width = if slot >= 4.0 { slot * 0.8 } else { slot };
    let labelled = job.ranks.len() <= 64;
    html.push_str("<g class=\"bars\">\n");
    for (index, row) in job.ranks.iter().enumerate() {
        let x = PLOT_LEFT + slot * index as f64 + (slot - width) / 2.0;
        let mut below = 0u64;
        let estimated = row.split.as_ref().is_some_and(|split| split.estimated);
        let (marker, note) = match estimated {
            true => (" data-estimated=\"true\"", " (estimated from pagemap)"),
            false => ("", ""),
        };
        for (name, bytes) in segments(row) {
            let top = below + bytes;
            let (y_top, y_bottom) = (axis.y(top), axis.y(below));
            let _ = writeln!(
                html,
                "<rect class=\"bar\" data-rank=\"{}\" data-component=\"{name}\" \
                 data-bytes=\"{bytes}\"{marker} x=\"{x:.2}\" y=\"{y_top:.2}\" \
                 width=\"{width:.2}\" height=\"{:.2}\" fill=\"{}\"><title>rank {} ({} pid {}): \
                 {name} {}{note}</title></rect>",
                row.rank,
                y_bottom - y_top,
                colour(name),
                row.rank,
                escape(&row.host),
                row.pid,
                short_bytes(bytes)
            );
            below = top;
        }
        if labelled {
            let _ = writeln!(
                html,
                "<text class=\"rank-label\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">{}</text>",
                x + width / 2.0,
                PLOT_BOTTOM + 14.0,
                row.rank
            );
        }
    }
    let _ = writeln!(
        html,
        "</g>\n<text class=\"axis-title\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">rank</text>\n\
         <line class=\"plot-edge\" x1=\"{PLOT_LEFT:.2}\" x2=\"{PLOT_LEFT:.2}\" y1=\"{PLOT_TOP:.2}\" \
         y2=\"{PLOT_BOTTOM:.2}\"/><line class=\"plot-edge\" x1=\"{PLOT_LEFT:.2}\" \
         x2=\"{PLOT_RIGHT:.2}\" y1=\"{PLOT_BOTTOM:.2}\" y2=\"{PLOT_BOTTOM:.2}\"/>",
        (PLOT_LEFT + PLOT_RIGHT) / 2.0,
        HEIGHT - 4.0
    );
}
