//! Each emulated instruction against the CPU: same GPRs, same arithmetic flags, other flags
//! untouched, rip past the instruction, and for a push the same stack slot.

use iced_x86::{Code, Encoder, Instruction, Register};
use libc::user_regs_struct;

use super::hex;
use super::native::{CpuState, Machine, DATA_OFFSET, INSTRUCTION_OFFSET};
use crate::breakpoints::emulate::flags::{
    ARITHMETIC, AUXILIARY, CARRY, OVERFLOW, PARITY, SIGN, ZERO,
};
use crate::breakpoints::emulate::operands::{full_register, set_full_register};
use crate::breakpoints::emulate::Emulation;

/// Operand values around every carry, borrow, sign, overflow, zero and parity boundary.
const EDGE_VALUES: [u64; 22] = [
    0,
    1,
    2,
    0xf,
    0x10,
    0x58,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_ff58,
    u64::MAX,
    0x0123_4567_89ab_cdef,
];

/// Starting flag states: none, all, and two mixes, so preserved and cleared bits both show.
const FLAG_STATES: [u64; 4] = [
    0,
    ARITHMETIC,
    CARRY | AUXILIARY | PARITY,
    ZERO | SIGN | OVERFLOW,
];

/// IF and the always-one bit 1, as popfq accepts them in user mode.
const BASE_FLAGS: u64 = 0x202;

pub(super) const RSP: usize = 4;
const RBP: usize = 5;
const RDI: usize = 7;

/// Where operands vary: which registers get the edge values, and which registers must hold
/// a pointer (rsp to the stack, a base register to the data) instead.
#[derive(Clone, Copy)]
struct Operands {
    first: Option<usize>,
    second: Option<usize>,
    /// A register set to a pointer after the edge values.
    pointer: Option<(usize, Pointer)>,
    /// Whether memory operands vary even where registers do not: data qword 0 takes the
    /// first value, qword 1 the second.
    memory: bool,
}

#[derive(Clone, Copy)]
enum Pointer {
    Stack,
    Data,
}

const NO_OPERANDS: Operands = Operands {
    first: None,
    second: None,
    pointer: None,
    memory: false,
};

fn registers(first: usize, second: usize) -> Operands {
    Operands {
        first: Some(first),
        second: Some(second),
        ..NO_OPERANDS
    }
}

fn one(register: usize) -> Operands {
    Operands {
        first: Some(register),
        ..NO_OPERANDS
    }
}

/// Only memory varies, `base` (if any) pointing at the data.
fn memory(base: Option<usize>) -> Operands {
    Operands {
        pointer: base.map(|register| (register, Pointer::Data)),
        memory: true,
        ..NO_OPERANDS
    }
}

/// A register against data qword 1, `base` (if any) pointing at the data.
fn register_and_memory(register: usize, base: Option<usize>) -> Operands {
    Operands {
        first: Some(register),
        ..memory(base)
    }
}

/// Distinct filler so a wrong register shows up; rsp points at the test stack.
fn filler(machine: &Machine) -> [u64; 16] {
    let mut registers = [0u64; 16];
    for (index, value) in registers.iter_mut().enumerate() {
        *value = 0x1111_1111_1111_1111u64.wrapping_mul(index as u64 + 1) ^ 0x0f0f;
    }
    registers[RSP] = machine.stack_top();
    registers
}

/// Runs `code` natively and emulated from every combination of edge values and flag states.
fn check(code: &[u8], operands: Operands) {
    check_built(|_| code.to_vec(), operands);
}

/// As `check`, for code that depends on where the harness is mapped (absolute addresses).
fn check_built(build: impl FnOnce(&Machine) -> Vec<u8>, operands: Operands) {
    let mut machine = Machine::new();
    let code = &build(&machine)[..];
    machine.load(code);
    let emulation = Emulation::decode(code, machine.instruction_address())
        .unwrap_or_else(|| panic!("{code:02x?} is not emulated"));
    assert_eq!(emulation.length(), code.len(), "{code:02x?}");
    let varies = |register: Option<usize>| register.is_some() || operands.memory;
    let values: &[u64] = if varies(operands.first) {
        &EDGE_VALUES
    } else {
        &[0]
    };
    let seconds: &[u64] = if varies(operands.second) {
        &EDGE_VALUES
    } else {
        &[0]
    };
    for &first in values {
        for &second in seconds {
            let mut registers = filler(&machine);
            if let Some(index) = operands.first {
                registers[index] = first;
            }
            if let Some(index) = operands.second {
                registers[index] = second;
            }
            match operands.pointer {
                Some((index, Pointer::Stack)) => registers[index] = machine.stack_top(),
                Some((index, Pointer::Data)) => registers[index] = machine.data_address(0),
                None => {}
            }
            // Memory operands see the same edge values.
            machine.write_data(&[first, second, !first, !second]);
            for arithmetic_flags in FLAG_STATES {
                let input = CpuState {
                    registers,
                    flags: BASE_FLAGS | arithmetic_flags,
                };
                compare_one(&mut machine, &emulation, code, &input);
            }
        }
    }
}

fn compare_one(machine: &mut Machine, emulation: &Emulation, code: &[u8], input: &CpuState) {
    let memory = machine.snapshot();
    let native = machine.run(input);
    let mut regs = to_user_regs(input, machine.instruction_address() + 1);
    let pushed = emulation
        .apply(&mut regs, &memory)
        .unwrap_or_else(|error| panic!("{code:02x?} from {input:x?}: {error}"));
    let context = format!("{code:02x?} from {input:x?}");
    for (number, native_value) in native.registers.iter().enumerate() {
        let emulated = full_register(&regs, number as u8);
        assert_eq!(emulated, *native_value, "register {number} after {context}");
    }
    assert_eq!(
        regs.eflags & ARITHMETIC,
        native.flags & ARITHMETIC,
        "arithmetic flags after {context}"
    );
    assert_eq!(
        regs.eflags & !ARITHMETIC,
        input.flags & !ARITHMETIC,
        "other flags after {context}"
    );
    assert_eq!(
        regs.rip,
        machine.instruction_address() + code.len() as u64,
        "{context}"
    );
    if let Some(value) = pushed {
        assert_eq!(
            value,
            machine.read_u64(native.registers[RSP]),
            "pushed value after {context}"
        );
    }
}

fn to_user_regs(state: &CpuState, rip: u64) -> user_regs_struct {
    // SAFETY: user_regs_struct is plain integers; all zeros is a valid value.
    let mut regs: user_regs_struct = unsafe { std::mem::zeroed() };
    for (number, value) in state.registers.iter().enumerate() {
        set_full_register(&mut regs, number as u8, *value);
    }
    regs.eflags = state.flags;
    regs.rip = rip;
    regs
}

/// `prefix disp32 suffix`, the displacement chosen so the operand is data qword `index` when
/// the instruction sits at the harness' instruction address.
fn rip_relative(prefix: &str, suffix: &str, index: usize) -> Vec<u8> {
    let (prefix, suffix) = (hex(prefix), hex(suffix));
    let next = INSTRUCTION_OFFSET + (prefix.len() + 4 + suffix.len()) as u64;
    let displacement = (DATA_OFFSET + 8 * index as u64).wrapping_sub(next) as i32;
    [prefix, displacement.to_le_bytes().to_vec(), suffix].concat()
}

fn encode(instruction: Instruction) -> Vec<u8> {
    let mut encoder = Encoder::new(64);
    encoder.encode(&instruction, 0).expect("encodes");
    encoder.take_buffer()
}

use crate::breakpoints::test_pages::GENERAL_PURPOSE_REGISTERS as ALL_GPRS;

mod cases;
