//! MPI jobs for the tests: the two MPI libraries Debian ships (Open MPI 4.1 and MPICH 4.0),
//! their compilers and launchers by their suffixed names (never the `mpicc`/`mpirun`
//! alternatives), fixtures built against each (`NAME-openmpi`, `NAME-mpich`, and
//! `NAME-mpich-static`, MPICH linked statically), and the environment that lets a job run
//! here: as root, with more ranks than cores.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::build::{build_output, fixtures_source_dir, temporary_beside};
use super::run::clean_command;
use super::tools::{find_tool, require_tool};

/// An MPI implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MpiLibrary {
    OpenMpi,
    Mpich,
}

/// How an MPI fixture is linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MpiLinking {
    Dynamic,
    /// Statically, MPICH only (Debian ships no static Open MPI).
    Static,
}

impl MpiLibrary {
    pub const ALL: [MpiLibrary; 2] = [MpiLibrary::OpenMpi, MpiLibrary::Mpich];

    /// Its name in fixture file names and test messages.
    pub fn name(self) -> &'static str {
        match self {
            MpiLibrary::OpenMpi => "openmpi",
            MpiLibrary::Mpich => "mpich",
        }
    }

    /// The compiler wrapper.
    pub fn compiler(self) -> &'static str {
        match self {
            MpiLibrary::OpenMpi => "mpicc.openmpi",
            MpiLibrary::Mpich => "mpicc.mpich",
        }
    }

    /// The launcher (`orterun` for Open MPI, `mpiexec.hydra` for MPICH).
    pub fn launcher(self) -> &'static str {
        match self {
            MpiLibrary::OpenMpi => "mpirun.openmpi",
            MpiLibrary::Mpich => "mpirun.mpich",
        }
    }

    /// The variables a job needs here: Open MPI refuses to run as root and to start more
    /// ranks than cores without them; MPICH needs none.
    pub fn environment(self) -> &'static [(&'static str, &'static str)] {
        match self {
            MpiLibrary::OpenMpi => &[
                ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
            ],
            MpiLibrary::Mpich => &[],
        }
    }

    /// The launcher's command line that starts `ranks` ranks of what follows it.
    pub fn launch_arguments(self, ranks: u32) -> Vec<String> {
        vec![
            self.launcher().to_string(),
            "-n".to_string(),
            ranks.to_string(),
        ]
    }

    /// A command in the tests' controlled environment (`clean_command`) with this library's
    /// variables set.
    pub fn command(self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = clean_command(program);
        command.envs(self.environment().iter().copied());
        command
    }

    /// `LAUNCHER -n RANKS PROGRAM ARGS...` in the controlled environment.
    pub fn launch(self, ranks: u32, program: &Path, args: &[&str]) -> Command {
        let mut command = self.command(self.launcher());
        command
            .args(["-n", &ranks.to_string()])
            .arg(program)
            .args(args);
        command
    }

    /// True when its compiler and launcher are installed; otherwise the test leaves it out
    /// (and fails with CI=true).
    pub fn is_installed(self) -> bool {
        require_tool(self.compiler()) && require_tool(self.launcher())
    }
}

/// The MPI libraries this machine has, both under CI.
pub fn mpi_libraries() -> Vec<MpiLibrary> {
    MpiLibrary::ALL
        .into_iter()
        .filter(|library| library.is_installed())
        .collect()
}

/// The libraries a statically linked MPICH program needs beyond libmpich: the UCX parts
/// whole (they register themselves from constructors nothing references), then hwloc and
/// the system libraries; `mpi_udev_stub.c` stands in for libudev, which has no `.a`.
const STATIC_MPICH_LIBRARIES: [&str; 14] = [
    "-lmpich",
    "-Wl,--whole-archive",
    "-lucp",
    "-luct",
    "-lucs",
    "-lucm",
    "/usr/lib/x86_64-linux-gnu/ucx/libuct_cma.a",
    "-Wl,--no-whole-archive",
    "-lhwloc",
    "-lnuma",
    "-lpthread",
    "-ldl",
    "-lm",
    "-lrt",
];

/// The path of MPI fixture `name` built against `library`, building it first if needed:
/// `-O1 -g -fno-omit-frame-pointer -pthread`, as the other heap fixtures.
pub fn mpi_fixture(name: &str, library: MpiLibrary, linking: MpiLinking) -> PathBuf {
    let source = fixtures_source_dir().join(format!("{name}.c"));
    let stub = fixtures_source_dir().join("mpi_udev_stub.c");
    let (file_name, sources) = match linking {
        MpiLinking::Dynamic => (format!("{name}-{}", library.name()), vec![source.clone()]),
        MpiLinking::Static => {
            assert_eq!(
                library,
                MpiLibrary::Mpich,
                "only MPICH links statically here"
            );
            (
                format!("{name}-{}-static", library.name()),
                vec![source.clone(), stub.clone()],
            )
        }
    };
    build_output(&file_name, &sources, |output| {
        let temporary = temporary_beside(output);
        let compiler = match linking {
            MpiLinking::Dynamic => library.compiler(),
            MpiLinking::Static => "gcc",
        };
        assert!(find_tool(compiler).is_some(), "{compiler} is not installed");
        let mut command = Command::new(compiler);
        command.args(["-O1", "-fno-omit-frame-pointer", "-g", "-pthread"]);
        command.arg("-I").arg(fixtures_source_dir());
        if linking == MpiLinking::Static {
            command.args(["-static", "-I/usr/include/x86_64-linux-gnu/mpich"]);
        }
        command.arg(&source);
        if linking == MpiLinking::Static {
            command.arg(&stub).args(STATIC_MPICH_LIBRARIES);
        }
        command.arg("-o").arg(&temporary);
        let result = command
            .output()
            .unwrap_or_else(|error| panic!("running {compiler}: {error}"));
        assert!(
            result.status.success(),
            "building MPI fixture {file_name} failed: {command:?}\n{}",
            String::from_utf8_lossy(&result.stderr)
        );
        std::fs::rename(&temporary, output)
            .unwrap_or_else(|error| panic!("renaming {}: {error}", temporary.display()));
    })
}

/// Every build of the MPI fixtures this machine has: each library dynamically, and MPICH
/// statically too.
pub fn mpi_builds() -> Vec<(MpiLibrary, MpiLinking)> {
    let mut builds = Vec::new();
    for library in mpi_libraries() {
        builds.push((library, MpiLinking::Dynamic));
        if library == MpiLibrary::Mpich {
            builds.push((library, MpiLinking::Static));
        }
    }
    builds
}

/// A job's lines, sorted (ranks print in any order), with mpi_alltoall's "pid P, " taken
/// out so that runs compare.
pub fn job_lines(stdout: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| match line.split_once(", pid ") {
            Some((before, after)) => {
                format!("{before}, {}", after.split_once(", ").map_or("", |p| p.1))
            }
            None => line.to_string(),
        })
        .collect();
    lines.sort();
    lines
}

/// What mpi_alltoall prints for a job of `ranks` ranks and `iterations` alltoalls, as
/// `job_lines` gives it.
pub fn alltoall_lines(ranks: u32, iterations: u32) -> Vec<String> {
    (0..ranks)
        .map(|rank| format!("rank {rank} of {ranks}: {iterations} alltoalls, ok"))
        .collect()
}
