//! "Memory over time": inline SVG charts of a process image's components, drawn here so the
//! page shows them without JavaScript and without fetching anything.
//!
//! Per image, its warnings, then three charts sharing one time axis (seconds since the recording started):
//! `data-chart="requested"`, live requested bytes stacked by component; `data-chart="rss"`,
//! the RSS each smaps snapshot attributed to each component, stacked; `data-chart="totals"`,
//! the process-wide requested bytes, RSS and PSS as lines. Each series is one `<path>` with
//! class `series`, `data-component` (stacked charts) or `data-metric` (all), and a `<title>`
//! that browsers show as a tooltip. A stacked chart has one series per component with points
//! in that chart; its bands are drawn as steps (a value holds until the next point, the last
//! one until the end of the time axis), the first component at the bottom. In the RSS chart a
//! snapshot that is an estimate from pagemap is also a dashed `<line class="estimate">` with
//! `data-time-ns`. Coordinates are
//! absolute (`M x,y L x,y ... Z`) with two decimals; the value axis starts at 0 and ends at
//! `data-axis-max` bytes, a round number of KiB, MiB or GiB at or above the highest value.

use std::fmt::Write as _;

use super::escape;
use super::palette::Palette;
use crate::analysis::components::{Components, TimePoint};
use crate::analysis::ProcessAnalysis;
use crate::report::text::short_bytes;

/// The SVG canvas (user units) and the plot area inside it.
pub const WIDTH: f64 = 720.0;
pub const HEIGHT: f64 = 260.0;
pub const PLOT_LEFT: f64 = 72.0;
pub const PLOT_RIGHT: f64 = 710.0;
pub const PLOT_TOP: f64 = 10.0;
pub const PLOT_BOTTOM: f64 = 230.0;

/// Colours of the well-known components; others get one derived from their name.
const KNOWN_COLOURS: [(&str, &str); 8] = [
    ("app", "#4e79a7"),
    ("libc", "#f28e2b"),
    ("mpi", "#e15759"),
    ("stacks", "#76b7b2"),
    ("shm", "#59a14f"),
    ("memsup", "#edc948"),
    ("unknown", "#bab0ac"),
    ("overhead", "#9c755f"),
];

/// Colours of the process totals.
const TOTAL_COLOURS: [(&str, &str); 3] = [
    ("requested", "#1f77b4"),
    ("rss", "#d62728"),
    ("pss", "#2ca02c"),
];

/// Whether `name` is a well-known component, with a colour of its own on every page.
pub fn is_known(name: &str) -> bool {
    KNOWN_COLOURS.iter().any(|(known, _)| *known == name)
}

/// The colour of a component: fixed for the well-known names, otherwise a hue from a hash of
/// the name, so a component keeps its colour from one page to the next.
pub fn colour(name: &str) -> String {
    if let Some((_, colour)) = KNOWN_COLOURS.iter().find(|(known, _)| *known == name) {
        return colour.to_string();
    }
    // FNV-1a: stable across runs and platforms, unlike the standard library's hasher.
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let hue = hash % 360;
    let lightness = 40 + (hash / 360) % 25;
    format!("hsl({hue}, 55%, {lightness}%)")
}

/// The "Memory over time" section of image `index`, coloured by the image's own palette.
pub fn process_section(image: &ProcessAnalysis, index: usize) -> String {
    let palette = Palette::of_images(std::slice::from_ref(image));
    process_section_in(image, index, &palette)
}

