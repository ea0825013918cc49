//! MPI jobs under memsup: the fixtures build against both MPI libraries (and MPICH
//! statically), and a job run under memsup behaves as without it.

use crate::common::mpi::mpi_fixture;
use crate::common::mpi::{alltoall_lines, job_lines, mpi_builds};
use crate::common::run::{memsup_binary, run_command};
use crate::common::{assert_exit, report::report_json};

/// `memsup run -- mpirun -n 2 FIXTURE 3`: the job prints what it prints natively and exits
/// 0; each rank is a process image of the fixture that called malloc for its two 2 MiB
/// buffers.
#[test]
fn a_job_under_memsup_runs_as_without_it() {
    for (library, linking) in mpi_builds() {
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let native = run_command(library.launch(2, &fixture, &["3"]), None);
        assert!(
            native.status.success(),
            "{library:?} {linking:?}: {native:?}"
        );
        assert_eq!(job_lines(&native.stdout), alltoall_lines(2, 3));

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
        assert_eq!(job_lines(&supervised.stdout), alltoall_lines(2, 3));

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
