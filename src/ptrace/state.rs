//! What the tracer knows about each supervised process and thread.

use std::collections::{HashMap, HashSet};

use crate::breakpoints::returns::ShadowStack;
use crate::breakpoints::table::{BreakpointTable, ProbeKind, StepOverPolicy};
use crate::events::RawStack;
use crate::hooks::code::CpuSource;
use crate::hooks::layout::Shape;
use crate::ptrace::capture::StackCopyState;
use crate::ptrace::inject::ScratchPage;
use crate::ptrace::memory::TraceeMemory;
use crate::ptrace::mpi::ProcessMpi;
use crate::trace::format::{MapCall, ProbeCounters, ProbeSite};

/// A mapping system call seen at its seccomp stop, waiting for its result.
#[derive(Debug)]
pub struct PendingSyscall {
    pub(super) call: MapCall,
    pub(super) args: [u64; 6],
    /// The stack captured at the system call's entry.
    pub(super) stack: RawStack,
}

pub struct Thread {
    pub(super) pid: i32,
    pub(super) shadow: ShadowStack,
    pub(super) pending_syscall: Option<PendingSyscall>,
    /// Signals that arrived while memsup ran code in the thread, delivered at the next resume.
    pub(super) pending_signals: Vec<i32>,
    pub(super) stack_copy: StackCopyState,
    /// Left in its group-stop by job control (`PTRACE_LISTEN`) until it reports SIGCONT:
    /// detach must not run it.
    pub(super) job_stopped: bool,
}

impl Thread {
    pub fn new(pid: i32) -> Thread {
        Thread {
            pid,
            shadow: ShadowStack::default(),
            pending_syscall: None,
            pending_signals: Vec::new(),
            stack_copy: StackCopyState::default(),
            job_stopped: false,
        }
    }
}

pub struct Process {
    pub(super) pid: i32,
    pub(super) memory: Box<dyn TraceeMemory>,
    pub(super) breakpoints: BreakpointTable,
    pub(super) scratch: Option<ScratchPage>,
    pub(super) counters: ProbeCounters,
    /// Module paths already scanned for probes.
    pub(super) known_modules: HashSet<String>,
    /// Probe libc's mapping wrappers (attach mode, where seccomp is not available).
    pub(super) probe_mapping_wrappers: bool,
    /// A vfork child until its exec: its memory is its parent's, restored by the parent.
    pub(super) shares_parent_memory: bool,
    /// Threads that reached their exit stop and are not reaped yet: when all of them have,
    /// the process is ending (exit_group, or the last thread after a pthread_exit'd main).
    pub(super) exiting_threads: HashSet<i32>,
    /// This image's first snapshot was taken: its last, at its exit, is owed whatever the
    /// budget, so its residency does not stop short of its end.
    pub(super) start_snapshotted: bool,
    /// The hook engine's pages, area and patches in this image, once it has any.
    pub(super) hooks: Option<ProcessHooks>,
    /// Entries the hook engine left to an int3, and why: kept apart from `hooks`, which a
    /// process whose ring area could not be made never has.
    pub(super) hook_refusals: HashMap<u64, String>,
    /// Why the hooks were taken out of this image while it ran (it locked its memory):
    /// modules it loads later get int3 probes, and its report still counts what the hooks
    /// recorded before.
    pub(super) hooks_taken_out: Option<String>,
    /// It was said that its /proc files cannot be read (it made itself non-dumpable).
    pub(super) unreadable_told: bool,
    /// Its role in an MPI job, once sent (an image with one is never made a singleton).
    pub(super) role: Option<crate::trace::format::ProcessRole>,
    /// Its MPI library's world communicator and the rank it reported.
    pub(super) mpi: ProcessMpi,
}

/// What the hook engine put into one process image.
#[derive(Debug, Clone)]
pub struct ProcessHooks {
    /// The ring area's address in the target.
    pub area: u64,
    pub shape: Shape,
    pub area_bytes: u64,
    pub cpu: CpuSource,
    /// Code pages: (base, length).
    pub pages: Vec<(u64, u64)>,
    pub patched: Vec<PatchedEntry>,
    /// Each hooked function.
    pub sites: Vec<ProbeSite>,
    /// Each hooked function's probe, for an int3 in its place when a fork child cannot
    /// have rings of its own.
    pub probes: Vec<HookedProbe>,
    /// Each code page's unwind table, published with the modules' for the stack walker.
    pub page_tables: Vec<crate::hooks::stack_section::SegmentTable>,
    /// Where the MPI hooks' calls return (what a blocked MPI call's stack holds).
    pub mpi_return_sites: Vec<u64>,
}

