//! MPI entry points: an int3 probe on each whose return is hijacked like an allocator's, so a
//! thread's outermost MPI call is recorded at entry and at return. The hook rings are flushed
//! first, so every allocation the thread made before the stop comes before it in the
//! profile. `MPI_Comm_rank(MPI_COMM_WORLD)` tells the process's rank. The hook engine hooks
//! the others instead (`HookShape::Mpi`, `mpi_hooks`): their records need no stop.

use std::collections::{HashMap, HashSet};

use crate::breakpoints::table::ProbeKind;
use crate::events::EventKind;
use crate::module::ModuleFile;
use crate::platform::mpi::{
    is_mpi_entry_point, keeps_int3, recorded_name, COMM_RANK, COMM_SIZE, MPICH_COMM_WORLD,
    OPEN_MPI_COMM_WORLD_SYMBOL, SNAPSHOTTED_AT_ENTRY_AND_RETURN,
};
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::tracer::Tracer;
use crate::symbols::elf::{data_object_address, ElfFile};
use crate::trace::format::{MpiRank, ProbeSite, ProcessRole, SnapshotReason};

/// The recording's MPI function names: one number per name, in every process.
#[derive(Debug, Default)]
pub struct MpiNames {
    names: Vec<String>,
    numbers: HashMap<String, u32>,
}

impl MpiNames {
    pub fn number(&mut self, name: &str) -> u32 {
        if let Some(&number) = self.numbers.get(name) {
            return number;
        }
        let number = self.names.len() as u32;
        self.names.push(name.to_string());
        self.numbers.insert(name.to_string(), number);
        number
    }

    pub fn name(&self, number: u32) -> &str {
        self.names.get(number as usize).map_or("", String::as_str)
    }
}

/// What memsup knows of one process image's MPI library.
#[derive(Debug, Clone, Default)]
pub struct ProcessMpi {
    /// Values of `MPI_COMM_WORLD` in this image: MPICH's constant, and the address of Open
    /// MPI's world communicator object where libmpi.so is loaded.
    pub(super) world_handles: Vec<u64>,
    /// Function numbers whose name was sent for this process.
    declared: HashSet<u32>,
    /// Entries (true) and returns of functions already snapshotted in this image.
    snapshotted: HashSet<(u32, bool)>,
    rank: Option<u32>,
    world_size: Option<u32>,
    /// The rank was sent, with its world size or without.
    sent: Option<Option<u32>>,
    /// Where the process holds the bytes a detach sends a blocked MPI call home through
    /// (`mpi_hooks`), once looked for.
    pub(super) return_past_copy: Option<Option<u64>>,
}

impl ProcessMpi {
    /// A fork child's: the same address space, nothing sent for it yet.
    pub fn forked(&self) -> ProcessMpi {
        ProcessMpi {
            world_handles: self.world_handles.clone(),
            return_past_copy: self.return_past_copy,
            ..ProcessMpi::default()
        }
    }
}

/// The MPI entry points a module defines, one per address (`MPI_X` and its alias `PMPI_X`
/// share one), each with its size and recorded name. Runtime addresses.
pub fn mpi_entry_points(elf: &ElfFile, bias: u64) -> Vec<(u64, u64, String)> {
    let mut symbols = elf.find_functions_matching(is_mpi_entry_point);
    // At one address the `MPI_` name first: it is the one kept.
    symbols.sort_by_key(|symbol| (symbol.address, symbol.name.starts_with('P')));
    symbols.dedup_by_key(|symbol| symbol.address);
    symbols
        .into_iter()
        .map(|symbol| {
            let name = recorded_name(&symbol.name).to_string();
            (symbol.address.wrapping_add(bias), symbol.size, name)
        })
        .collect()
}

/// An MPI entry point to probe: where, its function's size, and its probe.
pub(crate) struct MpiEntry {
    pub address: u64,
    pub size: u64,
    pub kind: ProbeKind,
    /// Whether the hook engine may hook it (`keeps_int3`).
    pub hookable: bool,
}

