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
    if changed.is_empty() {
        return writeln!(out, "none of the {} sites changed", image.sites.len());
    }
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
        "      peak {}, leaked {}, temporary {}, allocated {} in {} allocations",
        sides(|metrics| metrics.peak_bytes),
        sides(|metrics| metrics.leaked_bytes),
        sides(|metrics| metrics.temporary_bytes),
        sides(|metrics| metrics.bytes_allocated),
        sides(|metrics| metrics.allocations)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diff::diff;
    use crate::analysis::{Analysis, Frame, ProcessAnalysis, Site, SiteMetrics};
    use crate::report::diff::metric_value;
    use crate::trace::format::StartCause;

    fn site(function: &str, line: u32, peak_bytes: u64, leaked_bytes: u64) -> Site {
        let frame = |function: &str, line| Frame {
            function: function.to_string(),
            file: Some("/src/app.c".to_string()),
            line: Some(line),
            module: "/build/app".to_string(),
            address: 0x1000,
            offset: 0,
            inlined: false,
        };
        Site {
            stack: vec![frame(function, line), frame("main", 90), frame("_start", 0)],
            metrics: SiteMetrics {
                allocations: 1,
                bytes_allocated: peak_bytes.max(leaked_bytes),
                peak_bytes,
                leaked_bytes,
                // Half of the peak freed soon after: a column of its own in the detail line.
                temporary_bytes: peak_bytes / 2,
                ..SiteMetrics::default()
            },
        }
    }

    fn profile(path: &str, sites: Vec<Site>) -> Analysis {
        let mut image = ProcessAnalysis::new(7, None, StartCause::Launch, 0);
        image.exe = "/build/app".to_string();
        image.source_sites = sites;
        Analysis::of_run(path, vec![image])
    }

    fn text(metric: Metric, top: usize) -> Vec<String> {
        let base = profile(
            "a.msup",
            vec![
                site("peaky", 10, 100, 0),
                site("leaky", 20, 0, 50),
                site("old", 30, 7, 7),
            ],
        );
        let new = profile(
            "b.msup",
            vec![site("peaky", 10, 900, 0), site("leaky", 20, 0, 950)],
        );
        let compared = diff(&base, &new, metric_value(metric)).unwrap();
        let mut out = Vec::new();
        render(&compared, metric, top, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        text.lines().skip(8).map(str::to_string).collect()
    }

    #[test]
    fn sites_follow_the_chosen_metric_and_top_cuts_the_list() {
        assert_eq!(
            text(Metric::Leaked, 10),
            [
                "3 of 3 sites changed (0 new, 1 gone), by change of leaked bytes:",
                "  +900 leaked  leaky app.c:20 ← main app.c:90 (app)",
                "      peak 0 -> 0, leaked 50 -> 950, temporary 0 -> 0, allocated 50 -> 950 in 1 -> 1 allocations",
                "  -7 leaked [gone]  old app.c:30 ← main app.c:90 (app)",
                "      peak 7 -> 0, leaked 7 -> 0, temporary 3 -> 0, allocated 7 -> 0 in 1 -> 0 allocations",
                "  0 leaked  peaky app.c:10 ← main app.c:90 (app)",
                "      peak 100 -> 900, leaked 0 -> 0, temporary 50 -> 450, allocated 100 -> 900 in 1 -> 1 allocations",
            ]
        );
        assert_eq!(
            text(Metric::Peak, 1),
            [
                "3 of 3 sites changed (0 new, 1 gone), by change of peak bytes:",
                "  +800 peak  peaky app.c:10 ← main app.c:90 (app)",
                "      peak 100 -> 900, leaked 0 -> 0, temporary 50 -> 450, allocated 100 -> 900 in 1 -> 1 allocations",
                "  ... 2 more changed sites (--top)",
            ]
        );
    }
}