impl ProcessHooks {
    pub fn new(area: u64, shape: Shape, cpu: CpuSource) -> ProcessHooks {
        ProcessHooks {
            area,
            shape,
            area_bytes: shape.bytes(),
            cpu,
            pages: Vec::new(),
            patched: Vec::new(),
            sites: Vec::new(),
            probes: Vec::new(),
            page_tables: Vec::new(),
            mpi_return_sites: Vec::new(),
        }
    }
}

/// A hooked function, as an int3 probe would take it over.
#[derive(Debug, Clone)]
pub struct HookedProbe {
    /// The function's entry, where the int3 goes.
    pub entry: u64,
    /// Where its jump was written: the entry, or past an `endbr64`.
    pub patch: u64,
    pub kind: ProbeKind,
    pub module: String,
}

/// Bytes written over an entry, and what was there.
#[derive(Debug, Clone)]
pub struct PatchedEntry {
    pub address: u64,
    pub original: Vec<u8>,
    /// What memsup wrote (the jump to the hook), as long as `original`.
    pub written: Vec<u8>,
}

impl PatchedEntry {
    /// The bytes to write back at detach, given what is there now: the original where
    /// memsup's byte is still in place, the foreign byte where someone else patched over
    /// it (a runtime code patcher); and whether there was such a foreign byte.
    pub fn restored(&self, current: &[u8]) -> (Vec<u8>, bool) {
        let mut foreign = false;
        let bytes = self
            .original
            .iter()
            .zip(&self.written)
            .zip(current)
            .map(|((&original, &written), &now)| {
                if now == written {
                    original
                } else {
                    foreign = true;
                    now
                }
            })
            .collect();
        (bytes, foreign)
    }
}

impl Process {
    pub fn new(
        pid: i32,
        probe_mapping_wrappers: bool,
        policy: StepOverPolicy,
        memory: Box<dyn TraceeMemory>,
    ) -> Process {
        Process {
            pid,
            memory,
            breakpoints: BreakpointTable::with_policy(policy),
            scratch: None,
            counters: ProbeCounters::default(),
            known_modules: HashSet::new(),
            probe_mapping_wrappers,
            shares_parent_memory: false,
            exiting_threads: HashSet::new(),
            start_snapshotted: false,
            hooks: None,
            hook_refusals: HashMap::new(),
            hooks_taken_out: None,
            unreadable_told: false,
            role: None,
            mpi: ProcessMpi::default(),
        }
    }

    /// A fork child: a copy of the parent's address space, so of its probes and scratch page.
    pub fn forked_from(parent: &Process, pid: i32, memory: Box<dyn TraceeMemory>) -> Process {
        Process {
            breakpoints: parent.breakpoints.clone(),
            scratch: parent.scratch.clone(),
            known_modules: parent.known_modules.clone(),
            hooks: parent.hooks.clone(),
            hook_refusals: parent.hook_refusals.clone(),
            mpi: parent.mpi.forked(),
            ..Process::new(
                pid,
                parent.probe_mapping_wrappers,
                parent.breakpoints.policy,
                memory,
            )
        }
    }

    /// After exec: the old image and everything planted in it are gone.
    pub fn reset_for_exec(&mut self, memory: Box<dyn TraceeMemory>) {
        *self = Process::new(
            self.pid,
            self.probe_mapping_wrappers,
            self.breakpoints.policy,
            memory,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::PatchedEntry;

    fn entry() -> PatchedEntry {
        PatchedEntry {
            address: 0x1000,
            original: vec![0x48, 0x85, 0xff, 0x74, 0x07, 0x53],
            written: vec![0xe9, 0x10, 0x20, 0x30, 0x40, 0xcc],
        }
    }

    #[test]
    fn an_entry_still_patched_gets_its_original_bytes() {
        let entry = entry();
        assert_eq!(
            entry.restored(&entry.written),
            (entry.original.clone(), false)
        );
    }

    #[test]
    fn a_foreign_byte_over_the_patch_stays_and_the_others_are_restored() {
        let entry = entry();
        let current = [0xc3, 0x10, 0x20, 0x30, 0x40, 0xcc];
        let restored = vec![0xc3, 0x85, 0xff, 0x74, 0x07, 0x53];
        assert_eq!(entry.restored(&current), (restored, true));
    }
}
