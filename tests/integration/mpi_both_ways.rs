//! An MPI job under memsup both ways, under Open MPI, MPICH and MPICH linked statically:
//! `memsup run -- mpirun -n 4 ./app` (one memsup for the node's ranks) and
//! `mpirun -n 4 memsup run -o 'job/%r.msup' -- ./app` (one memsup per rank, each writing the
//! file its rank names); and a singleton. fixtures/mpi_alltoall.c: 4 ranks, 2 alltoalls, each
//! rank requesting 4 MiB from each of its two buffer sites.

use std::path::Path;

use crate::common::mpi::mpi_builds;
use crate::common::mpi::{mpi_fixture, MpiLibrary};
use crate::common::mpi_job::{assert_fixture_buffers, assert_same_job, images_of, rank_pids};
use crate::common::report::report_json;
use crate::common::run::{memsup_binary, run_command};
use crate::common::{assert_image_count, file_name};

const RANKS: u32 = 4;
const ITERATIONS: u32 = 2;

/// `memsup run -q -o PROFILE -- ` before a job's command line.
fn memsup_run(library: MpiLibrary, profile: &Path) -> std::process::Command {
    let mut command = library.command(memsup_binary());
    command.args(["run", "-q", "-o"]).arg(profile).arg("--");
    command
}

#[test]
fn one_memsup_outside_the_launcher_records_every_rank() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?}");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let iterations = ITERATIONS.to_string();
        let native = run_command(library.launch(RANKS, &fixture, &[&iterations]), None);
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("job.msup");
        let mut command = memsup_run(library, &profile);
        command
            .args(library.launch_arguments(RANKS))
            .arg(&fixture)
            .arg(&iterations);
        let supervised = run_command(command, None);
        assert_same_job(&supervised, &native, RANKS, ITERATIONS);

        let report = report_json(&profile);
        let images = images_of(&report, &file_name(&fixture));
        let printed: Vec<i64> = rank_pids(&supervised.stdout, RANKS, ITERATIONS)
            .into_values()
            .collect();
        let mut recorded: Vec<i64> = images.keys().copied().collect();
        recorded.sort();
        let mut printed_sorted = printed.clone();
        printed_sorted.sort();
        assert_eq!(recorded, printed_sorted, "{what}: one image per rank");
        for image in images.values() {
            assert_fixture_buffers(image, RANKS, &what);
        }
    }
}

#[test]
fn one_memsup_per_rank_writes_the_file_its_rank_names() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?}");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let iterations = ITERATIONS.to_string();
        let native = run_command(library.launch(RANKS, &fixture, &[&iterations]), None);
        let directory = tempfile::tempdir().unwrap();
        let job = directory.path().join("job");
        std::fs::create_dir(&job).unwrap();
        let mut command = library.command(library.launcher());
        command
            .args(["-n", &RANKS.to_string()])
            .arg(memsup_binary())
            .args(["run", "-q", "-o"])
            .arg(job.join("%r.msup"))
            .arg("--")
            .arg(&fixture)
            .arg(&iterations);
        let supervised = run_command(command, None);
        assert_same_job(&supervised, &native, RANKS, ITERATIONS);

        let mut files: Vec<String> = std::fs::read_dir(&job)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files, ["0.msup", "1.msup", "2.msup", "3.msup"], "{what}");
        // Rank r's file holds the image of the process that printed "rank r".
        for (rank, pid) in rank_pids(&supervised.stdout, RANKS, ITERATIONS) {
            let report = report_json(&job.join(format!("{rank}.msup")));
            let images = images_of(&report, &file_name(&fixture));
            assert_eq!(
                images.keys().copied().collect::<Vec<_>>(),
                [pid],
                "{what}: rank {rank}'s file"
            );
            assert_image_count(&report, 1);
            assert_fixture_buffers(images[&pid], RANKS, &format!("{what} rank {rank}"));
        }
    }
}

/// The fixture started without a launcher is rank 0 of 1; its memsup names the file by its
/// own pid (no rank variable), and the buffers are 1 MiB each.
#[test]
fn a_singleton_runs_as_rank_0_of_1() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?}");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let mut native_command = library.command(&fixture);
        native_command.arg("3");
        let native = run_command(native_command, None);
        let directory = tempfile::tempdir().unwrap();
        let mut command = library.command(memsup_binary());
        command
            .current_dir(directory.path())
            .args(["run", "-q", "-o", "single.%r.msup", "--"])
            .arg(&fixture)
            .arg("3");
        let (child, description) = crate::common::run::spawn_piped(command);
        let memsup_pid = child.id();
        let supervised = crate::common::run::wait_with_timeout(child, &description);
        assert_same_job(&supervised, &native, 1, 3);
        let report = report_json(&directory.path().join(format!("single.{memsup_pid}.msup")));
        let images = images_of(&report, &file_name(&fixture));
        assert_eq!(images.len(), 1, "{what}");
        for image in images.values() {
            assert_fixture_buffers(image, 1, &what);
        }
    }
}
