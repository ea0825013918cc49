//! Relocated copies of first instructions, executed out of line in the scratch page and
//! followed by a jump back, for instructions the tracer cannot emulate.

use crate::error::Result;

/// Code for one out-of-line slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocatedInstruction {
    /// The relocated instruction followed by `jmp original_address + original_length`.
    pub bytes: Vec<u8>,
    /// Length of the original instruction.
    pub original_length: usize,
}

/// Relocates the first instruction of `code` (originally at `original_address`) so it runs at
/// `slot_address` and then continues at the original next instruction. Fails for instructions
/// that cannot run elsewhere (call, ret, rip-relative or branch targets out of rel32 reach).
pub fn relocate(
    code: &[u8],
    original_address: u64,
    slot_address: u64,
) -> Result<RelocatedInstruction> {
    let _ = (code, original_address, slot_address);
    todo!()
}
