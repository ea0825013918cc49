use super::*;
use crate::trace::format::MpiRank;

/// A process table: pid, parent, role.
struct Table(Vec<(i32, i32, Option<ProcessRole>)>);

impl ProcessTree for Table {
    fn parent(&self, pid: i32) -> Option<i32> {
        self.0.iter().find(|row| row.0 == pid).map(|row| row.1)
    }
    fn children(&self, pid: i32) -> Vec<i32> {
        self.0
            .iter()
            .filter(|row| row.1 == pid)
            .map(|row| row.0)
            .collect()
    }
    fn role(&self, pid: i32) -> Option<ProcessRole> {
        self.0
            .iter()
            .find(|row| row.0 == pid)
            .and_then(|row| row.2.clone())
    }
}

fn launcher(program: &str) -> Option<ProcessRole> {
    Some(ProcessRole::Launcher {
        program: program.to_string(),
    })
}

fn rank(rank: u32, job: &str) -> Option<ProcessRole> {
    Some(ProcessRole::Rank(MpiRank {
        rank,
        world_size: Some(2),
        job: job.to_string(),
        source: "PMI_RANK".to_string(),
    }))
}

/// Two MPICH jobs under one shell, and an unrelated process: 100 mpiexec.hydra, 101
/// hydra_pmi_proxy, 102 and 103 its ranks (103 forked a helper 104 with no role and a
/// wrapped rank 106 under a `time` 105); job 200's launcher, proxy and rank beside it.
fn node() -> Table {
    Table(vec![
        (50, 1, None),
        (100, 50, launcher("mpiexec.hydra")),
        (101, 100, launcher("hydra_pmi_proxy")),
        (102, 101, rank(0, "100")),
        (103, 101, rank(1, "100")),
        (104, 103, None),
        (105, 101, None),
        (106, 105, rank(1, "100")),
        (200, 50, launcher("mpiexec.hydra")),
        (201, 200, launcher("hydra_pmi_proxy")),
        (202, 201, rank(0, "200")),
        (300, 50, None),
    ])
}

#[test]
fn a_rank_brings_its_launchers_and_the_other_ranks_of_its_job() {
    let all = vec![100, 101, 102, 103, 106];
    assert_eq!(job_members(103, &node()).unwrap(), all);
    assert_eq!(job_members(106, &node()).unwrap(), all);
}

#[test]
fn a_launcher_brings_the_launchers_above_it_and_everything_under_them() {
    let all = vec![100, 101, 102, 103, 106];
    assert_eq!(job_members(101, &node()).unwrap(), all);
    assert_eq!(job_members(100, &node()).unwrap(), all);
    assert_eq!(job_members(202, &node()).unwrap(), vec![200, 201, 202]);
}

#[test]
fn ranks_of_another_job_under_the_same_launcher_stay_out() {
    let mut table = node();
    table.0.push((107, 101, rank(0, "999")));
    assert_eq!(
        job_members(102, &table).unwrap(),
        vec![100, 101, 102, 103, 106]
    );
}

#[test]
fn a_process_in_no_job_is_refused_with_the_reason() {
    let message = |pid| job_members(pid, &node()).unwrap_err().to_string();
    assert_eq!(
        message(300),
        "process 300 is in no MPI job: it has no MPI rank variable in its environment and is \
         no MPI launcher"
    );
    let mut table = node();
    table.0.push((400, 300, rank(0, "")));
    let orphan = job_members(400, &table).unwrap_err();
    assert_eq!(
        orphan.to_string(),
        "process 400 is in no MPI job: no MPI launcher is among its parents"
    );
    assert_eq!(orphan.exit_code(), crate::error::exit_code::NOT_IN_MPI_JOB);
}
