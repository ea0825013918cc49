//! Relocated prologues of allocator entries: the whole instructions a 5-byte `jmp rel32` to a
//! hook overwrites, re-encoded to run in the hook's code page and followed by a jump back to
//! the first byte after the patch.
//!
//! An entry is refused (the engine then probes it with int3) when its first instructions
//! cannot run elsewhere, or when a direct branch of the function itself lands inside the
//! patched bytes. Branches from other functions into those bytes cannot be seen from the
//! function's own bytes; glibc's and musl's internal callers jump to entries, never past them.

#[cfg(test)]
mod tests;

use std::fmt;

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock, Mnemonic, OpKind, Register,
};

/// `endbr64`: kept at the entry so indirect calls still land on it under IBT.
const END_BRANCH: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// `jmp rel32`.
const JUMP_REL32: u8 = 0xe9;
const JUMP_LENGTH: usize = 5;
const INT3: u8 = 0xcc;

/// Most instructions a patch can cover: five one-byte ones reach the jump's five bytes.
const MAX_PATCHED_INSTRUCTIONS: usize = 5;
/// Longest form the block encoder gives one instruction: a `loop` out of reach becomes
/// `loop +2; jmp +6; jmp [rip+x]` (2 + 2 + 6) and an 8-byte target after the code.
const LONGEST_RELOCATED_INSTRUCTION: usize = 18;
/// `jmp [rip+x]` and its 8-byte target, the jump back when it is out of rel32 reach.
const ABSOLUTE_JUMP_LENGTH: usize = 14;
/// int3 padding before the 8-byte targets, which the block encoder aligns to eight.
const TARGET_ALIGNMENT_PADDING: usize = 7;

/// Upper bound of `Relocation::code`'s length, for laying out the code page.
pub const MAX_RELOCATED_BYTES: usize = MAX_PATCHED_INSTRUCTIONS * LONGEST_RELOCATED_INSTRUCTION
    + ABSOLUTE_JUMP_LENGTH
    + TARGET_ALIGNMENT_PADDING;

/// Where and how an entry is patched, and what to put back at detach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPatch {
    /// Offset of the jump from the function's entry: 4 after an `endbr64` (kept, so callers
    /// that jump to the entry still land on it), else 0.
    pub offset: u64,
    /// Bytes overwritten (>= 5: whole instructions; bytes past the jump's five are int3).
    pub length: usize,
    /// The original bytes at entry+offset .. +length.
    pub original: Vec<u8>,
}

/// A patch and the code that stands in for the bytes it overwrites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    pub patch: EntryPatch,
    /// Code to place at `at`: the overwritten instructions relocated, then a jump to
    /// entry + offset + length (`jmp rel32`, or `jmp [rip+0]; .quad` when out of reach).
    pub code: Vec<u8>,
}

