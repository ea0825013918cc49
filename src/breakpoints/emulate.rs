//! Emulating a probed function's first instruction in the tracer, so a breakpoint hit costs
//! one stop and the int3 never has to be lifted.

use libc::user_regs_struct;

use crate::error::Result;
use crate::ptrace::memory::RemoteMemory;

/// A first instruction memsup can execute on the tracee's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Emulation {}

impl Emulation {
    /// Decodes the instruction at `address` from `code` (the original bytes, at least 15 when
    /// available). None when it is not one memsup emulates.
    pub fn decode(code: &[u8], address: u64) -> Option<Emulation> {
        let _ = (code, address);
        todo!()
    }

    /// Length of the instruction in bytes.
    pub fn length(&self) -> usize {
        todo!()
    }

    /// Applies the instruction to `regs` (rip advanced past it, flags updated as the CPU
    /// would). Memory operands are read through `memory`. A push returns the value the caller
    /// must store at the new `regs.rsp` (the caller batches that write with its own).
    pub fn apply(
        &self,
        regs: &mut user_regs_struct,
        memory: &dyn RemoteMemory,
    ) -> Result<Option<u64>> {
        let _ = (regs, memory);
        todo!()
    }
}
