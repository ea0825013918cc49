//! Emulating a probed function's first instruction in the tracer, so a breakpoint hit costs
//! one stop and the int3 never has to be lifted.
//!
//! Only instructions whose whole effect is on general-purpose registers, RFLAGS' arithmetic
//! bits, rip and (for push) one stack slot are emulated; everything else is left to the
//! out-of-line path. Decoding happens once per probe site, so `apply` is a plain match.

mod decode;
mod flags;
mod operands;

#[cfg(test)]
mod tests;

use iced_x86::{Decoder, DecoderOptions};
use libc::user_regs_struct;

use crate::error::Result;
use crate::ptrace::memory::RemoteMemory;

use operands::{Address, Operand, RegisterOperand, Width};

/// A first instruction memsup can execute on the tracee's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emulation {
    /// Where the instruction was decoded: rip-relative operands are already resolved against
    /// it, and `apply` resumes at `address + length`.
    address: u64,
    length: u8,
    operation: Operation,
}

/// What the instruction does, reduced to the few shapes memsup emulates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Operation {
    /// endbr64 and the nop family.
    NoOp,
    /// `jmp rel8/rel32` (musl's malloc, free and realloc are such tail-call stubs).
    Jump { target: u64 },
    /// `push r64` or `push imm`: always 8 bytes.
    Push { source: Operand },
    /// `mov reg, reg/imm/[mem]`.
    Move {
        destination: RegisterOperand,
        source: Operand,
    },
    /// `lea reg, [mem]`: the address only, no memory access.
    LoadAddress {
        destination: RegisterOperand,
        address: Address,
    },
    /// add/sub/cmp/and/or/xor/test; only cmp and test may have a memory destination.
    Arithmetic {
        kind: ArithmeticKind,
        width: Width,
        destination: Operand,
        source: Operand,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArithmeticKind {
    Add,
    Subtract,
    Compare,
    And,
    Or,
    Xor,
    Test,
}

impl ArithmeticKind {
    /// cmp and test only set flags.
    fn writes_result(self) -> bool {
        !matches!(self, ArithmeticKind::Compare | ArithmeticKind::Test)
    }
}

impl Emulation {
    /// Decodes the instruction at `address` from `code` (the original bytes, at least 15 when
    /// available). None when it is not one memsup emulates.
    pub fn decode(code: &[u8], address: u64) -> Option<Emulation> {
        let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
        // A truncated `code` also decodes as invalid.
        let instruction = decoder.decode();
        if instruction.is_invalid() {
            return None;
        }
        let operation = decode::translate(&instruction)?;
        Some(Emulation {
            address,
            length: instruction.len() as u8,
            operation,
        })
    }

    /// Length of the instruction in bytes.
    pub fn length(&self) -> usize {
        usize::from(self.length)
    }

    /// Address the instruction was decoded at.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Applies the instruction to `regs` (rip advanced past it, flags updated as the CPU
    /// would). Memory operands are read through `memory`. A push returns the value the caller
    /// must store at the new `regs.rsp` (the caller batches that write with its own).
    ///
    /// rip is set from the decode address, not from `regs.rip`, so the caller need not rewind
    /// rip past the int3 first. On error `regs` is left unchanged.
    pub fn apply(
        &self,
        regs: &mut user_regs_struct,
        memory: &dyn RemoteMemory,
    ) -> Result<Option<u64>> {
        let next_rip = self.address.wrapping_add(u64::from(self.length));
        let mut pushed = None;
        match &self.operation {
            Operation::NoOp => {}
            Operation::Jump { target } => {
                regs.rip = *target;
                return Ok(None);
            }
            Operation::Push { source } => {
                let value = source.read(Width::Qword, regs, memory)?;
                regs.rsp = regs.rsp.wrapping_sub(8);
                pushed = Some(value);
            }
            Operation::Move {
                destination,
                source,
            } => {
                let value = source.read(destination.width, regs, memory)?;
                destination.write(regs, value);
            }
            Operation::LoadAddress {
                destination,
                address,
            } => {
                let value = address.effective(regs);
                destination.write(regs, value);
            }
            Operation::Arithmetic {
                kind,
                width,
                destination,
                source,
            } => apply_arithmetic(*kind, *width, destination, source, regs, memory)?,
        }
        regs.rip = next_rip;
        Ok(pushed)
    }
}

fn apply_arithmetic(
    kind: ArithmeticKind,
    width: Width,
    destination: &Operand,
    source: &Operand,
    regs: &mut user_regs_struct,
    memory: &dyn RemoteMemory,
) -> Result<()> {
    let left = destination.read(width, regs, memory)?;
    let right = source.read(width, regs, memory)?;
    let (result, arithmetic_flags) = match kind {
        ArithmeticKind::Add => flags::add(left, right, width),
        ArithmeticKind::Subtract | ArithmeticKind::Compare => flags::subtract(left, right, width),
        ArithmeticKind::And | ArithmeticKind::Test => flags::logic(left & right, width),
        ArithmeticKind::Or => flags::logic(left | right, width),
        ArithmeticKind::Xor => flags::logic(left ^ right, width),
    };
    if kind.writes_result() {
        // Decoding admits a memory destination only for cmp and test.
        if let Operand::Register(register) = destination {
            register.write(regs, result);
        }
    }
    regs.eflags = flags::merge(regs.eflags, arithmetic_flags);
    Ok(())
}
