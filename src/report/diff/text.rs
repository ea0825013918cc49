//! `memsup diff` for people: per pair of images, the totals of both sides and their change,
//! then the sites that changed (new and gone ones included), largest change first.

use std::io::Write;

use super::{metric_value, signed, site_label};
use crate::analysis::diff::{change, Diff, ImageDiff, ImageName, SiteDiff, SiteStatus, Totals};
use crate::report::folded::Metric;

pub fn render(diff: &Diff, metric: Metric, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "memsup diff: base {}, new {} (sites matched by function, file and line)",
        diff.base_path, diff.new_path
    )?;
    for image in &diff.images {
        writeln!(out)?;
        render_image(image, metric, top, out)?;
    }
    for (side, images) in [("base", &diff.unmatched_base), ("new", &diff.unmatched_new)] {
        if !images.is_empty() {
            let names: Vec<String> = images.iter().map(image_name).collect();
            writeln!(out, "\nnot compared, only in {side}: {}", names.join(", "))?;
        }
    }
    Ok(())
}

fn image_name(image: &ImageName) -> String {
    format!("{} (pid {})", image.program(), image.pid)
}

fn render_image(
    image: &ImageDiff,
    metric: Metric,
    top: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{} -> {}",
        image_name(&image.base),
        image_name(&image.new)
    )?;
    render_totals(&image.base_totals, &image.new_totals, out)?;
    let changed: Vec<&SiteDiff> = image
        .sites
        .iter()
        .filter(|site| site.status() != SiteStatus::Unchanged)
        .collect();
    let count = |status: SiteStatus| {
        changed
            .iter()
            .filter(|site| site.status() == status)
            .count()
    };
    writeln!(
        out,
        "{} of {} sites changed ({} new, {} gone), by change of {} bytes:",
        changed.len(),
        image.sites.len(),
        count(SiteStatus::New),
        count(SiteStatus::Gone),
        metric.name()
    )?;
    let value = metric_value(metric);
    for site in changed.iter().take(top) {
        render_site(site, metric, value, out)?;
    }
    if changed.len() > top {
        writeln!(
            out,
            "  ... {} more changed sites (--top)",
            changed.len() - top
        )?;
    }
    Ok(())
}

fn render_totals(base: &Totals, new: &Totals, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "  {:<16}{:>14}{:>14}{:>14}",
        "", "base", "new", "change"
    )?;
    let rows = [
        ("peak requested", base.peak_bytes, new.peak_bytes),
        ("leaked", base.leaked_bytes, new.leaked_bytes),
        ("allocated", base.bytes_allocated, new.bytes_allocated),
        ("allocations", base.allocations, new.allocations),
    ];
    for (name, old, current) in rows {
        writeln!(
            out,
            "  {name:<16}{old:>14}{current:>14}{:>14}",
            signed(change(old, current))
        )?;
    }
    Ok(())
}

/// "  +4096 peak [new] make_extra diff_sites.c:52 ← main ... (diff_sites)", then the numbers
/// of both sides.
fn render_site(
    site: &SiteDiff,
    metric: Metric,
    value: fn(&crate::analysis::SiteMetrics) -> u64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let status = match site.status() {
        SiteStatus::New => " [new]",
        SiteStatus::Gone => " [gone]",
        SiteStatus::Changed | SiteStatus::Unchanged => "",
    };
    writeln!(
        out,
        "  {} {}{status}  {}",
        signed(site.change(value)),
        metric.name(),
        site_label(&site.stack)
    )?;
    let sides = |read: fn(&crate::analysis::SiteMetrics) -> u64| {
        let side =
            |metrics: &Option<crate::analysis::SiteMetrics>| metrics.as_ref().map_or(0, read);
        format!("{} -> {}", side(&site.base), side(&site.new))
    };
    writeln!(
        out,
        "      peak {}, leaked {}, allocated {} in {} allocations",
        sides(|metrics| metrics.peak_bytes),
        sides(|metrics| metrics.leaked_bytes),
        sides(|metrics| metrics.bytes_allocated),
        sides(|metrics| metrics.allocations)
    )
}
