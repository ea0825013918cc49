//! A process image's part in an MPI job, from its `ProcessRole` records: the environment's
//! word at the image's start, completed (never contradicted silently) by what the program
//! later says of itself.

use super::ProcessAnalysis;
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

/// The rank of an image with `role`, if it is a rank.
pub fn rank_of(role: Option<&ProcessRole>) -> Option<u32> {
    match role {
        Some(ProcessRole::Rank(rank)) => Some(rank.rank),
        _ => None,
    }
}

/// Keeps only the images of MPI rank `rank` (`memsup report --rank`). When none has it, the
/// images are left as they are and the ranks they do have are returned, sorted and distinct.
pub fn select_rank(images: &mut Vec<ProcessAnalysis>, rank: u32) -> Result<(), Vec<u32>> {
    let of_rank = |image: &ProcessAnalysis| rank_of(image.role.as_ref()) == Some(rank);
    if !images.iter().any(of_rank) {
        let mut ranks: Vec<u32> = images
            .iter()
            .filter_map(|image| rank_of(image.role.as_ref()))
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        return Err(ranks);
    }
    images.retain(of_rank);
    Ok(())
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

    #[test]
    fn selecting_a_rank_keeps_its_images_or_names_the_ranks_there_are() {
        use crate::trace::format::StartCause;
        let image = |pid: u32, role: Option<ProcessRole>| {
            let mut image = ProcessAnalysis::new(pid, None, StartCause::Launch, 0);
            image.role = role;
            image
        };
        let launcher = ProcessRole::Launcher {
            program: "orterun".to_string(),
        };
        let mut images = vec![
            image(10, Some(launcher)),
            image(11, Some(rank(1, Some(2), "7", "PMIX_RANK"))),
            image(12, Some(rank(0, Some(2), "7", "PMIX_RANK"))),
            image(13, None),
            image(14, Some(rank(1, Some(2), "7", "MPI_Comm_rank"))),
        ];
        assert_eq!(select_rank(&mut images.clone(), 5), Err(vec![0, 1]));
        select_rank(&mut images, 1).unwrap();
        let pids: Vec<u32> = images.iter().map(|image| image.pid).collect();
        assert_eq!(pids, [11, 14]);
        assert_eq!(select_rank(&mut vec![image(1, None)], 0), Err(vec![]));
    }
}
