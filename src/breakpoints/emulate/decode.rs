//! From an iced-x86 instruction to the few operation shapes memsup emulates; None for
//! everything else, so the caller falls back to the out-of-line path.

use iced_x86::{Code, Instruction, Mnemonic, OpKind, Register};

use super::operands::{Address, Operand, RegisterOperand, Width};
use super::{ArithmeticKind, Operation};

pub(super) fn translate(instruction: &Instruction) -> Option<Operation> {
    if is_no_op(instruction) {
        return Some(Operation::NoOp);
    }
    if has_unsupported_prefix(instruction) {
        return None;
    }
    match instruction.mnemonic() {
        Mnemonic::Jmp => jump(instruction),
        Mnemonic::Push => push(instruction),
        Mnemonic::Mov => move_to_register(instruction),
        Mnemonic::Lea => load_address(instruction),
        Mnemonic::Add => arithmetic(instruction, ArithmeticKind::Add),
        Mnemonic::Sub => arithmetic(instruction, ArithmeticKind::Subtract),
        Mnemonic::Cmp => arithmetic(instruction, ArithmeticKind::Compare),
        Mnemonic::And => arithmetic(instruction, ArithmeticKind::And),
        Mnemonic::Or => arithmetic(instruction, ArithmeticKind::Or),
        Mnemonic::Xor => arithmetic(instruction, ArithmeticKind::Xor),
        Mnemonic::Test => arithmetic(instruction, ArithmeticKind::Test),
        _ => None,
    }
}

/// endbr and the nops. Their memory operand (`nopw 0(%rax,%rax,1)`) is never accessed, so
/// segment and operand-size prefixes (`cs nopw`, padding) change nothing.
fn is_no_op(instruction: &Instruction) -> bool {
    match instruction.code() {
        // F3 is part of endbr's encoding, not a rep prefix.
        Code::Endbr64 | Code::Endbr32 => true,
        Code::Nopw | Code::Nopd | Code::Nopq | Code::Nop_rm16 | Code::Nop_rm32 | Code::Nop_rm64 => {
            !instruction.has_lock_prefix()
                && !instruction.has_rep_prefix()
                && !instruction.has_repne_prefix()
        }
        _ => false,
    }
}

/// lock and rep change the meaning or make it undefined; a segment override may be fs/gs,
/// whose base the tracer would have to fetch. None of them occur in the entries memsup probes.
fn has_unsupported_prefix(instruction: &Instruction) -> bool {
    instruction.has_lock_prefix()
        || instruction.has_rep_prefix()
        || instruction.has_repne_prefix()
        || instruction.segment_prefix() != Register::None
}

/// Direct jmp without prefixes: the target is already absolute.
fn jump(instruction: &Instruction) -> Option<Operation> {
    let plain = matches!(
        (instruction.code(), instruction.len()),
        (Code::Jmp_rel8_64, 2) | (Code::Jmp_rel32_64, 5)
    );
    plain.then(|| Operation::Jump {
        target: instruction.near_branch_target(),
    })
}

/// 8-byte pushes of a register or an immediate (the 16-bit `66` forms push 2 bytes).
fn push(instruction: &Instruction) -> Option<Operation> {
    if instruction.stack_pointer_increment() != -8 || instruction.op_count() != 1 {
        return None;
    }
    let source = match operand(instruction, 0)? {
        Operand::Memory(_) => return None,
        other => other,
    };
    Some(Operation::Push { source })
}

/// mov into a GPR from a GPR, an immediate or memory; stores to memory are not emulated.
fn move_to_register(instruction: &Instruction) -> Option<Operation> {
    if instruction.op_count() != 2 {
        return None;
    }
    let Operand::Register(destination) = operand(instruction, 0)? else {
        return None;
    };
    let source = operand(instruction, 1)?;
    if let Operand::Memory(_) = source {
        memory_width(instruction).filter(|width| *width == destination.width)?;
    }
    Some(Operation::Move {
        destination,
        source,
    })
}

fn load_address(instruction: &Instruction) -> Option<Operation> {
    let Operand::Register(destination) = operand(instruction, 0)? else {
        return None;
    };
    let Operand::Memory(address) = operand(instruction, 1)? else {
        return None;
    };
    Some(Operation::LoadAddress {
        destination,
        address,
    })
}

/// Two-operand ALU forms. A memory destination is admitted only where nothing is stored.
fn arithmetic(instruction: &Instruction, kind: ArithmeticKind) -> Option<Operation> {
    if instruction.op_count() != 2 {
        return None;
    }
    let destination = operand(instruction, 0)?;
    let source = operand(instruction, 1)?;
    let width = match (destination, source) {
        (Operand::Register(register), _) => register.width,
        (Operand::Memory(_), _) if !kind.writes_result() => memory_width(instruction)?,
        _ => return None,
    };
    Some(Operation::Arithmetic {
        kind,
        width,
        destination,
        source,
    })
}

fn operand(instruction: &Instruction, index: u32) -> Option<Operand> {
    match instruction.op_kind(index) {
        OpKind::Register => {
            RegisterOperand::from_iced(instruction.op_register(index)).map(Operand::Register)
        }
        OpKind::Immediate8
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate64
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64 => Some(Operand::Immediate(instruction.immediate(index))),
        OpKind::Memory => address(instruction).map(Operand::Memory),
        _ => None,
    }
}

/// 64-bit addressing only: a `67` prefix (32-bit registers, eip) would truncate the address.
fn address(instruction: &Instruction) -> Option<Address> {
    let register_number = |register: Register| match register {
        Register::None => Some(None),
        gpr if gpr.is_gpr64() => Some(Some(gpr.number() as u8)),
        _ => None,
    };
    let (base, displacement) = match instruction.memory_base() {
        // iced already resolved the target against the decode address.
        Register::RIP => (None, instruction.memory_displacement64()),
        other => (register_number(other)?, instruction.memory_displacement64()),
    };
    Some(Address {
        base,
        index: register_number(instruction.memory_index())?,
        scale: instruction.memory_index_scale() as u8,
        displacement,
    })
}

fn memory_width(instruction: &Instruction) -> Option<Width> {
    Width::from_bytes(instruction.memory_size().size())
}
