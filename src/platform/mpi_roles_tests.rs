use super::*;
use crate::proc::environ::variable;

fn rank(rank: u32, world_size: Option<u32>, job: &str, source: &str) -> ProcessRole {
    ProcessRole::Rank(MpiRank {
        rank,
        world_size,
        job: job.to_string(),
        source: source.to_string(),
    })
}

/// The role of a program named `name` started with `environ`, under a hydra launcher of
/// pid `hydra` (if any).
fn role(name: &str, environ: &[u8], hydra: Option<u32>) -> Option<ProcessRole> {
    role_at_start(&[name], |key| variable(environ, key), || hydra)
}

/// What Open MPI 4.1's orterun gives rank 1 of 2 (abridged).
const OPEN_MPI_RANK: &[u8] = b"HOME=/root\0OMPI_COMM_WORLD_LOCAL_RANK=1\0\
OMPI_MCA_ess_base_jobid=135790593\0OMPI_MCA_ess_base_vpid=1\0OMPI_COMM_WORLD_SIZE=2\0\
OMPI_COMM_WORLD_RANK=1\0PMIX_NAMESPACE=135790593\0PMIX_RANK=1\0PMIX_ID=135790593.1\0";

/// What MPICH 4.0's hydra gives rank 3 of 4.
const MPICH_RANK: &[u8] = b"PMI_RANK=3\0PMI_FD=9\0PMI_SIZE=4\0MPI_LOCALNRANKS=4\0\
MPI_LOCALRANKID=3\0HYDI_CONTROL_FD=7\0MPIR_CVAR_CH3_INTERFACE_HOSTNAME=vm\0";

#[test]
fn an_open_mpi_rank_has_its_rank_size_and_job() {
    assert_eq!(
        role("mpi_alltoall", OPEN_MPI_RANK, Some(77)),
        Some(rank(1, Some(2), "135790593", "OMPI_COMM_WORLD_RANK"))
    );
}

#[test]
fn an_mpich_rank_is_named_by_its_hydra_launcher() {
    assert_eq!(
        role("mpi_alltoall", MPICH_RANK, Some(4044)),
        Some(rank(3, Some(4), "4044", "PMI_RANK"))
    );
    assert_eq!(
        role("mpi_alltoall", MPICH_RANK, None),
        Some(rank(3, Some(4), "", "PMI_RANK"))
    );
    let with_kvs = [MPICH_RANK, b"PMI_KVSNAME=kvs_4044_0\0"].concat();
    assert_eq!(
        role("mpi_alltoall", &with_kvs, Some(4044)),
        Some(rank(3, Some(4), "kvs_4044_0", "PMI_RANK"))
    );
}

#[test]
fn pmix_alone_takes_its_size_from_pmix_size() {
    let environ = b"PMIX_RANK=5\0PMIX_SIZE=8\0PMIX_NAMESPACE=prterun-vm-1234@1\0";
    assert_eq!(
        role("app", environ, None),
        Some(rank(5, Some(8), "prterun-vm-1234@1", "PMIX_RANK"))
    );
}

#[test]
fn mvapich_and_slurm_ranks() {
    let mvapich = b"MV2_COMM_WORLD_RANK=2\0MV2_COMM_WORLD_SIZE=3\0";
    assert_eq!(
        role("app", mvapich, None),
        Some(rank(2, Some(3), "", "MV2_COMM_WORLD_RANK"))
    );
    let slurm = b"SLURM_PROCID=6\0SLURM_NTASKS=16\0SLURM_JOB_ID=90210\0SLURM_STEP_ID=2\0";
    assert_eq!(
        role("app", slurm, Some(1)),
        Some(rank(6, Some(16), "90210.2", "SLURM_PROCID"))
    );
    let no_step = b"SLURM_PROCID=0\0SLURM_JOB_ID=90210\0";
    assert_eq!(
        role("app", no_step, None),
        Some(rank(0, None, "90210", "SLURM_PROCID"))
    );
}

#[test]
fn the_first_rank_variable_with_a_number_wins() {
    // srun launching Open MPI ranks directly: both are there; Open MPI's own comes first.
    let both = b"SLURM_PROCID=9\0SLURM_NTASKS=10\0OMPI_COMM_WORLD_RANK=4\0PMI_RANK=7\0";
    assert_eq!(
        role("app", both, None),
        Some(rank(4, None, "", "OMPI_COMM_WORLD_RANK"))
    );
    let garbled = b"OMPI_COMM_WORLD_RANK=four\0PMI_RANK=7\0PMI_SIZE=x\0";
    assert_eq!(
        role("app", garbled, None),
        Some(rank(7, None, "", "PMI_RANK"))
    );
}

#[test]
fn no_rank_variable_is_no_role() {
    assert_eq!(role("app", b"HOME=/root\0PMI_SIZE=4\0", Some(1)), None);
    assert_eq!(role("app", b"", None), None);
}

#[test]
fn launchers_are_known_by_name_even_with_rank_variables() {
    for name in [
        "orterun",
        "orted",
        "mpiexec.hydra",
        "hydra_pmi_proxy",
        "prted",
        "srun",
        "slurmstepd",
        "mpirun.openmpi",
        "mpiexec.mpich",
    ] {
        assert_eq!(
            role(name, OPEN_MPI_RANK, None),
            Some(ProcessRole::Launcher {
                program: name.to_string()
            }),
            "{name}"
        );
    }
    // The executable's name is asked first: `mpirun.openmpi` runs orterun.
    assert_eq!(
        launcher_program(&["orterun", "mpirun.openmpi"]),
        Some("orterun".to_string())
    );
    assert_eq!(
        launcher_program(&["bash", "mpirun"]),
        Some("mpirun".to_string())
    );
    assert_eq!(launcher_program(&["mpirunner", "hydra"]), None);
}

#[test]
fn mpi_programs_by_library_name() {
    assert!(is_mpi_program_library("libmpi.so.40.30.4"));
    assert!(is_mpi_program_library("libmpich.so.12"));
    assert!(!is_mpi_program_library("libmpi_cxx.so.40"));
    assert!(!is_mpi_program_library("libmpichfort.so.12"));
    assert!(!is_mpi_program_library("libpmix.so.2"));
    assert_eq!(singleton(), rank(0, Some(1), "", "singleton"));
}

#[test]
fn hydra_s_launcher_names_the_job_else_its_proxy() {
    let ancestors = |names: &[(u32, &str)]| -> Vec<(u32, String)> {
        names
            .iter()
            .map(|(pid, name)| (*pid, name.to_string()))
            .collect()
    };
    let under_mpiexec = ancestors(&[(12, "hydra_pmi_proxy"), (10, "mpiexec.hydra"), (1, "bash")]);
    assert_eq!(hydra_launcher_among(&under_mpiexec), Some(10));
    let proxy_only = ancestors(&[(30, "memsup"), (12, "hydra_pmi_proxy"), (1, "sshd")]);
    assert_eq!(hydra_launcher_among(&proxy_only), Some(12));
    assert_eq!(hydra_launcher_among(&ancestors(&[(1, "bash")])), None);
}
