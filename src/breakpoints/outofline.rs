//! Relocated copies of first instructions, executed out of line in the scratch page and
//! followed by a jump back, for instructions the tracer cannot emulate.
//!
//! A slot holds no per-thread state and ends in a jump, so any number of threads can run it
//! at once: on a hit the tracer only sets rip to the slot and continues.

#[cfg(test)]
mod tests;

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock, OpKind, Register,
};

use crate::error::{Error, Result};

/// Longest slot `relocate` produces: a 15-byte instruction plus the 5-byte jump back (a
/// short jcc grows to 6 bytes, still within it).
pub const MAX_RELOCATED_LENGTH: usize = 20;

/// Reach kept in reserve when checking rel32 distances from the slot, so the check holds for
/// every instruction position inside it.
const REACH_MARGIN: i64 = 32;

/// `jmp rel32`.
const JUMP_REL32: u8 = 0xe9;

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
    let mut decoder = Decoder::with_ip(64, code, original_address, DecoderOptions::NONE);
    let instruction = decoder.decode();
    if instruction.is_invalid() {
        let shown = hex(&code[..code.len().min(15)]);
        return Err(Error::Internal(format!(
            "cannot relocate the instruction at {original_address:#x}: bytes {shown} do not decode"
        )));
    }
    let original = &code[..instruction.len()];
    let refuse = |reason: String| {
        Error::Internal(format!(
            "cannot relocate {:?} ({}) from {original_address:#x} to slot {slot_address:#x}: {reason}",
            instruction.mnemonic(),
            hex(original),
        ))
    };
    if let Some(reason) = unrelocatable(&instruction) {
        return Err(refuse(reason.to_string()));
    }
    let resume_address = original_address.wrapping_add(instruction.len() as u64);
    for (what, target) in targets(&instruction).chain([("the jump back", resume_address)]) {
        if !within_reach(slot_address, target) {
            return Err(refuse(format!(
                "{what} {target:#x} is out of rel32 reach from the slot; the scratch page must be \
                 within ±2 GiB"
            )));
        }
    }
    let block = [instruction];
    let encoded = BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, slot_address),
        BlockEncoderOptions::NONE,
    )
    .map_err(|error| refuse(format!("the block encoder cannot place it: {error}")))?;
    let mut bytes = encoded.code_buffer;
    check_relocated(&bytes, slot_address, &instruction).map_err(refuse)?;
    append_jump(&mut bytes, slot_address, resume_address);
    Ok(RelocatedInstruction {
        bytes,
        original_length: instruction.len(),
    })
}

/// Why an instruction cannot run anywhere but at its own address, or None.
fn unrelocatable(instruction: &Instruction) -> Option<&'static str> {
    match instruction.flow_control() {
        FlowControl::Call | FlowControl::IndirectCall => {
            Some("it saves its own next address (call return address, syscall rcx)")
        }
        FlowControl::Return => Some("it returns, so the jump back would never run"),
        FlowControl::Interrupt => Some("an interrupt would report the slot's address"),
        FlowControl::Exception => Some("it faults, and would report the slot's address"),
        FlowControl::XbeginXabortXend => Some("transactional instructions are not relocated"),
        FlowControl::Next
        | FlowControl::UnconditionalBranch
        | FlowControl::IndirectBranch
        | FlowControl::ConditionalBranch => {
            (instruction.memory_base() == Register::EIP).then_some("eip-relative addressing")
        }
    }
}

/// Absolute addresses the relocated instruction must still reach.
fn targets(instruction: &Instruction) -> impl Iterator<Item = (&'static str, u64)> {
    let memory = memory_target(instruction).map(|target| ("the rip-relative operand", target));
    let branch = branch_target(instruction).map(|target| ("the branch target", target));
    memory.into_iter().chain(branch)
}

fn memory_target(instruction: &Instruction) -> Option<u64> {
    (instruction.memory_base() == Register::RIP).then(|| instruction.ip_rel_memory_address())
}

fn branch_target(instruction: &Instruction) -> Option<u64> {
    (0..instruction.op_count())
        .any(|index| instruction.op_kind(index) == OpKind::NearBranch64)
        .then(|| instruction.near_branch_target())
}

fn within_reach(slot_address: u64, target: u64) -> bool {
    let distance = target.wrapping_sub(slot_address) as i64;
    (i64::from(i32::MIN) + REACH_MARGIN..=i64::from(i32::MAX) - REACH_MARGIN).contains(&distance)
}

/// The block encoder may have grown the instruction (short jcc to near) but must not have
/// split it into several or changed what it addresses.
fn check_relocated(
    bytes: &[u8],
    slot_address: u64,
    original: &Instruction,
) -> std::result::Result<(), String> {
    let mut decoder = Decoder::with_ip(64, bytes, slot_address, DecoderOptions::NONE);
    let relocated = decoder.decode();
    if relocated.is_invalid() || relocated.len() != bytes.len() {
        return Err(format!(
            "the block encoder turned it into several instructions ({})",
            hex(bytes)
        ));
    }
    let same_targets = memory_target(&relocated) == memory_target(original)
        && branch_target(&relocated) == branch_target(original);
    if relocated.mnemonic() != original.mnemonic() || !same_targets {
        return Err(format!("the relocated form {} differs", hex(bytes)));
    }
    if bytes.len() + 5 > MAX_RELOCATED_LENGTH {
        return Err(format!("the relocated form {} is too long", hex(bytes)));
    }
    Ok(())
}

/// `jmp rel32` to `target`, placed right after `bytes` in the slot. Reach is checked before.
fn append_jump(bytes: &mut Vec<u8>, slot_address: u64, target: u64) {
    let next = slot_address.wrapping_add(bytes.len() as u64 + 5);
    let displacement = target.wrapping_sub(next) as i64 as i32;
    bytes.push(JUMP_REL32);
    bytes.extend_from_slice(&displacement.to_le_bytes());
}

fn hex(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    parts.join(" ")
}