/// The "Memory over time" section of image `index`, coloured by the page's `palette`.
pub fn process_section_in(image: &ProcessAnalysis, index: usize, palette: &Palette) -> String {
    let components = &image.components;
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<section class=\"timelines\" id=\"timelines-{index}\" data-pid=\"{}\">",
        image.pid
    );
    let _ = writeln!(
        html,
        "<h2>Memory over time: {} {}</h2>",
        image.pid,
        escape(&image.exe)
    );
    // Warnings (a "fragmentation:" one among them) say how far to trust the charts.
    if !image.warnings.is_empty() {
        html.push_str("<ul class=\"warnings\">\n");
        for warning in &image.warnings {
            let _ = writeln!(html, "<li>{}</li>", escape(warning));
        }
        html.push_str("</ul>\n");
    }
    let timeline = &components.timeline;
    let has_totals =
        !(timeline.requested.is_empty() && timeline.rss.is_empty() && timeline.pss.is_empty());
    if components.components.is_empty() && !has_totals {
        html.push_str("<p class=\"empty\">Nothing to show: no timeline was recorded.</p>\n");
        html.push_str("</section>\n");
        return html;
    }
    let axis = TimeAxis::new(image, components);
    legend(components, palette, &mut html);
    let requested: Vec<(&str, &[TimePoint])> = components
        .components
        .iter()
        .map(|c| (c.name.as_str(), c.requested.as_slice()))
        .collect();
    stacked_chart(
        "requested",
        "Live requested bytes by component",
        &requested,
        (&axis, palette),
        &[],
        &mut html,
    );
    let rss: Vec<(&str, Vec<TimePoint>)> = components
        .components
        .iter()
        .map(|c| {
            let points = c
                .resident
                .iter()
                .map(|p| TimePoint {
                    time_ns: p.time_ns,
                    bytes: p.rss,
                })
                .collect();
            (c.name.as_str(), points)
        })
        .collect();
    let rss: Vec<(&str, &[TimePoint])> = rss.iter().map(|(n, p)| (*n, p.as_slice())).collect();
    let estimates: Vec<(u64, u64)> = components
        .snapshots
        .iter()
        .filter_map(|snapshot| Some((snapshot.time_ns, snapshot.pagemap_mappings?)))
        .collect();
    let caption = match estimates.is_empty() {
        true => "Resident memory (RSS) by component, at each smaps snapshot",
        false => {
            "Resident memory (RSS) by component, at each smaps snapshot or estimate (dashed \
             lines: estimates from pagemap)"
        }
    };
    stacked_chart(
        "rss",
        caption,
        &rss,
        (&axis, palette),
        &estimates,
        &mut html,
    );
    totals_chart(components, &axis, &mut html);
    html.push_str("</section>\n");
    html
}

fn legend(components: &Components, palette: &Palette, html: &mut String) {
    html.push_str("<ul class=\"legend\">\n");
    for component in &components.components {
        let name = escape(&component.name);
        let _ = writeln!(
            html,
            "<li data-component=\"{name}\"><svg class=\"swatch\" width=\"12\" height=\"12\" \
             aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg>{name}: \
             peak requested {}, RSS {}, PSS {}, swap {}</li>",
            palette.colour(&component.name),
            short_bytes(component.peak_requested_bytes),
            short_bytes(component.peak_rss_bytes),
            short_bytes(component.peak_pss_bytes),
            short_bytes(component.peak_swap_bytes)
        );
    }
    html.push_str("</ul>\n");
}

/// The time axis shared by an image's charts: the image's lifetime, widened to every point.
struct TimeAxis {
    start_ns: u64,
    end_ns: u64,
}

impl TimeAxis {
    fn new(image: &ProcessAnalysis, components: &Components) -> Self {
        let timeline = &components.timeline;
        let times = components
            .components
            .iter()
            .flat_map(|c| {
                c.requested
                    .iter()
                    .map(|p| p.time_ns)
                    .chain(c.resident.iter().map(|p| p.time_ns))
            })
            .chain(
                [
                    &timeline.requested,
                    &timeline.rss,
                    &timeline.pss,
                    &timeline.swap,
                ]
                .into_iter()
                .flat_map(|points| points.iter().map(|p| p.time_ns)),
            );
        let mut start_ns = image.start_ns;
        let mut end_ns = image.start_ns.saturating_add(image.duration_ns);
        for time in times {
            start_ns = start_ns.min(time);
            end_ns = end_ns.max(time);
        }
        TimeAxis {
            start_ns,
            end_ns: end_ns.max(start_ns + 1),
        }
    }

    fn x(&self, time_ns: u64) -> f64 {
        let share =
            (time_ns.saturating_sub(self.start_ns)) as f64 / (self.end_ns - self.start_ns) as f64;
        PLOT_LEFT + share * (PLOT_RIGHT - PLOT_LEFT)
    }
}

