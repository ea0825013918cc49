//! `memsup diff --format html`: one differential flame graph per metric (the new profile's
//! flame graph, coloured by growth and shrink; `report::html::render_differential`).

use std::collections::BTreeMap;
use std::io::Write;

use super::{metric_value, signed};
use crate::analysis::diff::{change, Diff, ImageDiff};
use crate::report::folded::{Metric, NO_STACK};
use crate::report::html::{render_differential, FlameGraph};

type Stacks = Vec<(Vec<String>, u64)>;

pub fn render(diff: &Diff, out: &mut dyn Write) -> std::io::Result<()> {
    let mut graphs = Vec::new();
    let mut bases = Vec::new();
    for metric in Metric::ALL {
        let value = metric_value(metric);
        graphs.push(FlameGraph {
            metric: metric.name().to_string(),
            description: format!(
                "{} bytes of the new profile by call stack, coloured by the change of each \
                 frame's own bytes from the base (red grew, blue shrank)",
                metric.name()
            ),
            stacks: stacks(diff, |site| site.new.as_ref().map_or(0, value)),
        });
        bases.push(stacks(diff, |site| site.base.as_ref().map_or(0, value)));
    }
    let title = format!("diff {} -> {}", diff.base_path, diff.new_path);
    render_differential(&title, &summary(diff), &graphs, &bases, out)
}

/// One side's stacks, frames root first: with several pairs of images, each starts with a
/// root frame naming the new image (on both sides, so that they line up).
fn stacks(diff: &Diff, value: impl Fn(&crate::analysis::diff::SiteDiff) -> u64) -> Stacks {
    let name_images = diff.images.len() > 1;
    let mut values: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for image in &diff.images {
        for site in &image.sites {
            let bytes = value(site);
            if bytes == 0 {
                continue;
            }
            let mut frames = Vec::with_capacity(site.stack.len() + 1);
            if name_images {
                frames.push(format!("{} (pid {})", image.new.program(), image.new.pid));
            }
            if site.stack.is_empty() {
                frames.push(NO_STACK.to_string());
            }
            frames.extend(site.stack.iter().rev().map(|frame| frame.name()));
            *values.entry(frames).or_default() += bytes;
        }
    }
    values.into_iter().collect()
}

/// The profiles, then each pair of images with its totals' changes.
fn summary(diff: &Diff) -> Vec<String> {
    let mut lines = vec![
        format!("base {}", diff.base_path),
        format!("new {}", diff.new_path),
    ];
    lines.extend(diff.images.iter().map(image_line));
    for (side, images) in [("base", &diff.unmatched_base), ("new", &diff.unmatched_new)] {
        for image in images.iter() {
            lines.push(format!(
                "not compared, only in {side}: {} (pid {})",
                image.program(),
                image.pid
            ));
        }
    }
    lines
}

fn image_line(image: &ImageDiff) -> String {
    let (base, new) = (&image.base_totals, &image.new_totals);
    let part = |name: &str, old: u64, current: u64| {
        format!(
            "{name} {old} -> {current} ({})",
            signed(change(old, current))
        )
    };
    format!(
        "{} (pid {}) -> {} (pid {}): {}, {}, {} bytes",
        image.base.program(),
        image.base.pid,
        image.new.program(),
        image.new.pid,
        part("peak", base.peak_bytes, new.peak_bytes),
        part("leaked", base.leaked_bytes, new.leaked_bytes),
        part("allocated", base.bytes_allocated, new.bytes_allocated)
    )
}
