//! MPI ranks under `memsup run`: every rank of a job is labelled with its rank, world size
//! and the job's id, launchers as launchers, a program started without a launcher as the
//! singleton rank 0 of 1; `report --rank N` selects the images of rank N.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::assert_exit;
use crate::common::mpi::{alltoall_lines, job_lines, mpi_builds};
use crate::common::mpi::{mpi_fixture, MpiLibrary};
use crate::common::report::{processes, report_json, report_json_with, report_output};
use crate::common::run::{clean_command, memsup_binary, run_command};

/// The variable each library's launcher gives a rank's number in.
pub fn rank_source(library: MpiLibrary) -> &'static str {
    match library {
        MpiLibrary::OpenMpi => "OMPI_COMM_WORLD_RANK",
        MpiLibrary::Mpich => "PMI_RANK",
    }
}

/// The launcher programs of a job on one node, sorted: `mpirun.openmpi` is orterun (no orted
/// on a single node); `mpirun.mpich` is mpiexec.hydra, which starts one hydra_pmi_proxy.
pub fn launcher_programs(library: MpiLibrary) -> Vec<&'static str> {
    match library {
        MpiLibrary::OpenMpi => vec!["orterun"],
        MpiLibrary::Mpich => vec!["hydra_pmi_proxy", "mpiexec.hydra"],
    }
}

/// Runs `command` natively, then under `memsup run` (with the library's environment): both
/// print `expected` and exit 0. Returns the profile (in `directory`).
fn record(
    library: MpiLibrary,
    command: &[&Path],
    args: &[&str],
    expected: &[String],
    directory: &Path,
) -> PathBuf {
    let mut native = library.command(command[0]);
    native.args(&command[1..]).args(args);
    let native = run_command(native, None);
    assert!(native.status.success(), "{library:?} natively: {native:?}");
    assert_eq!(job_lines(&native.stdout), expected, "{library:?} natively");

    let profile = directory.join("job.msup");
    let mut supervised = library.command(memsup_binary());
    supervised
        .arg("run")
        .arg("-q")
        .arg("-o")
        .arg(&profile)
        .arg("--");
    supervised.args(command).args(args);
    let supervised = run_command(supervised, None);
    assert!(
        supervised.status.success(),
        "{library:?} under memsup: {}",
        String::from_utf8_lossy(&supervised.stderr)
    );
    assert_eq!(
        job_lines(&supervised.stdout),
        expected,
        "{library:?} under memsup"
    );
    profile
}

fn exe_is(image: &Value, name: &str) -> bool {
    image["exe"]
        .as_str()
        .is_some_and(|exe| exe.rsplit('/').next() == Some(name))
}

/// `memsup run -- mpirun -n 4 mpi_alltoall 2`: exactly four images of the fixture, ranks 0
/// to 3 of a world of 4 from the launcher's variable, one job id; the launchers labelled as
/// launchers and nothing else recorded. `report --rank 2` shows rank 2 alone, in text and
/// JSON; `--rank 9` is refused with the ranks there are.
#[test]
fn the_ranks_of_a_four_rank_job_are_labelled() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?}");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let directory = tempfile::tempdir().unwrap();
        let launch = library.launch_arguments(4);
        let launcher = Path::new(&launch[0]);
        let command = [launcher, Path::new("-n"), Path::new("4"), fixture.as_path()];
        let profile = record(
            library,
            &command,
            &["2"],
            &alltoall_lines(4, 2),
            directory.path(),
        );

        let report = report_json(&profile);
        let images = processes(&report);
        let ranks: Vec<&Value> = images.iter().filter(|image| exe_is(image, &name)).collect();
        assert_eq!(ranks.len(), 4, "{what}: four images of the fixture");
        let mut numbers: Vec<u64> = ranks
            .iter()
            .map(|image| image["rank"].as_u64().unwrap())
            .collect();
        numbers.sort_unstable();
        assert_eq!(numbers, [0, 1, 2, 3], "{what}");
        let jobs: BTreeSet<&str> = ranks
            .iter()
            .map(|image| image["mpi"]["job"].as_str().unwrap())
            .collect();
        assert_eq!(jobs.len(), 1, "{what}: one job id, got {jobs:?}");
        let job = *jobs.first().unwrap();
        for image in &ranks {
            let expected = json!({"role": "rank", "rank": image["rank"], "world_size": 4,
                                  "job": job, "source": rank_source(library)});
            assert_eq!(image["mpi"], expected, "{what}: pid {}", image["pid"]);
            assert_exit(image, "code", Some(0));
        }

        let launchers: Vec<&Value> = images
            .iter()
            .filter(|image| image["mpi"]["role"] == "launcher")
            .collect();
        let mut programs: Vec<&str> = launchers
            .iter()
            .map(|image| image["mpi"]["program"].as_str().unwrap())
            .collect();
        programs.sort_unstable();
        programs.dedup();
        assert_eq!(programs, launcher_programs(library), "{what}");
        assert!(
            launchers.iter().all(|image| image["rank"].is_null()),
            "{what}"
        );
        // The launchers' fork children that worked before exec'ing a rank are launchers.
        assert_eq!(
            images.len(),
            4 + launchers.len(),
            "{what}: ranks and launchers only"
        );
        match library {
            // Open MPI's job id is a number; hydra's is its mpiexec.hydra's pid.
            MpiLibrary::OpenMpi => assert!(job.parse::<u64>().is_ok(), "{what}: job {job}"),
            MpiLibrary::Mpich => {
                let mpiexec = launchers
                    .iter()
                    .find(|image| image["mpi"]["program"] == "mpiexec.hydra")
                    .unwrap();
                assert_eq!(job, mpiexec["pid"].to_string(), "{what}");
            }
        }

        let rank_two = ranks.iter().find(|image| image["rank"] == 2).unwrap();
        let text = report_output(&profile, &["--rank", "2"]);
        let headers: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("== process"))
            .collect();
        let header_end = format!(": rank 2 of 4 ({}, job {job}) ==", rank_source(library));
        assert_eq!(headers.len(), 1, "{what}: {text}");
        assert!(
            headers[0].starts_with(&format!("== process {}, parent ", rank_two["pid"]))
                && headers[0].ends_with(&header_end),
            "{what}: {}",
            headers[0]
        );
        let selected = report_json_with(&profile, &["--rank", "2"]);
        let selected = processes(&selected);
        assert_eq!(selected.len(), 1, "{what}");
        assert_eq!(selected[0]["pid"], rank_two["pid"], "{what}");

        let mut missing = clean_command(memsup_binary());
        missing.args(["report", "--rank", "9"]).arg(&profile);
        let missing = run_command(missing, None);
        assert_eq!(missing.status.code(), Some(80), "{what}");
        assert!(missing.stdout.is_empty(), "{what}");
        assert_eq!(
            String::from_utf8_lossy(&missing.stderr),
            "memsup: error: no process image of the profile is MPI rank 9 (ranks recorded: 0, 1, 2, 3)\n",
            "{what}"
        );
    }
}

