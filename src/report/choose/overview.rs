//! The overview of a report of several process images: one row per image, by peak
//! requested bytes (highest first), in text and JSON alike.

use std::io::Write;

use crate::analysis::roles::rank_of;
use crate::analysis::Analysis;
use crate::platform::libraries::file_name;
use crate::report::text::{human_duration, short_bytes};

/// One image's line of the overview; JSON keys in this order (docs/report-json.md).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OverviewRow {
    pub pid: u32,
    pub parent_pid: Option<u32>,
    /// The exe's file name.
    pub program: String,
    pub exe: String,
    pub rank: Option<u32>,
    pub start_ns: u64,
    pub peak_requested_bytes: u64,
    pub peak_rss_bytes: u64,
    /// Requested bytes still live at the image's end (exit, exec or detach).
    pub leaked_bytes: u64,
    pub duration_ns: u64,
}

/// Every image of `analyses`, by peak requested bytes, highest first; ties by pid, then
/// start, so that the order is the same on every run.
pub fn rows(analyses: &[Analysis]) -> Vec<OverviewRow> {
    let mut rows: Vec<(usize, OverviewRow)> = indexed_rows(analyses);
    rows.sort_by(|(_, a), (_, b)| by_peak(a, b));
    rows.into_iter().map(|(_, row)| row).collect()
}

/// The positions of the images among every profile's images (the order of the HTML page's
/// sections), in the overview's order.
pub fn order(analyses: &[Analysis]) -> Vec<usize> {
    let mut rows = indexed_rows(analyses);
    rows.sort_by(|(_, a), (_, b)| by_peak(a, b));
    rows.into_iter().map(|(index, _)| index).collect()
}

/// Highest peak first; ties by pid, then start.
fn by_peak(a: &OverviewRow, b: &OverviewRow) -> std::cmp::Ordering {
    b.peak_requested_bytes
        .cmp(&a.peak_requested_bytes)
        .then(a.pid.cmp(&b.pid))
        .then(a.start_ns.cmp(&b.start_ns))
}

fn indexed_rows(analyses: &[Analysis]) -> Vec<(usize, OverviewRow)> {
    analyses
        .iter()
        .flat_map(|analysis| &analysis.processes)
        .map(|image| OverviewRow {
            pid: image.pid,
            parent_pid: image.parent_pid,
            program: file_name(&image.exe).to_string(),
            exe: image.exe.clone(),
            rank: rank_of(image.role.as_ref()),
            start_ns: image.start_ns,
            peak_requested_bytes: image.peak_live_bytes,
            peak_rss_bytes: image.peak_resident().0,
            leaked_bytes: image.live_bytes_at_exit,
            duration_ns: image.duration_ns,
        })
        .enumerate()
        .collect()
}

/// The overview table and a blank line, when the report has more than one image.
pub fn render_text(analyses: &[Analysis], out: &mut dyn Write) -> std::io::Result<()> {
    if has_overview(analyses) {
        render_table(analyses, out)?;
        writeln!(out)?;
    }
    Ok(())
}

/// True when the text report has an overview: more than one image.
pub fn has_overview(analyses: &[Analysis]) -> bool {
    let images: usize = analyses
        .iter()
        .map(|analysis| analysis.processes.len())
        .sum();
    images > 1
}

/// The overview table: a title line, the header, one line per image.
pub fn render_table(analyses: &[Analysis], out: &mut dyn Write) -> std::io::Result<()> {
    let rows = rows(analyses);
    writeln!(
        out,
        "{} process images, by peak requested bytes:",
        rows.len()
    )?;
    let header = [
        "pid", "parent", "program", "rank", "peak req", "peak RSS", "leaked", "duration",
    ];
    let mut table: Vec<[String; 8]> = vec![header.map(str::to_string)];
    table.extend(rows.iter().map(cells));
    let widths: Vec<usize> = (0..8)
        .map(|column| table.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    for row in &table {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            // The program left-aligned, the numbers right-aligned.
            if column == 2 {
                line.push_str(&format!("  {cell:<width$}", width = widths[column]));
            } else {
                line.push_str(&format!("  {cell:>width$}", width = widths[column]));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn cells(row: &OverviewRow) -> [String; 8] {
    let optional = |value: Option<u32>| value.map_or("-".to_string(), |value| value.to_string());
    [
        row.pid.to_string(),
        optional(row.parent_pid),
        row.program.clone(),
        optional(row.rank),
        short_bytes(row.peak_requested_bytes),
        short_bytes(row.peak_rss_bytes),
        short_bytes(row.leaked_bytes),
        human_duration(row.duration_ns),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_data::components_analysis;

    #[test]
    fn images_are_ordered_by_peak_requested_bytes_then_pid() {
        let mut analysis = components_analysis();
        let mut image = analysis.processes[0].clone();
        image.role = None;
        image.parent_pid = None;
        image.exe = "/bin/parent".into();
        // The peak RSS from the samples alone: no snapshot above them.
        image.components.snapshots.clear();
        let with = |pid: u32, peak: u64, rss: u64| {
            let mut image = image.clone();
            image.pid = pid;
            image.peak_live_bytes = peak;
            image.residency.peak_rss_bytes = rss;
            image.live_bytes_at_exit = 100;
            image.duration_ns = 2_500_000;
            image
        };
        analysis.processes = vec![with(30, 10, 4096), with(20, 3 << 20, 8192), with(10, 10, 0)];
        let order: Vec<u32> = rows(&[analysis.clone()])
            .iter()
            .map(|row| row.pid)
            .collect();
        assert_eq!(order, [20, 10, 30]);
        let mut text = Vec::new();
        render_text(&[analysis], &mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "3 process images, by peak requested bytes:\n\
             \x20 pid  parent  program  rank  peak req  peak RSS     leaked  duration\n\
             \x20  20       -  parent      -  3.00 MiB  8.00 KiB  100 bytes   2.50 ms\n\
             \x20  10       -  parent      -  10 bytes   0 bytes  100 bytes   2.50 ms\n\
             \x20  30       -  parent      -  10 bytes  4.00 KiB  100 bytes   2.50 ms\n\n"
        );
    }

    #[test]
    fn one_image_has_no_overview() {
        let mut text = Vec::new();
        render_text(&[components_analysis()], &mut text).unwrap();
        assert!(text.is_empty());
        assert_eq!(rows(&[components_analysis()]).len(), 1);
    }
}