/// A value axis from 0 to a round number of units at or above the highest value.
pub struct ValueAxis {
    /// Bytes of the top of the axis.
    pub max_bytes: u64,
    unit_bytes: u64,
    unit: &'static str,
    /// In units.
    step: f64,
    decimals: usize,
}

impl ValueAxis {
    pub fn new(highest: u64) -> Self {
        let (unit_bytes, unit) = match highest {
            0..=1023 => (1, "bytes"),
            1024..=1_048_575 => (1 << 10, "KiB"),
            1_048_576..=1_073_741_823 => (1 << 20, "MiB"),
            _ => (1 << 30, "GiB"),
        };
        let in_units = (highest.max(1) as f64) / unit_bytes as f64;
        let (step, decimals) = nice_step(in_units / 4.0);
        let steps = (in_units / step).ceil().max(1.0);
        let max_bytes = (steps * step * unit_bytes as f64).round() as u64;
        ValueAxis {
            max_bytes: max_bytes.max(1),
            unit_bytes,
            unit,
            step,
            decimals,
        }
    }

    pub fn y(&self, bytes: u64) -> f64 {
        PLOT_BOTTOM - bytes as f64 / self.max_bytes as f64 * (PLOT_BOTTOM - PLOT_TOP)
    }

    pub(super) fn ticks(&self) -> Vec<(f64, String)> {
        let max_units = self.max_bytes as f64 / self.unit_bytes as f64;
        let count = (max_units / self.step).round() as u64;
        (0..=count)
            .map(|index| {
                let units = index as f64 * self.step;
                let bytes = (units * self.unit_bytes as f64).round() as u64;
                let decimals = self.decimals;
                (self.y(bytes), format!("{units:.decimals$} {}", self.unit))
            })
            .collect()
    }
}

/// A step of 1, 2 or 5 times a power of ten at or above `raw`, and the decimals it needs.
fn nice_step(raw: f64) -> (f64, usize) {
    let raw = if raw > 0.0 { raw } else { 1.0 };
    let exponent = raw.log10().floor();
    let magnitude = 10f64.powf(exponent);
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    let step = nice * magnitude;
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    (step, decimals)
}

/// The value of a step series at `time_ns`: its last point at or before it, 0 before the first.
fn value_at(points: &[TimePoint], time_ns: u64) -> u64 {
    let after = points.partition_point(|p| p.time_ns <= time_ns);
    if after == 0 {
        0
    } else {
        points[after - 1].bytes
    }
}

fn sorted(points: &[TimePoint]) -> Vec<TimePoint> {
    let mut points = points.to_vec();
    points.sort_by_key(|p| p.time_ns);
    points
}

