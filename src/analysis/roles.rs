//! A process image's part in an MPI job, from its `ProcessRole` records: the environment's
//! word at the image's start, completed (never contradicted silently) by what the program
//! later says of itself.

use crate::trace::format::{MpiRank, ProcessRole};

/// The role after `new` arrives for an image that had `old`, and a warning when the two
/// disagree. A later rank keeps what the earlier one knew and it does not (world size, job);
/// a rank the program reports differently from its environment wins, with a warning; a rank
/// is never turned back into a launcher.
pub fn merge_role(old: Option<&ProcessRole>, new: &ProcessRole) -> (ProcessRole, Option<String>) {
    let (Some(ProcessRole::Rank(old)), ProcessRole::Rank(new)) = (old, new) else {
        return match (old, new) {
            (Some(rank @ ProcessRole::Rank(_)), ProcessRole::Launcher { .. }) => {
                (rank.clone(), None)
            }
            _ => (new.clone(), None),
        };
    };
    let warning = (old.rank != new.rank).then(|| {
        format!(
            "MPI rank {} from {} differs from rank {} from {}; using rank {}",
            new.rank, new.source, old.rank, old.source, new.rank
        )
    });
    let merged = MpiRank {
        rank: new.rank,
        world_size: new.world_size.or(old.world_size),
        job: if new.job.is_empty() {
            old.job.clone()
        } else {
            new.job.clone()
        },
        source: if old.rank == new.rank {
            old.source.clone()
        } else {
            new.source.clone()
        },
    };
    (ProcessRole::Rank(merged), warning)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, world_size: Option<u32>, job: &str, source: &str) -> ProcessRole {
        ProcessRole::Rank(MpiRank {
            rank,
            world_size,
            job: job.to_string(),
            source: source.to_string(),
        })
    }

    #[test]
    fn the_program_s_own_word_completes_the_environment_s() {
        let environment = rank(2, None, "kvs_17", "PMI_RANK");
        let confirmed = rank(2, Some(4), "", "MPI_Comm_rank");
        assert_eq!(
            merge_role(Some(&environment), &confirmed),
            (rank(2, Some(4), "kvs_17", "PMI_RANK"), None)
        );
    }

    #[test]
    fn a_rank_that_disagrees_wins_with_a_warning() {
        let environment = rank(2, Some(4), "kvs_17", "PMI_RANK");
        let confirmed = rank(0, Some(1), "", "MPI_Comm_rank");
        let (merged, warning) = merge_role(Some(&environment), &confirmed);
        assert_eq!(merged, rank(0, Some(1), "kvs_17", "MPI_Comm_rank"));
        assert_eq!(
            warning.as_deref(),
            Some("MPI rank 0 from MPI_Comm_rank differs from rank 2 from PMI_RANK; using rank 0")
        );
    }

    #[test]
    fn a_first_role_is_taken_as_it_is_and_a_rank_stays_a_rank() {
        let launcher = ProcessRole::Launcher {
            program: "orterun".to_string(),
        };
        assert_eq!(merge_role(None, &launcher), (launcher.clone(), None));
        let singleton = rank(0, Some(1), "", "singleton");
        assert_eq!(
            merge_role(Some(&singleton), &launcher),
            (singleton.clone(), None)
        );
        assert_eq!(merge_role(Some(&launcher), &singleton), (singleton, None));
    }
}
