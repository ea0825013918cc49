//! An image's part in an MPI job, sent right after its `Exec` event (launch, exec, attach,
//! snapshot): a launcher by program name or a rank by environment; and, for an image with
//! neither, a singleton as soon as a module shows it is an MPI program. A launcher's fork
//! child is a launcher.

use crate::events::EventKind;
use crate::platform::libraries::file_name;
use crate::platform::mpi_roles::{self, MPI_INIT};
use crate::proc::environ::{read_environ, variable};
use crate::proc::status::read_status;
use crate::ptrace::tracer::Tracer;
use crate::symbols::elf::ElfFile;
use crate::trace::format::ProcessRole;

/// How far up the process tree a rank's hydra launcher is looked for (rank, proxy,
/// mpiexec, with a memsup or a shell or two between them).
const ANCESTORS_SEARCHED: usize = 8;

/// The role of process `pid` (stopped, its program `exe` just started), from its names and
/// its environment. `None` for a process that is no part of an MPI job (or is gone).
pub fn role_at_start(pid: i32, exe: &str) -> Option<ProcessRole> {
    let comm = read_status(pid)
        .map(|status| status.name)
        .unwrap_or_default();
    let names = [file_name(exe), comm.as_str()];
    // Unreadable (gone, or not ours): a launcher is still known by name.
    let environ = read_environ(pid).unwrap_or_default();
    mpi_roles::role_at_start(
        &names,
        |name| variable(&environ, name),
        || mpi_roles::hydra_launcher_among(&ancestors(pid)),
    )
}

/// Whether a module of an image makes it an MPI program: an MPI library by name, or any
/// module (a static executable, a library) that defines `MPI_Init`.
pub fn is_mpi_program_module(path: &str, elf: &ElfFile) -> bool {
    mpi_roles::is_mpi_program_library(file_name(path))
        || !elf.find_functions(&[MPI_INIT]).is_empty()
}

/// The parents of `pid`, nearest first, with their program names; stops at init or a gone process.
fn ancestors(pid: i32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut current = pid;
    while found.len() < ANCESTORS_SEARCHED {
        let Ok(parent) = read_status(current).map(|status| status.ppid) else {
            break;
        };
        if parent <= 1 {
            break;
        }
        let Some(name) = program_name(parent) else {
            break;
        };
        found.push((parent as u32, name));
        current = parent;
    }
    found
}

/// A process's executable file name (`mpirun.mpich` runs as `mpiexec.hydra`, its `comm`
/// still `mpirun.mpich`), else its `comm`.
fn program_name(pid: i32) -> Option<String> {
    match std::fs::read_link(format!("/proc/{pid}/exe")) {
        Ok(exe) => Some(file_name(&exe.to_string_lossy()).to_string()),
        Err(_) => read_status(pid).ok().map(|status| status.name),
    }
}

impl Tracer<'_> {
    /// Sends the role of process `pid`, whose program `exe` starts running now.
    pub(crate) fn record_role(&mut self, pid: i32, exe: &str) {
        let role = role_at_start(pid, exe);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.role = role.clone();
        }
        if let Some(role) = role {
            self.send(pid, pid, EventKind::ProcessRole(role));
        }
    }

    /// A fork child of a launcher is the launcher too (its program, until it execs; mpirun
    /// and hydra's proxy do work in the child before exec'ing a rank). A rank's fork child is
    /// no rank: it may not call MPI.
    pub(crate) fn inherit_launcher_role(&mut self, parent: i32, child: i32) {
        let Some(role @ ProcessRole::Launcher { .. }) =
            self.processes.get(&parent).and_then(|p| p.role.clone())
        else {
            return;
        };
        if let Some(process) = self.processes.get_mut(&child) {
            process.role = Some(role.clone());
            self.send(child, child, EventKind::ProcessRole(role));
        }
    }

    /// A module of `pid` was found: an image with no role yet that turns out to be an MPI
    /// program is a singleton (no launcher gave it a rank).
    pub(crate) fn note_mpi_program(&mut self, pid: i32, path: &str, elf: &ElfFile) {
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        if process.role.is_some() || !is_mpi_program_module(path, elf) {
            return;
        }
        let singleton = mpi_roles::singleton();
        process.role = Some(singleton.clone());
        self.send(pid, pid, EventKind::ProcessRole(singleton));
    }
}
