//! The breakpoints of one process: address → saved byte, what the probe records, and how its
//! first instruction is stepped over. Cloned for fork children, who inherit our int3 bytes.

use std::collections::HashMap;

use crate::breakpoints::emulate::Emulation;
use crate::breakpoints::outofline::relocate;
use crate::error::Result;
use crate::ptrace::inject::ScratchPage;
use crate::ptrace::memory::RemoteMemoryMut;
use crate::trace::format::{AllocFunction, MapCall};

pub const INT3: u8 = 0xcc;
const RET: u8 = 0xc3;

/// What a probe records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Alloc(AllocFunction),
    /// A libc mapping wrapper (attach mode; run mode sees these calls through seccomp).
    Map(MapCall),
    /// The dynamic linker's rendezvous function: libraries were loaded or unloaded.
    Rendezvous,
    /// The resolver of an allocator IFUNC: its return value is the function to probe.
    IfuncResolver(AllocFunction),
    /// An MPI entry point, by its number in the recording's `ptrace::mpi::MpiNames`.
    Mpi(u32),
}

impl ProbeKind {
    /// The probed function's standard name.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Alloc(function) => function.name(),
            ProbeKind::Map(call) => call.name(),
            ProbeKind::Rendezvous => "rendezvous",
            ProbeKind::IfuncResolver(_) => "IFUNC resolver",
            ProbeKind::Mpi(_) => "MPI function",
        }
    }

    /// Probes of the program's own calls, as opposed to memsup's bookkeeping probes.
    pub fn is_program_probe(self) -> bool {
        matches!(self, ProbeKind::Alloc(_) | ProbeKind::Map(_))
    }
}

/// How a hit continues past the instruction the int3 replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOver {
    /// The tracer executes the instruction on the registers.
    Emulate(Emulation),
    /// The instruction is `ret` (the rendezvous function): pop the return address.
    Return,
    /// A relocated copy runs in the scratch page and jumps back.
    OutOfLine { slot: u64 },
    /// Stop every thread, restore, single-step, re-insert.
    StopTheWorld,
}

impl StepOver {
    pub fn name(&self) -> &'static str {
        match self {
            StepOver::Emulate(_) => "emulated",
            StepOver::Return => "emulated ret",
            StepOver::OutOfLine { .. } => "out of line",
            StepOver::StopTheWorld => "stop the world",
        }
    }
}

/// Which step-over memsup prefers. `Auto` takes the cheapest that works; the others force a
/// fallback for every probe that can take it (to test and measure them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StepOverPolicy {
    #[default]
    Auto,
    OutOfLine,
    StopTheWorld,
}

#[derive(Debug, Clone)]
pub struct Breakpoint {
    pub address: u64,
    pub original_byte: u8,
    pub kind: ProbeKind,
    pub step_over: StepOver,
    /// Path of the module the probe is in (dropped when it is unloaded).
    pub module: std::sync::Arc<str>,
}

#[derive(Debug, Clone, Default)]
pub struct BreakpointTable {
    by_address: HashMap<u64, Breakpoint>,
    pub policy: StepOverPolicy,
}

/// Decides how to step over the instruction at `address` (`code` = its original bytes).
fn plan_step_over(
    memory: &mut dyn RemoteMemoryMut,
    scratch: Option<&mut ScratchPage>,
    code: &[u8],
    address: u64,
    policy: StepOverPolicy,
) -> StepOver {
    if code[0] == RET {
        return StepOver::Return;
    }
    if policy == StepOverPolicy::StopTheWorld {
        return StepOver::StopTheWorld;
    }
    if policy == StepOverPolicy::Auto {
        if let Some(emulation) = Emulation::decode(code, address) {
            return StepOver::Emulate(emulation);
        }
    }
    if let Some(scratch) = scratch {
        if let Some(slot) = scratch.next_slot() {
            if let Ok(relocated) = relocate(code, address, slot) {
                let length = relocated.original_length as u64;
                if let Ok(slot) = scratch.fill_slot(memory, &relocated.bytes, address, length) {
                    return StepOver::OutOfLine { slot };
                }
            }
        }
    }
    StepOver::StopTheWorld
}

impl BreakpointTable {
    pub fn with_policy(policy: StepOverPolicy) -> BreakpointTable {
        BreakpointTable {
            by_address: HashMap::new(),
            policy,
        }
    }

    pub fn get(&self, address: u64) -> Option<&Breakpoint> {
        self.by_address.get(&address)
    }

    pub fn len(&self) -> usize {
        self.by_address.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Breakpoint> {
        self.by_address.values()
    }

    /// Plants an int3 at `address` unless one is already there (aliases share one probe).
    pub fn insert(
        &mut self,
        memory: &mut dyn RemoteMemoryMut,
        scratch: Option<&mut ScratchPage>,
        address: u64,
        kind: ProbeKind,
        module: &str,
    ) -> Result<bool> {
        if self.by_address.contains_key(&address) {
            return Ok(false);
        }
        let mut code = [0u8; 16];
        memory.read(address, &mut code)?;
        let policy = if kind.is_program_probe() {
            self.policy
        } else {
            StepOverPolicy::Auto
        };
        let step_over = plan_step_over(memory, scratch, &code, address, policy);
        memory.write_code(address, &[INT3])?;
        self.by_address.insert(
            address,
            Breakpoint {
                address,
                original_byte: code[0],
                kind,
                step_over,
                module: std::sync::Arc::from(module),
            },
        );
        Ok(true)
    }

    /// Forgets the probes of modules no longer mapped (their bytes went with the mapping).
    pub fn forget_modules_not_in(&mut self, loaded: &dyn Fn(&str, u64) -> bool) {
        self.by_address
            .retain(|address, breakpoint| loaded(&breakpoint.module, *address));
    }

    /// Puts every original byte back where our int3 still is. Returns how many breakpoints
    /// were found overwritten by someone else (left as they are).
    pub fn restore_all(&mut self, memory: &mut dyn RemoteMemoryMut) -> u64 {
        let mut foreign = 0;
        for breakpoint in self.by_address.values() {
            match memory.read_u8(breakpoint.address) {
                Ok(INT3) => {
                    let _ = memory.write_code(breakpoint.address, &[breakpoint.original_byte]);
                }
                Ok(_) => foreign += 1,
                Err(_) => {}
            }
        }
        self.by_address.clear();
        foreign
    }

    /// Drops the table without touching memory (after exec the old image is gone).
    pub fn clear(&mut self) {
        self.by_address.clear();
    }
}
