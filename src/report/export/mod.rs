//! Files for other tools' viewers: pprof's protobuf profile and speedscope's JSON (of every
//! image; speedscope's is written here, as it reads each profile again for its timeline),
//! Valgrind massif's `massif.out` and heaptrack's data file. The last two hold one
//! process image, so a profile of several gives its first image (the launched program, or
//! the first attached process; after `--rank N`, that rank's first image) and says on stderr
//! which were left out.

pub mod heaptrack;
pub mod massif;
pub mod pprof;
mod pprof_tables;
#[cfg(test)]
mod pprof_tests;
pub mod profile_proto;
pub mod speedscope;

use std::io::Write;

use crate::analysis::{Analysis, ProcessAnalysis, SkipFrames};
use crate::error::{Error, Result};

/// The image an export of `analyses` holds, and how many images it leaves out.
pub fn chosen_image(analyses: &[Analysis]) -> Option<(&Analysis, &ProcessAnalysis, usize)> {
    let total: usize = analyses
        .iter()
        .map(|analysis| analysis.processes.len())
        .sum();
    let analysis = analyses
        .iter()
        .find(|analysis| !analysis.processes.is_empty())?;
    Some((analysis, &analysis.processes[0], total - 1))
}

/// The stderr line naming what a one-image export of `format` left out.
pub fn left_out_note(format: &str, image: &ProcessAnalysis, left_out: usize) -> Option<String> {
    (left_out > 0).then(|| {
        format!(
            "memsup: the {format} file holds one process image, pid {} ({}); {left_out} other \
             image{} left out (--pid, --exe or --rank picks another)",
            image.pid,
            image.exe,
            if left_out == 1 { "" } else { "s" }
        )
    })
}

/// The outputs that are written here rather than by the report's own renderers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    Speedscope,
    Massif,
    Heaptrack,
    /// `--format csv --sites`.
    CsvSites,
    /// `--format csv --mpi-functions`: the MPI functions across the ranks.
    CsvMpiFunctions,
}

/// Writes `export` of `analyses` to `out`; a reader that stops early (`| head`) is no error.
pub fn render(
    export: Export,
    analyses: &[Analysis],
    skip: &SkipFrames,
    out: &mut dyn Write,
) -> Result<()> {
    let written = match export {
        Export::CsvSites => super::csv_sites::render(analyses, out).map_err(writing),
        Export::Speedscope => speedscope::render(analyses, skip, out),
        Export::CsvMpiFunctions => {
            let job = crate::analysis::job::Job::of(analyses);
            super::job::csv_mpi::render(&job, out).map_err(writing)
        }
        Export::Massif | Export::Heaptrack => match chosen_image(analyses) {
            None => Ok(()),
            Some((analysis, image, left_out)) => {
                let name = match export {
                    Export::Massif => "massif",
                    _ => "heaptrack",
                };
                if let Some(note) = left_out_note(name, image, left_out) {
                    eprintln!("{note}");
                }
                match export {
                    Export::Massif => {
                        massif::render(&analysis.profile.path, image, out).map_err(writing)
                    }
                    _ => heaptrack::render(analysis, image, skip, out),
                }
            }
        },
    };
    match written.and_then(|()| out.flush().map_err(writing)) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

fn writing(error: std::io::Error) -> Error {
    Error::io("writing the report", error)
}
