//! The report of a job: the job table first (`analysis::job::Job`), then what each profile's
//! report shows. Text, JSON, CSV and HTML carry the table; folded stacks and Perfetto
//! traces are those of every profile's images together.

pub mod csv;
pub mod csv_mpi;
pub mod json;
pub mod text;

use std::io::Write;

use crate::analysis::job::Job;
use crate::analysis::roles::select_rank as select_rank_images;
use crate::analysis::Analysis;
use crate::report::choose::overview;
use crate::report::html::charts::process_section_in;
use crate::report::html::job_chart::job_section;
use crate::report::html::palette::Palette;
use crate::report::html::render_with_sections;
use crate::report::html_report;

/// The job table (with the MPI functions across ranks), the overview of every image, then
/// each profile's report.
pub fn render_text(
    analyses: &[Analysis],
    job: &Job,
    options: crate::report::text::TextOptions,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    text::render(job, out)?;
    if overview::has_overview(analyses) {
        writeln!(out)?;
        overview::render_table(analyses, out)?;
    }
    for analysis in analyses {
        writeln!(out)?;
        crate::report::text::render(analysis, options, out)?;
    }
    Ok(())
}

/// One page: the job table as its summary, the flame graphs of every image, the chart of
/// the ranks' high-water marks, then each image's charts over time.
pub fn render_html(analyses: &[Analysis], job: &Job, out: &mut dyn Write) -> std::io::Result<()> {
    let mut table = Vec::new();
    text::render(job, &mut table)?;
    let summary: Vec<String> = String::from_utf8_lossy(&table)
        .lines()
        .map(str::to_string)
        .collect();
    let merged = merged(analyses);
    let graphs = html_report::graphs(&merged);
    let selector = crate::report::choose::html_selector::selector_section(analyses);
    let mut sections = vec![job_section(job), selector];
    let images = merged.processes.iter().enumerate();
    let palette = Palette::of_images(&merged.processes);
    sections.extend(images.map(|(index, image)| process_section_in(image, index, &palette)));
    let title = format!("job of {} profiles", analyses.len());
    render_with_sections(&title, &summary, &graphs, &sections, out)
}

/// The images of every profile as one analysis (the first profile's header), for the
/// renderers that draw all images together.
pub fn merged(analyses: &[Analysis]) -> Analysis {
    let mut merged = analyses[0].clone();
    merged.processes = analyses
        .iter()
        .flat_map(|analysis| analysis.processes.iter().cloned())
        .collect();
    merged
}

/// The profiles cut down to the images of MPI rank `rank` (`roles::select_rank`), profiles
/// without one left out; when no image has it, the ranks they do have, sorted and distinct.
pub fn select_rank(analyses: Vec<Analysis>, rank: u32) -> Result<Vec<Analysis>, Vec<u32>> {
    let mut present = Vec::new();
    let mut selected = Vec::new();
    for mut analysis in analyses {
        match select_rank_images(&mut analysis.processes, rank) {
            Ok(()) => selected.push(analysis),
            Err(ranks) => present.extend(ranks),
        }
    }
    if selected.is_empty() {
        present.sort_unstable();
        present.dedup();
        return Err(present);
    }
    Ok(selected)
}

#[cfg(test)]
mod tests;