/// `estimates`: (time, mappings counted from pagemap) of the snapshots that are estimates,
/// each drawn as a dashed line across the plot.
fn stacked_chart(
    chart: &str,
    caption: &str,
    series: &[(&str, &[TimePoint])],
    (axis, palette): (&TimeAxis, &Palette),
    estimates: &[(u64, u64)],
    html: &mut String,
) {
    let series: Vec<(&str, Vec<TimePoint>)> = series
        .iter()
        .filter(|(_, points)| !points.is_empty())
        .map(|(name, points)| (*name, sorted(points)))
        .collect();
    let mut times: Vec<u64> = series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.time_ns))
        .collect();
    times.sort_unstable();
    times.dedup();
    // cumulative[i][k]: the sum of series 0..=i at times[k].
    let mut cumulative: Vec<Vec<u64>> = Vec::with_capacity(series.len());
    for (index, (_, points)) in series.iter().enumerate() {
        let row: Vec<u64> = times
            .iter()
            .enumerate()
            .map(|(k, &time)| {
                let below = if index == 0 {
                    0
                } else {
                    cumulative[index - 1][k]
                };
                below.saturating_add(value_at(points, time))
            })
            .collect();
        cumulative.push(row);
    }
    let highest = cumulative
        .last()
        .and_then(|top| top.iter().copied().max())
        .unwrap_or(0);
    let values = ValueAxis::new(highest);
    open_chart(chart, caption, highest, &values, axis, html);
    if series.is_empty() {
        let _ = writeln!(
            html,
            "<text class=\"no-data\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">no data</text>",
            (PLOT_LEFT + PLOT_RIGHT) / 2.0,
            (PLOT_TOP + PLOT_BOTTOM) / 2.0
        );
    }
    let zeros = vec![0; times.len()];
    for (index, (name, points)) in series.iter().enumerate() {
        let upper = &cumulative[index];
        let lower = if index == 0 {
            &zeros
        } else {
            &cumulative[index - 1]
        };
        // The band starts at the series' first point.
        let first = times.partition_point(|&time| time < points[0].time_ns);
        let mut d = String::new();
        let mut vertices = step_edge(&times[first..], &upper[first..], axis, &values);
        let mut bottom = step_edge(&times[first..], &lower[first..], axis, &values);
        bottom.reverse();
        vertices.extend(bottom);
        for (position, (x, y)) in vertices.iter().enumerate() {
            let command = if position == 0 { 'M' } else { 'L' };
            let _ = write!(d, "{command}{x:.2},{y:.2} ");
        }
        d.push('Z');
        let peak = points.iter().map(|p| p.bytes).max().unwrap_or(0);
        let _ = writeln!(
            html,
            "<path class=\"series\" data-component=\"{}\" data-metric=\"{chart}\" fill=\"{}\" \
             d=\"{d}\"><title>{}: {chart} up to {}</title></path>",
            escape(name),
            palette.colour(name),
            escape(name),
            short_bytes(peak)
        );
    }
    for &(time_ns, counted) in estimates {
        let x = axis.x(time_ns);
        let _ = writeln!(
            html,
            "<line class=\"estimate\" data-time-ns=\"{time_ns}\" x1=\"{x:.2}\" x2=\"{x:.2}\" \
             y1=\"{PLOT_TOP:.2}\" y2=\"{PLOT_BOTTOM:.2}\" stroke=\"#555\" stroke-width=\"2\" \
             stroke-dasharray=\"3 3\"><title>estimated from pagemap at {:.3} s ({counted} \
             mappings counted, the others as at the last snapshot)</title></line>",
            time_ns as f64 / 1e9
        );
    }
    html.push_str("</svg>\n</figure>\n");
}

/// The vertices of a step line through (times, values), held to the end of the time axis.
fn step_edge(times: &[u64], values: &[u64], axis: &TimeAxis, y: &ValueAxis) -> Vec<(f64, f64)> {
    let mut vertices = Vec::with_capacity(times.len() * 2);
    for (k, (&time, &value)) in times.iter().zip(values).enumerate() {
        let next = times.get(k + 1).copied().unwrap_or(axis.end_ns);
        vertices.push((axis.x(time), y.y(value)));
        vertices.push((axis.x(next), y.y(value)));
    }
    vertices
}

fn totals_chart(components: &Components, axis: &TimeAxis, html: &mut String) {
    let timeline = &components.timeline;
    let lines: Vec<(&str, &str, Vec<TimePoint>)> = [
        ("requested", "requested bytes", &timeline.requested),
        ("rss", "RSS", &timeline.rss),
        ("pss", "PSS", &timeline.pss),
    ]
    .into_iter()
    .filter(|(_, _, points)| !points.is_empty())
    .map(|(metric, label, points)| (metric, label, sorted(points)))
    .collect();
    let highest = lines
        .iter()
        .flat_map(|(_, _, points)| points.iter().map(|p| p.bytes))
        .max()
        .unwrap_or(0);
    let values = ValueAxis::new(highest);
    open_chart(
        "totals",
        "Process totals: requested bytes, RSS and PSS",
        highest,
        &values,
        axis,
        html,
    );
    for (metric, label, points) in &lines {
        let mut d = String::new();
        for (position, point) in points.iter().enumerate() {
            let command = if position == 0 { 'M' } else { 'L' };
            let _ = write!(
                d,
                "{command}{:.2},{:.2} ",
                axis.x(point.time_ns),
                values.y(point.bytes)
            );
        }
        let colour = TOTAL_COLOURS
            .iter()
            .find(|(name, _)| name == metric)
            .map_or("#000", |(_, colour)| colour);
        let peak = points.iter().map(|p| p.bytes).max().unwrap_or(0);
        let _ = writeln!(
            html,
            "<path class=\"series line\" data-metric=\"{metric}\" fill=\"none\" stroke=\"{colour}\" \
             stroke-width=\"2\" d=\"{}\"><title>{label}: up to {}</title></path>",
            d.trim_end(),
            short_bytes(peak)
        );
    }
    // The lines' legend, inside the chart.
    for (position, (metric, label, _)) in lines.iter().enumerate() {
        let colour = TOTAL_COLOURS
            .iter()
            .find(|(name, _)| name == metric)
            .map_or("#000", |(_, colour)| colour);
        let x = PLOT_LEFT + 10.0 + position as f64 * 150.0;
        let _ = writeln!(
            html,
            "<g class=\"key\" data-metric=\"{metric}\"><rect x=\"{x:.2}\" y=\"{:.2}\" width=\"12\" \
             height=\"3\" fill=\"{colour}\"/><text x=\"{:.2}\" y=\"{:.2}\">{label}</text></g>",
            PLOT_TOP + 6.0,
            x + 16.0,
            PLOT_TOP + 11.0
        );
    }
    html.push_str("</svg>\n</figure>\n");
}

