//! The JSON of a process image's part in an MPI job (`rank` and `mpi` of a process).

use serde::Serialize;

use crate::trace::format::ProcessRole;

/// `{"role": "rank", "rank": 1, "world_size": 4, "job": "...", "source": "PMI_RANK"}` or
/// `{"role": "launcher", "program": "mpiexec.hydra"}`.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum MpiRoleJson<'a> {
    Rank {
        rank: u32,
        world_size: Option<u32>,
        job: &'a str,
        source: &'a str,
    },
    Launcher {
        program: &'a str,
    },
}

impl<'a> MpiRoleJson<'a> {
    pub fn new(role: &'a ProcessRole) -> Self {
        match role {
            ProcessRole::Rank(rank) => MpiRoleJson::Rank {
                rank: rank.rank,
                world_size: rank.world_size,
                job: &rank.job,
                source: &rank.source,
            },
            ProcessRole::Launcher { program } => MpiRoleJson::Launcher { program },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::roles::rank_of;
    use crate::trace::format::MpiRank;

    #[test]
    fn a_rank_and_a_launcher_are_told_apart_by_role() {
        let rank = ProcessRole::Rank(MpiRank {
            rank: 1,
            world_size: Some(4),
            job: "1042350081".to_string(),
            source: "OMPI_COMM_WORLD_RANK".to_string(),
        });
        assert_eq!(
            serde_json::to_value(MpiRoleJson::new(&rank)).unwrap(),
            serde_json::json!({"role": "rank", "rank": 1, "world_size": 4,
                "job": "1042350081", "source": "OMPI_COMM_WORLD_RANK"})
        );
        let launcher = ProcessRole::Launcher {
            program: "orterun".to_string(),
        };
        assert_eq!(
            serde_json::to_value(MpiRoleJson::new(&launcher)).unwrap(),
            serde_json::json!({"role": "launcher", "program": "orterun"})
        );
        assert_eq!(rank_of(Some(&rank)), Some(1));
        assert_eq!(rank_of(Some(&launcher)), None);
        assert_eq!(rank_of(None), None);
    }
}
