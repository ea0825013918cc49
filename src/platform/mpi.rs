//! The MPI libraries' entry points as memsup probes them: which symbols are MPI functions,
//! the name a call is recorded under, and how `MPI_COMM_WORLD` looks in each implementation.

/// An MPI function entry point by symbol name: `MPI_Init`, `PMPI_Alltoall`, `MPI_T_init_thread`.
/// Internals (`MPIR_`, `MPID_`, `MPIX_`, `ompi_`) are not.
pub fn is_mpi_entry_point(name: &str) -> bool {
    let rest = name
        .strip_prefix("MPI_")
        .or_else(|| name.strip_prefix("PMPI_"));
    rest.is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// The name calls of `symbol` are recorded under: the `MPI_` name the program calls, also
/// for its `PMPI_` profiling name (usually a weak alias at the same address).
pub fn recorded_name(symbol: &str) -> &str {
    match symbol.strip_prefix('P') {
        Some(rest) if rest.starts_with("MPI_") => rest,
        _ => symbol,
    }
}

/// MPICH's handle of `MPI_COMM_WORLD` (an integer, `mpi.h`).
pub const MPICH_COMM_WORLD: u64 = 0x4400_0000;

/// Open MPI's `MPI_COMM_WORLD` is the address of this object of libmpi.so.
pub const OPEN_MPI_COMM_WORLD_SYMBOL: &str = "ompi_mpi_comm_world";

/// The function whose `(comm, int *)` result names the process in MPI_COMM_WORLD.
pub const COMM_RANK: &str = "MPI_Comm_rank";
pub const COMM_SIZE: &str = "MPI_Comm_size";
/// The call after which the MPI library's own blocks still live are what it leaves behind.
pub const FINALIZE: &str = "MPI_Finalize";

/// The calls whose entry and return are smaps snapshots, taken while the calling thread
/// waits: once each per image, they bracket what starting and ending MPI makes resident.
pub const SNAPSHOTTED_AT_ENTRY_AND_RETURN: [&str; 3] = ["MPI_Init", "MPI_Init_thread", FINALIZE];

/// Whether MPI function `name` keeps its int3 probe under the hook engine: memsup acts while
/// the thread waits at its entry or return (the snapshots above; the rank and world size
/// read through `MPI_Comm_rank`'s and `MPI_Comm_size`'s out pointer). Each is called a few
/// times per rank, so their stops cost little. `MPI_Pcontrol` is variadic: al holds the
/// number of vector registers its caller passed, which a hook does not keep.
pub fn keeps_int3(name: &str) -> bool {
    // The Fortran bindings' upper-case names too (MPI_INIT calls the C PMPI_Init): the
    // outermost call is the one the snapshots belong to.
    SNAPSHOTTED_AT_ENTRY_AND_RETURN
        .iter()
        .chain(&[COMM_RANK, COMM_SIZE, "MPI_Pcontrol"])
        .any(|kept| kept.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_functions_memsup_stops_at_and_the_variadic_one_keep_an_int3() {
        let kept = [
            "MPI_Init",
            "MPI_Init_thread",
            "MPI_Finalize",
            "MPI_Comm_rank",
            "MPI_Comm_size",
            "MPI_Pcontrol",
            "MPI_FINALIZE",
        ];
        for name in kept {
            assert!(keeps_int3(name), "{name}");
        }
        for name in ["MPI_Send", "MPI_Alltoall", "MPI_Comm_dup", "MPI_Finalized"] {
            assert!(!keeps_int3(name), "{name}");
        }
    }

    #[test]
    fn mpi_entry_points_are_told_from_internals_and_named_by_their_mpi_name() {
        for name in [
            "MPI_Init",
            "PMPI_Alltoall",
            "MPI_T_init_thread",
            "PMPI_Comm_rank",
        ] {
            assert!(is_mpi_entry_point(name), "{name}");
        }
        for name in [
            "MPIR_Init",
            "MPID_Send",
            "MPIX_Comm_revoke",
            "ompi_mpi_init",
            "MPI_",
            "mpi_init_",
            "PMPI_",
        ] {
            assert!(!is_mpi_entry_point(name), "{name}");
        }
        assert_eq!(recorded_name("PMPI_Init"), "MPI_Init");
        assert_eq!(recorded_name("MPI_Init"), "MPI_Init");
        assert_eq!(recorded_name("PMPIX_x"), "PMPIX_x");
    }
}
