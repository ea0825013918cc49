//! `memsup snapshot`: one look at each running process, written as a profile. The
//! processes are taken one after the other, each stopped only while it is read.

use std::path::PathBuf;

use super::{header, job, processes_to_join, Pipeline};
use crate::error::Result;
use crate::ptrace::snapshot::{self, Taken};
use crate::trace::format::RecordMode;
use crate::trace::output_file::OutputRequest;

pub struct SnapshotOptions {
    pub output: OutputRequest,
    pub pids: Vec<i32>,
    /// Every process of the MPI job each PID belongs to on this node (`record::job`).
    pub job: bool,
    pub quiet: bool,
}

/// Snapshots every process and returns the profile's path. A process that cannot be
/// snapshotted (gone, exited meanwhile, not traceable) fails the whole command, and the
/// profile is removed: a snapshot that lacks a process the user named would mislead.
pub fn snapshot(options: SnapshotOptions) -> Result<PathBuf> {
    let pids = if options.job {
        processes_to_join(&job::live_processes_of_jobs(&options.pids, options.quiet)?)?
    } else {
        processes_to_join(&options.pids)?
    };
    let target = pids.iter().map(|pid| pid.to_string()).collect();
    let pipeline = Pipeline::start(
        &options.output,
        header(RecordMode::Snapshot, target, Vec::new()),
        options.quiet,
        None,
    )?;
    let mut taken: Vec<(i32, Taken)> = Vec::new();
    for &pid in &pids {
        match snapshot::take(pid, &pipeline.sink, &pipeline.modules) {
            Ok(one) => taken.push((pid, one)),
            Err(error) => {
                let written_to = pipeline.output.clone();
                let _ = pipeline.finish_quietly();
                let _ = std::fs::remove_file(written_to);
                return Err(error);
            }
        }
    }
    let output = pipeline.output.clone();
    pipeline.finish()?;
    if !options.quiet {
        for (pid, one) in taken {
            eprintln!(
                "memsup: process {pid} was stopped for {:.1} ms ({} threads)",
                one.stopped.as_secs_f64() * 1e3,
                one.threads
            );
        }
    }
    Ok(output)
}