/// Why an entry cannot be hooked (the engine then falls back to an int3 probe and counts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The function is shorter than the patch it would need.
    TooShort { entry: u64, size: usize },
    /// The bytes at `entry + offset` are not an instruction.
    Undecodable { entry: u64, offset: u64 },
    /// The function starts with a `jmp`: it forwards to another function (`target` is None
    /// for an indirect jump).
    Forwarder { entry: u64, target: Option<u64> },
    /// An instruction among the patched ones cannot run at another address.
    Unrelocatable {
        entry: u64,
        offset: u64,
        mnemonic: Mnemonic,
    },
    /// A direct branch of the function at `entry + source` lands at `entry + target`, inside
    /// the patched bytes.
    BranchIntoPatch {
        entry: u64,
        source: u64,
        target: u64,
    },
    /// The block encoder cannot place the instructions at `at` (a rip-relative operand out of
    /// rel32 reach).
    Encoder {
        entry: u64,
        at: u64,
        message: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooShort { entry, size } => write!(
                formatter,
                "the function at {entry:#x} is {size} bytes, too short for a {JUMP_LENGTH}-byte jump"
            ),
            Refusal::Undecodable { entry, offset } => write!(
                formatter,
                "the bytes at {entry:#x}+{offset:#x} do not decode as an instruction"
            ),
            Refusal::Forwarder { entry, target } => match target {
                Some(target) => write!(
                    formatter,
                    "the function at {entry:#x} only jumps to {target:#x}"
                ),
                None => write!(formatter, "the function at {entry:#x} only jumps elsewhere"),
            },
            Refusal::Unrelocatable {
                entry,
                offset,
                mnemonic,
            } => write!(
                formatter,
                "the {} at {entry:#x}+{offset:#x} cannot run out of place",
                format!("{mnemonic:?}").to_lowercase()
            ),
            Refusal::BranchIntoPatch {
                entry,
                source,
                target,
            } => write!(
                formatter,
                "a branch at {entry:#x}+{source:#x} lands inside the patched bytes (at +{target:#x})"
            ),
            Refusal::Encoder { entry, at, message } => write!(
                formatter,
                "the prologue at {entry:#x} cannot be placed at {at:#x}: {message}"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// Relocates the entry of a function so a hook at `at` can run its first instructions and
/// continue into it. `function`: the whole function's bytes (its symbol size), which starts
/// at `entry`; it is decoded to its end (stopping at padding or data past the patch) to find
/// branches into the patched bytes. Branches from other functions are not seen.
pub fn relocate_entry(function: &[u8], entry: u64, at: u64) -> Result<Relocation, Refusal> {
    let offset = if function.starts_with(&END_BRANCH) {
        END_BRANCH.len()
    } else {
        0
    };
    if function.len() < offset + JUMP_LENGTH {
        return Err(Refusal::TooShort {
            entry,
            size: function.len(),
        });
    }
    let instructions = patched_instructions(function, entry, offset as u64)?;
    let length: usize = instructions.iter().map(Instruction::len).sum();
    let patch_start = entry + offset as u64;
    check_branches_into(function, entry, patch_start..patch_start + length as u64)?;
    let code = encode(&instructions, patch_start + length as u64, entry, at)?;
    Ok(Relocation {
        patch: EntryPatch {
            offset: offset as u64,
            length,
            original: function[offset..offset + length].to_vec(),
        },
        code,
    })
}

/// The whole instructions from `entry + offset` covering at least the jump's five bytes,
/// each one able to run at another address.
fn patched_instructions(
    function: &[u8],
    entry: u64,
    offset: u64,
) -> Result<Vec<Instruction>, Refusal> {
    let start = entry + offset;
    let mut decoder = Decoder::with_ip(
        64,
        &function[offset as usize..],
        start,
        DecoderOptions::NONE,
    );
    let mut instructions = Vec::new();
    let mut length = 0;
    while length < JUMP_LENGTH {
        let instruction = decoder.decode();
        let instruction_offset = instruction.ip() - entry;
        if instruction.is_invalid() {
            return Err(Refusal::Undecodable {
                entry,
                offset: instruction_offset,
            });
        }
        let jumps = matches!(
            instruction.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
        );
        if instructions.is_empty() && jumps {
            let target = direct_target(&instruction);
            return Err(Refusal::Forwarder { entry, target });
        }
        if !relocatable(&instruction) {
            return Err(Refusal::Unrelocatable {
                entry,
                offset: instruction_offset,
                mnemonic: instruction.mnemonic(),
            });
        }
        length += instruction.len();
        instructions.push(instruction);
    }
    Ok(instructions)
}

/// Whether the instruction does the same thing at another address, given the block encoder
/// rewrites rip-relative operands and conditional branches.
fn relocatable(instruction: &Instruction) -> bool {
    let flow_kept = matches!(
        instruction.flow_control(),
        FlowControl::Next | FlowControl::ConditionalBranch
    );
    let special = matches!(
        instruction.mnemonic(),
        Mnemonic::Syscall | Mnemonic::Sysenter | Mnemonic::Int3 | Mnemonic::Int | Mnemonic::Int1
    );
    flow_kept && !special && instruction.memory_base() != Register::EIP
}

/// The target of a direct branch (jmp, jcc, call, loop, jrcxz), or None.
fn direct_target(instruction: &Instruction) -> Option<u64> {
    (0..instruction.op_count())
        .any(|index| instruction.op_kind(index) == OpKind::NearBranch64)
        .then(|| instruction.near_branch_target())
}

/// Refuses when a direct branch anywhere in the function lands inside `patched` past its
/// first byte. Decoding stops at the first undecodable bytes (padding or data); the patched
/// instructions decoded before it, so those bytes lie past them.
fn check_branches_into(
    function: &[u8],
    entry: u64,
    patched: std::ops::Range<u64>,
) -> Result<(), Refusal> {
    let mut decoder = Decoder::with_ip(64, function, entry, DecoderOptions::NONE);
    for instruction in &mut decoder {
        if instruction.is_invalid() {
            break;
        }
        let Some(target) = direct_target(&instruction) else {
            continue;
        };
        if target > patched.start && target < patched.end {
            return Err(Refusal::BranchIntoPatch {
                entry,
                source: instruction.ip() - entry,
                target: target - entry,
            });
        }
    }
    Ok(())
}

/// The instructions re-encoded at `at`, then a jump to `resume`. The block encoder picks
/// `jmp rel32` or `jmp [rip+0]; .quad` for the jump, and the jcc-over-absolute-jump form for
/// a conditional branch out of reach.
fn encode(
    instructions: &[Instruction],
    resume: u64,
    entry: u64,
    at: u64,
) -> Result<Vec<u8>, Refusal> {
    let mut block = instructions.to_vec();
    block.push(Instruction::with_branch(Code::Jmp_rel32_64, resume).expect("jmp rel32 branch"));
    let refuse = |message: String| Refusal::Encoder { entry, at, message };
    let encoded = BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, at),
        BlockEncoderOptions::NONE,
    )
    .map_err(|error| refuse(error.to_string()))?;
    if encoded.code_buffer.len() > MAX_RELOCATED_BYTES {
        return Err(refuse(format!(
            "{} bytes exceed the {MAX_RELOCATED_BYTES} a slot holds",
            encoded.code_buffer.len()
        )));
    }
    Ok(encoded.code_buffer)
}

/// The bytes to write at entry+patch.offset (`from`): `jmp rel32` to `hook` padded with int3
/// to `length`; None when `hook` is out of rel32 reach or `length` is under five.
pub fn jump_bytes(from: u64, hook: u64, length: usize) -> Option<Vec<u8>> {
    if length < JUMP_LENGTH {
        return None;
    }
    let next = from.wrapping_add(JUMP_LENGTH as u64);
    let displacement = i32::try_from(hook.wrapping_sub(next) as i64).ok()?;
    let mut bytes = Vec::with_capacity(length);
    bytes.push(JUMP_REL32);
    bytes.extend_from_slice(&displacement.to_le_bytes());
    bytes.resize(length, INT3);
    Some(bytes)
}
