//! MPI jobs under memsup: the fixtures build against both MPI libraries (and MPICH
//! statically), and a job run under memsup behaves as without it.

use crate::common::mpi::{mpi_fixture, mpi_libraries, MpiLibrary, MpiLinking};
use crate::common::run::{memsup_binary, run_command};
use crate::common::{assert_exit, report::report_json};

/// The fixture's own lines for a job of `ranks` ranks, sorted (ranks print in any order),
/// without their pids.
fn expected_lines(ranks: u32, iterations: u32) -> Vec<String> {
    (0..ranks)
        .map(|rank| format!("rank {rank} of {ranks}: {iterations} alltoalls, ok"))
        .collect()
}

/// The fixture's lines as printed, sorted, with "pid P, " taken out.
fn printed_lines(stdout: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            let (before, after) = line.split_once(", pid ").unwrap_or((line, ""));
            let after = after.split_once(", ").map_or("", |(_, rest)| rest);
            format!("{before}, {after}")
        })
        .collect();
    lines.sort();
    lines
}

fn each_build() -> Vec<(MpiLibrary, MpiLinking)> {
    let mut builds = Vec::new();
    for library in mpi_libraries() {
        builds.push((library, MpiLinking::Dynamic));
        if library == MpiLibrary::Mpich {
            builds.push((library, MpiLinking::Static));
        }
    }
    builds
}

/// `memsup run -- mpirun -n 2 FIXTURE 3`: the job prints what it prints natively and exits
/// 0; each rank is a process image of the fixture that called malloc for its two 2 MiB
/// buffers.
#[test]
fn a_job_under_memsup_runs_as_without_it() {
    for (library, linking) in each_build() {
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let native = run_command(library.launch(2, &fixture, &["3"]), None);
        assert!(
            native.status.success(),
            "{library:?} {linking:?}: {native:?}"
        );
        assert_eq!(printed_lines(&native.stdout), expected_lines(2, 3));

        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("job.msup");
        let mut command = library.command(memsup_binary());
        command
            .arg("run")
            .arg("-q")
            .arg("-o")
            .arg(&profile)
            .arg("--");
        command
            .args(library.launch_arguments(2))
            .arg(&fixture)
            .arg("3");
        let supervised = run_command(command, None);
        assert!(
            supervised.status.success(),
            "{library:?} {linking:?}: {}",
            String::from_utf8_lossy(&supervised.stderr)
        );
        assert_eq!(printed_lines(&supervised.stdout), expected_lines(2, 3));

        let report = report_json(&profile);
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let images: Vec<_> = crate::common::report::processes(&report)
            .iter()
            .filter(|image| {
                image["exe"]
                    .as_str()
                    .is_some_and(|exe| exe.ends_with(&name))
            })
            .collect();
        assert_eq!(images.len(), 2, "{library:?} {linking:?}: two ranks");
        for image in images {
            assert_exit(image, "code", Some(0));
        }
    }
}
