//! What makes a process image part of an MPI job: the variables launchers put in a rank's
//! environment, the launchers' program names, and what marks a program started without a
//! launcher (a singleton). Pure: the caller reads the environment and the process tree.

use crate::trace::format::{MpiRank, ProcessRole};

/// Rank variables, in the order they are trusted, each with the variables that give the
/// world size alongside it (the first present wins).
const RANK_VARIABLES: &[(&str, &[&str])] = &[
    ("OMPI_COMM_WORLD_RANK", &["OMPI_COMM_WORLD_SIZE"]),
    ("PMIX_RANK", &["OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"]),
    ("PMI_RANK", &["PMI_SIZE"]),
    ("MV2_COMM_WORLD_RANK", &["MV2_COMM_WORLD_SIZE"]),
    ("SLURM_PROCID", &["SLURM_NTASKS"]),
];

/// Variables naming the job, in order: Open MPI's job id and PMIx namespace, the PMI-1 key
/// value space of MPICH-derived launchers that set one, then Slurm's job (and step below).
const JOB_VARIABLES: &[&str] = &["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_KVSNAME"];

/// Programs that start or serve ranks: Open MPI 4 (orterun, orted), Open MPI 5 (prterun,
/// prted), MPICH's hydra (mpiexec.hydra, hydra_pmi_proxy), Slurm, and the generic names.
const LAUNCHER_PROGRAMS: &[&str] = &[
    "orterun",
    "mpirun",
    "mpiexec",
    "orted",
    "prterun",
    "prted",
    "mpiexec.hydra",
    "hydra_pmi_proxy",
    "srun",
    "slurmstepd",
];

/// MPICH's hydra puts no job id in a rank's environment (4.0 sets PMI_RANK, PMI_SIZE,
/// PMI_FD, MPI_LOCALRANKID ... and no PMI_KVSNAME): these processes above a rank name it.
pub const HYDRA_LAUNCHER: &str = "mpiexec.hydra";
pub const HYDRA_PROXY: &str = "hydra_pmi_proxy";

/// The function whose definition marks an MPI program, in a static executable or a library.
pub const MPI_INIT: &str = "MPI_Init";

/// The source named in a singleton's rank.
pub const SINGLETON_SOURCE: &str = "singleton";

/// The launcher among a process's names (its executable's file name, then its `comm`):
/// `mpirun.openmpi` runs `/usr/bin/orterun` through symbolic links, `mpirun.mpich` is
/// `mpiexec.hydra`, and a script named `mpirun` has the shell as its executable but `mpirun`
/// as its `comm`. A versioned or vendor-suffixed `mpirun.*` / `mpiexec.*` counts too.
pub fn launcher_program(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|name| {
            LAUNCHER_PROGRAMS.contains(name)
                || ["mpirun.", "mpiexec."]
                    .iter()
                    .any(|prefix| name.starts_with(prefix))
        })
        .map(|name| name.to_string())
}

/// The rank an environment gives (`lookup` reads one variable), or `None` when it has no
/// rank variable with a number. `hydra_launcher` names the job when no variable does: the
/// pid of the hydra process the rank runs under, asked only then.
pub fn rank_from_environment<'a>(
    lookup: impl Fn(&str) -> Option<&'a str>,
    hydra_launcher: impl FnOnce() -> Option<u32>,
) -> Option<MpiRank> {
    let number = |name: &str| lookup(name).and_then(|value| value.trim().parse::<u32>().ok());
    let (source, sizes) = RANK_VARIABLES
        .iter()
        .find(|(variable, _)| number(variable).is_some())?;
    let rank = number(source)?;
    let world_size = sizes.iter().find_map(|size| number(size));
    let job = job_from_environment(&lookup)
        .or_else(|| hydra_launcher().map(|pid| pid.to_string()))
        .unwrap_or_default();
    Some(MpiRank {
        rank,
        world_size,
        job,
        source: source.to_string(),
    })
}

/// The job's id from the environment: a job variable, else Slurm's `JOB.STEP` (or `JOB`).
pub fn job_from_environment<'a>(lookup: &impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    let present = |name: &str| lookup(name).filter(|value| !value.is_empty());
    if let Some(job) = JOB_VARIABLES.iter().find_map(|name| present(name)) {
        return Some(job.to_string());
    }
    let job = present("SLURM_JOB_ID")?;
    Some(match present("SLURM_STEP_ID") {
        Some(step) => format!("{job}.{step}"),
        None => job.to_string(),
    })
}

/// An image's role when it starts running its program: a launcher by name first (a launcher
/// started from inside a rank inherits the rank's variables), else a rank by environment.
pub fn role_at_start<'a>(
    names: &[&str],
    lookup: impl Fn(&str) -> Option<&'a str>,
    hydra_launcher: impl FnOnce() -> Option<u32>,
) -> Option<ProcessRole> {
    if let Some(program) = launcher_program(names) {
        return Some(ProcessRole::Launcher { program });
    }
    rank_from_environment(lookup, hydra_launcher).map(ProcessRole::Rank)
}

/// A module whose file name makes its image an MPI program: Open MPI's `libmpi.so*` or
/// MPICH's `libmpich.so*` (file name only, see `libraries::file_name`).
pub fn is_mpi_program_library(file: &str) -> bool {
    file.starts_with("libmpi.so") || file.starts_with("libmpich.so")
}

/// Rank 0 of a world of 1: an MPI program started without a launcher.
pub fn singleton() -> ProcessRole {
    ProcessRole::Rank(MpiRank {
        rank: 0,
        world_size: Some(1),
        job: String::new(),
        source: SINGLETON_SOURCE.to_string(),
    })
}

/// The hydra process that names a rank's job, given the names of its ancestors nearest
/// first: the `mpiexec.hydra` above it, else the nearest `hydra_pmi_proxy` (a proxy started
/// on this node by a launcher elsewhere).
pub fn hydra_launcher_among(ancestors: &[(u32, String)]) -> Option<u32> {
    let named = |wanted: &str| {
        ancestors
            .iter()
            .find(|(_, name)| name == wanted)
            .map(|(pid, _)| *pid)
    };
    named(HYDRA_LAUNCHER).or_else(|| named(HYDRA_PROXY))
}

#[cfg(test)]
#[path = "mpi_roles_tests.rs"]
mod tests;
