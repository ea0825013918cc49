//! `memsup attach --job PID`: the processes of the MPI job PID belongs to on this node, its
//! launchers and its ranks, found from each process's role (`ptrace::roles`) and the process
//! tree.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::proc::status::read_status;
use crate::ptrace::roles::role_at_start;
use crate::trace::format::ProcessRole;

/// How far above a rank its launchers are looked for (a memsup, a shell or a `time`
/// between them is passed over).
const PARENTS_SEARCHED: usize = 8;

/// What the job search reads of the processes of the node.
pub trait ProcessTree {
    fn parent(&self, pid: i32) -> Option<i32>;
    fn children(&self, pid: i32) -> Vec<i32>;
    fn role(&self, pid: i32) -> Option<ProcessRole>;
}

/// The job's processes: its outermost launcher on this node first, then every process
/// under it that is a launcher or a rank of the same job, in breadth-first order.
pub fn job_members(pid: i32, tree: &dyn ProcessTree) -> Result<Vec<i32>> {
    let not_in_job = |reason: &str| Error::NotInMpiJob {
        pid,
        reason: reason.to_string(),
    };
    let job = match tree.role(pid) {
        None => {
            return Err(not_in_job(
                "it has no MPI rank variable in its environment and is no MPI launcher",
            ))
        }
        Some(ProcessRole::Launcher { .. }) => None,
        Some(ProcessRole::Rank(rank)) => Some(rank.job).filter(|job| !job.is_empty()),
    };
    let top = outermost_launcher(pid, tree)
        .ok_or_else(|| not_in_job("no MPI launcher is among its parents"))?;
    let same_job = |role: Option<ProcessRole>| match role {
        Some(ProcessRole::Launcher { .. }) => true,
        Some(ProcessRole::Rank(rank)) => job.as_ref().map_or(true, |job| *job == rank.job),
        None => false,
    };
    let mut members = vec![top];
    let mut next = 0;
    let mut visited = vec![top];
    while next < visited.len() {
        for child in tree.children(visited[next]) {
            if visited.contains(&child) {
                continue;
            }
            visited.push(child);
            if same_job(tree.role(child)) {
                members.push(child);
            }
        }
        next += 1;
    }
    Ok(members)
}

/// The processes of the jobs of the `given` PIDs (each a process or a thread
/// of one), each once, and a line naming them for the user.
pub fn processes_of_jobs(given: &[i32]) -> Result<(Vec<i32>, String)> {
    let tree = LiveProcessTree::read()?;
    let mut members: Vec<i32> = Vec::new();
    for &pid in given {
        let process = crate::ptrace::attach::check_attachable(pid)?;
        for member in job_members(process, &tree)? {
            if !members.contains(&member) {
                members.push(member);
            }
        }
    }
    let named: Vec<String> = members
        .iter()
        .map(|&pid| match tree.role(pid) {
            Some(ProcessRole::Launcher { program }) => format!("{pid} ({program})"),
            Some(ProcessRole::Rank(rank)) => format!("{pid} (rank {})", rank.rank),
            None => pid.to_string(),
        })
        .collect();
    Ok((
        members,
        format!("the job's processes: {}", named.join(", ")),
    ))
}

/// `--job` of attach and snapshot: the processes of the `given` PIDs' jobs still alive, the
/// note naming them printed unless `quiet`. A member that ended since it was found (a
/// launcher's short-lived child) is no longer part of the job.
pub fn live_processes_of_jobs(given: &[i32], quiet: bool) -> Result<Vec<i32>> {
    let (members, note) = processes_of_jobs(given)?;
    if !quiet {
        eprintln!("memsup: note: {note}");
    }
    Ok(members
        .into_iter()
        .filter(|&pid| {
            let check = crate::ptrace::attach::check_attachable(pid);
            !matches!(check, Err(crate::error::Error::NoSuchProcess(_)))
        })
        .collect())
}

/// The outermost of the launchers that are `pid` itself or above it, passing over other
/// processes only below the first launcher.
fn outermost_launcher(pid: i32, tree: &dyn ProcessTree) -> Option<i32> {
    let is_launcher = |pid: i32| matches!(tree.role(pid), Some(ProcessRole::Launcher { .. }));
    let mut top = is_launcher(pid).then_some(pid);
    let mut current = pid;
    for _ in 0..PARENTS_SEARCHED {
        let Some(parent) = tree.parent(current).filter(|&parent| parent > 1) else {
            break;
        };
        if is_launcher(parent) {
            top = Some(parent);
        } else if top.is_some() {
            break;
        }
        current = parent;
    }
    top
}

/// The node's processes as /proc shows them now (memsup's own left out).
pub struct LiveProcessTree {
    parents: HashMap<i32, i32>,
}

impl LiveProcessTree {
    pub fn read() -> Result<LiveProcessTree> {
        let own = std::process::id() as i32;
        let mut parents = HashMap::new();
        let entries = std::fs::read_dir("/proc").map_err(|error| Error::io("/proc", error))?;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if pid == own {
                continue;
            }
            // Gone meanwhile: not part of anything any more.
            if let Ok(status) = read_status(pid) {
                parents.insert(pid, status.ppid);
            }
        }
        Ok(LiveProcessTree { parents })
    }
}

impl ProcessTree for LiveProcessTree {
    fn parent(&self, pid: i32) -> Option<i32> {
        self.parents.get(&pid).copied()
    }

    fn children(&self, pid: i32) -> Vec<i32> {
        let mut children: Vec<i32> = self
            .parents
            .iter()
            .filter(|&(_, &parent)| parent == pid)
            .map(|(&child, _)| child)
            .collect();
        children.sort_unstable();
        children
    }

    fn role(&self, pid: i32) -> Option<ProcessRole> {
        if !self.parents.contains_key(&pid) {
            return None;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        role_at_start(pid, &exe.to_string_lossy())
    }
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