/// The fixture run without a launcher: rank 0 of 1, "singleton" (from libmpi.so or
/// libmpich.so, or the static executable's own MPI_Init); Open MPI's singleton starts an
/// orted of its own, a launcher.
#[test]
fn a_program_started_without_a_launcher_is_the_singleton_rank() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?}");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let directory = tempfile::tempdir().unwrap();
        let profile = record(
            library,
            &[fixture.as_path()],
            &["1"],
            &alltoall_lines(1, 1),
            directory.path(),
        );
        let report = report_json(&profile);
        let images = processes(&report);
        let singletons: Vec<&Value> = images.iter().filter(|image| exe_is(image, &name)).collect();
        assert_eq!(singletons.len(), 1, "{what}");
        assert_eq!(singletons[0]["rank"], 0, "{what}");
        let expected =
            json!({"role": "rank", "rank": 0, "world_size": 1, "job": "", "source": "singleton"});
        assert_eq!(singletons[0]["mpi"], expected, "{what}");
        let orteds: Vec<&Value> = images
            .iter()
            .filter(|image| exe_is(image, "orted"))
            .collect();
        match library {
            MpiLibrary::OpenMpi => assert!(!orteds.is_empty(), "{what}: no orted"),
            MpiLibrary::Mpich => assert_eq!(images.len(), 1, "{what}"),
        }
        for orted in orteds {
            assert_eq!(
                orted["mpi"],
                json!({"role": "launcher", "program": "orted"})
            );
        }
    }
}

/// `mpirun -n 2 memsup run -- mpi_alltoall 2`: one memsup beside each rank, each writing its
/// default profile; each profile's one image is its rank, of one job (under MPICH, named by
/// the mpiexec.hydra above the memsups).
#[test]
fn ranks_recorded_by_a_memsup_each_are_labelled() {
    for (library, linking) in mpi_builds() {
        let what = format!("{library:?} {linking:?}");
        let fixture = mpi_fixture("mpi_alltoall", library, linking);
        let native = run_command(library.launch(2, &fixture, &["2"]), None);
        assert!(native.status.success(), "{what} natively: {native:?}");
        assert_eq!(job_lines(&native.stdout), alltoall_lines(2, 2), "{what}");
        let directory = tempfile::tempdir().unwrap();
        let mut command = library.command(library.launcher());
        command
            .args(["-n", "2"])
            .arg(memsup_binary())
            .args(["run", "-q", "--"])
            .arg(&fixture)
            .arg("2")
            .current_dir(directory.path());
        let supervised = run_command(command, None);
        assert!(supervised.status.success(), "{what}: {supervised:?}");
        assert_eq!(
            job_lines(&supervised.stdout),
            alltoall_lines(2, 2),
            "{what}"
        );

        let mut profiles: Vec<PathBuf> = std::fs::read_dir(directory.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.extension()
                    .is_some_and(|extension| extension == "msup")
            })
            .collect();
        profiles.sort();
        assert_eq!(profiles.len(), 2, "{what}: one profile per rank");
        let mut roles: Vec<Value> = profiles
            .iter()
            .map(|profile| {
                let report = report_json(profile);
                let images = processes(&report);
                assert_eq!(images.len(), 1, "{what}");
                assert_exit(&images[0], "code", Some(0));
                images[0]["mpi"].clone()
            })
            .collect();
        roles.sort_by_key(|role| role["rank"].as_u64());
        let job = roles[0]["job"].clone();
        assert_ne!(job, "", "{what}");
        for (rank, role) in roles.iter().enumerate() {
            let expected = json!({"role": "rank", "rank": rank, "world_size": 2, "job": job,
                                  "source": rank_source(library)});
            assert_eq!(*role, expected, "{what}");
        }
    }
}
