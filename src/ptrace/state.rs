//! What the tracer knows about each supervised process and thread.

use std::collections::{HashMap, HashSet};

use crate::breakpoints::returns::ShadowStack;
use crate::breakpoints::table::{BreakpointTable, StepOverPolicy};
use crate::events::RawStack;
use crate::hooks::code::CpuSource;
use crate::ptrace::capture::StackCopyState;
use crate::ptrace::inject::ScratchPage;
use crate::ptrace::memory::TraceeMemory;
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
}

impl Thread {
    pub fn new(pid: i32) -> Thread {
        Thread {
            pid,
            shadow: ShadowStack::default(),
            pending_syscall: None,
            pending_signals: Vec::new(),
            stack_copy: StackCopyState::default(),
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
    /// The hook engine's pages, area and patches in this image, once it has any.
    pub(super) hooks: Option<ProcessHooks>,
}

/// What the hook engine put into one process image.
#[derive(Debug, Clone)]
pub struct ProcessHooks {
    /// The ring area's address in the target.
    pub area: u64,
    pub area_bytes: u64,
    pub cpu: CpuSource,
    /// Code pages: (base, length).
    pub pages: Vec<(u64, u64)>,
    pub patched: Vec<PatchedEntry>,
    /// Each hooked function.
    pub sites: Vec<ProbeSite>,
    /// Allocator entries that kept an int3, and why.
    pub refusals: HashMap<u64, String>,
}

impl ProcessHooks {
    pub fn new(area: u64, area_bytes: u64, cpu: CpuSource) -> ProcessHooks {
        ProcessHooks {
            area,
            area_bytes,
            cpu,
            pages: Vec::new(),
            patched: Vec::new(),
            sites: Vec::new(),
            refusals: HashMap::new(),
        }
    }
}

/// Bytes written over an entry, and what was there.
#[derive(Debug, Clone)]
pub struct PatchedEntry {
    pub address: u64,
    pub original: Vec<u8>,
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
            hooks: None,
        }
    }

    /// A fork child: a copy of the parent's address space, so of its probes and scratch page.
    pub fn forked_from(parent: &Process, pid: i32, memory: Box<dyn TraceeMemory>) -> Process {
        Process {
            breakpoints: parent.breakpoints.clone(),
            scratch: parent.scratch.clone(),
            known_modules: parent.known_modules.clone(),
            hooks: parent.hooks.clone(),
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
