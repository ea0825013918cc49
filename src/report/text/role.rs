//! An image's part in an MPI job, as the process header names it.

use crate::trace::format::ProcessRole;

/// "rank 1 of 4 (OMPI_COMM_WORLD_RANK, job 1042350081)", "rank 0 of 1 (singleton)",
/// "rank 2 (PMI_RANK)" when the world size is unknown, or "MPI launcher (mpiexec.hydra)".
pub fn role_description(role: &ProcessRole) -> String {
    match role {
        ProcessRole::Launcher { program } => format!("MPI launcher ({program})"),
        ProcessRole::Rank(rank) => {
            let of = rank
                .world_size
                .map(|size| format!(" of {size}"))
                .unwrap_or_default();
            let job = if rank.job.is_empty() {
                String::new()
            } else {
                format!(", job {}", rank.job)
            };
            format!("rank {}{of} ({}{job})", rank.rank, rank.source)
        }
    }
}

/// The header's suffix for an image with `role`: ": rank ..." or nothing.
pub fn header_suffix(role: Option<&ProcessRole>) -> String {
    role.map(|role| format!(": {}", role_description(role)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::MpiRank;

    fn rank(rank: u32, world_size: Option<u32>, job: &str, source: &str) -> ProcessRole {
        ProcessRole::Rank(MpiRank {
            rank,
            world_size,
            job: job.to_string(),
            source: source.to_string(),
        })
    }

    #[test]
    fn ranks_and_launchers_are_named() {
        let open_mpi = rank(1, Some(4), "1042350081", "OMPI_COMM_WORLD_RANK");
        assert_eq!(
            role_description(&open_mpi),
            "rank 1 of 4 (OMPI_COMM_WORLD_RANK, job 1042350081)"
        );
        assert_eq!(
            role_description(&rank(0, Some(1), "", "singleton")),
            "rank 0 of 1 (singleton)"
        );
        assert_eq!(
            role_description(&rank(2, None, "", "PMI_RANK")),
            "rank 2 (PMI_RANK)"
        );
        let launcher = ProcessRole::Launcher {
            program: "mpiexec.hydra".to_string(),
        };
        assert_eq!(role_description(&launcher), "MPI launcher (mpiexec.hydra)");
        assert_eq!(
            header_suffix(Some(&launcher)),
            ": MPI launcher (mpiexec.hydra)"
        );
        assert_eq!(header_suffix(None), "");
    }
}