impl Tracer<'_> {
    /// The probes of the MPI entry points `module` defines, and where its `MPI_COMM_WORLD`
    /// is: Open MPI's world object lies in libmpi.so, or in an executable that refers to it
    /// (a copy relocation moves it there), so every module is looked at.
    pub(crate) fn mpi_probes(
        &mut self,
        pid: i32,
        file: &ModuleFile,
        elf: &ElfFile,
        bias: u64,
    ) -> Vec<MpiEntry> {
        let open_mpi_world = data_object_address(file.bytes(), OPEN_MPI_COMM_WORLD_SYMBOL);
        let entry_points = mpi_entry_points(elf, bias);
        if let Ok(process) = self.process_mut(pid) {
            let handles = &mut process.mpi.world_handles;
            handles.extend(open_mpi_world.map(|address| address.wrapping_add(bias)));
            if !entry_points.is_empty() {
                handles.push(MPICH_COMM_WORLD);
            }
        }
        entry_points
            .into_iter()
            .map(|(address, size, name)| MpiEntry {
                address,
                size,
                kind: ProbeKind::Mpi(self.mpi_names.number(&name)),
                hookable: !keeps_int3(&name),
            })
            .collect()
    }

    /// Probe sites of MPI entry points under their function's name.
    pub(crate) fn name_mpi_sites(&self, pid: i32, sites: &mut [ProbeSite]) {
        let Ok(process) = self.process(pid) else {
            return;
        };
        for site in sites {
            if let Some(ProbeKind::Mpi(function)) =
                process.breakpoints.get(site.address).map(|b| b.kind)
            {
                site.function = self.mpi_names.name(function).to_string();
            }
        }
    }

    /// A thread entered (`entry`) or left an outermost MPI call.
    pub(crate) fn mpi_call(&mut self, pid: i32, tid: i32, function: u32, entry: bool) {
        self.flush_hooks_before_int3(pid);
        let Ok(process) = self.process_mut(pid) else {
            return;
        };
        if process.mpi.declared.insert(function) {
            let name = self.mpi_names.name(function).to_string();
            self.send(pid, pid, EventKind::MpiFunction { function, name });
        }
        let call = EventKind::MpiCall {
            function,
            entry,
            stack_pointer: 0,
        };
        self.send(pid, tid, call);
        self.snapshot_at_mpi_call(pid, function, entry);
    }

    /// The first entry into and return from MPI_Init, MPI_Init_thread and MPI_Finalize of an
    /// image are snapshotted while the thread waits (the rings were flushed above): a fixed
    /// number per image, so outside the budget of other waiting snapshots, whose time they
    /// count against.
    fn snapshot_at_mpi_call(&mut self, pid: i32, function: u32, entry: bool) {
        let name = self.mpi_names.name(function);
        if !SNAPSHOTTED_AT_ENTRY_AND_RETURN.contains(&name) {
            return;
        }
        let Ok(process) = self.process_mut(pid) else {
            return;
        };
        if !process.mpi.snapshotted.insert((function, entry)) {
            return;
        }
        let reason = if entry {
            SnapshotReason::MpiEntry { function }
        } else {
            SnapshotReason::MpiReturn { function }
        };
        self.snapshot_waiting(pid, reason);
    }

    /// An MPI call returned `result`; `args` are its arguments at entry. A successful
    /// `MPI_Comm_rank` or `MPI_Comm_size` of `MPI_COMM_WORLD` names the process's rank.
    pub(crate) fn mpi_returned(&mut self, pid: i32, function: u32, args: [u64; 6], result: u64) {
        let name = self.mpi_names.name(function);
        let is_rank = name == COMM_RANK;
        if result as u32 != 0 || !(is_rank || name == COMM_SIZE) {
            return;
        }
        let Ok(process) = self.process_mut(pid) else {
            return;
        };
        if !process.mpi.world_handles.contains(&args[0]) {
            return;
        }
        let mut value = [0u8; 4];
        if process.memory.read(args[1], &mut value).is_err() {
            return;
        }
        let value = u32::from_ne_bytes(value);
        let mpi = &mut process.mpi;
        if is_rank {
            mpi.rank = Some(value);
        } else {
            mpi.world_size = Some(value);
        }
        // Once with what is known when the rank is, and once more if the size comes later.
        let Some(rank) = mpi.rank else {
            return;
        };
        if mpi
            .sent
            .is_some_and(|size| size.is_some() || mpi.world_size.is_none())
        {
            return;
        }
        mpi.sent = Some(mpi.world_size);
        let role = ProcessRole::Rank(MpiRank {
            rank,
            world_size: mpi.world_size,
            job: String::new(),
            source: COMM_RANK.into(),
        });
        self.send(pid, pid, EventKind::ProcessRole(role));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_numbered_once() {
        let mut names = MpiNames::default();
        assert_eq!(names.number("MPI_Init"), 0);
        assert_eq!(names.number("MPI_Send"), 1);
        assert_eq!(names.number("MPI_Init"), 0);
        assert_eq!(names.name(1), "MPI_Send");
        assert_eq!(names.name(7), "");
    }
}