/// The figure, its caption, the SVG element and its axes.
fn open_chart(
    chart: &str,
    caption: &str,
    highest: u64,
    values: &ValueAxis,
    axis: &TimeAxis,
    html: &mut String,
) {
    let _ = writeln!(
        html,
        "<figure class=\"timeline\" data-chart=\"{chart}\">\n<figcaption>{caption}</figcaption>"
    );
    let _ = writeln!(
        html,
        "<svg class=\"timeline-chart\" data-chart=\"{chart}\" data-highest=\"{highest}\" \
         data-axis-max=\"{}\" data-time-start=\"{}\" data-time-end=\"{}\" \
         data-plot-left=\"{PLOT_LEFT}\" data-plot-right=\"{PLOT_RIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{caption}\">",
        values.max_bytes, axis.start_ns, axis.end_ns
    );
    let _ = writeln!(html, "<title>{caption}</title>");
    html.push_str("<g class=\"axis\" data-axis=\"bytes\">\n");
    for (y, label) in values.ticks() {
        let _ = writeln!(
            html,
            "<line class=\"grid\" x1=\"{PLOT_LEFT:.2}\" x2=\"{PLOT_RIGHT:.2}\" y1=\"{y:.2}\" \
             y2=\"{y:.2}\"/><text x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"end\">{label}</text>",
            PLOT_LEFT - 6.0,
            y + 4.0
        );
    }
    html.push_str("</g>\n<g class=\"axis\" data-axis=\"time\">\n");
    let start = axis.start_ns as f64 / 1e9;
    let end = axis.end_ns as f64 / 1e9;
    let (step, decimals) = nice_step((end - start) / 6.0);
    let mut tick = (start / step).ceil() * step;
    while tick <= end + step * 1e-9 {
        let x = axis.x((tick * 1e9).round() as u64);
        let _ = writeln!(
            html,
            "<line class=\"tick\" x1=\"{x:.2}\" x2=\"{x:.2}\" y1=\"{PLOT_BOTTOM:.2}\" \
             y2=\"{:.2}\"/><text x=\"{x:.2}\" y=\"{:.2}\" text-anchor=\"middle\">{tick:.decimals$} s</text>",
            PLOT_BOTTOM + 4.0,
            PLOT_BOTTOM + 16.0
        );
        tick += step;
    }
    let _ = writeln!(
        html,
        "<text class=\"axis-title\" x=\"{:.2}\" y=\"{:.2}\" text-anchor=\"middle\">time since \
         the recording started</text>",
        (PLOT_LEFT + PLOT_RIGHT) / 2.0,
        HEIGHT - 4.0
    );
    let _ = writeln!(
        html,
        "<line class=\"plot-edge\" x1=\"{PLOT_LEFT:.2}\" x2=\"{PLOT_LEFT:.2}\" y1=\"{PLOT_TOP:.2}\" \
         y2=\"{PLOT_BOTTOM:.2}\"/><line class=\"plot-edge\" x1=\"{PLOT_LEFT:.2}\" \
         x2=\"{PLOT_RIGHT:.2}\" y1=\"{PLOT_BOTTOM:.2}\" y2=\"{PLOT_BOTTOM:.2}\"/>"
    );
    html.push_str("</g>\n");
}

#[cfg(test)]
mod tests;
