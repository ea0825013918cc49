//! Runs one instruction on the real CPU with every GPR and RFLAGS chosen by the test, so the
//! emulation can be compared with the hardware bit for bit.
//!
//! An RWX mapping holds a harness: the prologue saves the host's callee-saved registers and
//! rsp, loads RFLAGS with popfq (while rsp is still the host stack) and then all 16 GPRs
//! including rsp; the instruction under test follows; the epilogue stores all 16 GPRs,
//! restores the host rsp, captures RFLAGS with pushfq and returns. Everything is addressed
//! rip-relative, so no register has to survive as a pointer to the state.

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Instruction, InstructionBlock, MemoryOperand, Register,
};

use crate::breakpoints::test_pages::{ExecutablePages, GENERAL_PURPOSE_REGISTERS};
use crate::ptrace::memory::SliceMemory;

/// Where the instruction under test starts.
pub(super) const INSTRUCTION_OFFSET: u64 = 0x400;
/// 16 GPRs in encoding order, then RFLAGS.
const INPUT_OFFSET: u64 = 0x800;
const OUTPUT_OFFSET: u64 = 0x900;
const SAVED_RSP_OFFSET: u64 = 0xa00;
/// Memory operands of tests point here.
pub(super) const DATA_OFFSET: u64 = 0x1000;
/// Initial rsp of tests that push or address the stack; the stack grows down to 0x1100.
const STACK_TOP_OFFSET: u64 = 0x1800;
const MAPPING_BYTES: usize = 0x2000;

const CALLEE_SAVED: [Register; 6] = [
    Register::RBX,
    Register::RBP,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

/// The 16 GPRs (rax … r15, encoding order) and RFLAGS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuState {
    pub registers: [u64; 16],
    pub flags: u64,
}

/// An RWX mapping with the harness around one instruction.
pub struct Machine {
    pages: ExecutablePages,
}

impl Machine {
    pub fn new() -> Machine {
        let machine = Machine {
            pages: ExecutablePages::new(MAPPING_BYTES),
        };
        machine.write(0, &machine.prologue());
        machine
    }

    pub fn base(&self) -> u64 {
        self.pages.base() as u64
    }

    pub fn instruction_address(&self) -> u64 {
        self.base() + INSTRUCTION_OFFSET
    }

    /// Address of data qword `index`.
    pub fn data_address(&self, index: usize) -> u64 {
        self.base() + DATA_OFFSET + 8 * index as u64
    }

    pub fn stack_top(&self) -> u64 {
        self.base() + STACK_TOP_OFFSET
    }

    /// Places `code` (one instruction) under test, followed by the epilogue.
    pub fn load(&mut self, code: &[u8]) {
        self.write(INSTRUCTION_OFFSET, code);
        let epilogue_offset = INSTRUCTION_OFFSET + code.len() as u64;
        self.write(epilogue_offset, &self.epilogue(epilogue_offset));
    }

    pub fn write_data(&mut self, values: &[u64]) {
        for (index, value) in values.iter().enumerate() {
            self.write(DATA_OFFSET + 8 * index as u64, &value.to_le_bytes());
        }
    }

    /// A copy of the mapping, as the emulator's memory.
    pub fn snapshot(&self) -> SliceMemory {
        let bytes = self.pages.bytes();
        SliceMemory {
            base: self.base(),
            bytes: bytes.to_vec(),
        }
    }

    pub fn read_u64(&self, address: u64) -> u64 {
        let offset = address - self.base();
        assert!(offset as usize + 8 <= MAPPING_BYTES);
        // SAFETY: in bounds, checked above.
        unsafe {
            self.pages
                .base()
                .add(offset as usize)
                .cast::<u64>()
                .read_unaligned()
        }
    }

    /// Runs the loaded instruction from `input` and returns the state after it.
    pub fn run(&mut self, input: &CpuState) -> CpuState {
        for (index, value) in input.registers.iter().enumerate() {
            self.write(INPUT_OFFSET + 8 * index as u64, &value.to_le_bytes());
        }
        self.write(INPUT_OFFSET + 8 * 16, &input.flags.to_le_bytes());
        // SAFETY: the harness follows the C ABI: it preserves the callee-saved registers and
        // rsp, leaves DF clear (tests never set it) and returns with ret.
        unsafe {
            let entry: extern "C" fn() = std::mem::transmute(self.pages.base());
            entry();
        }
        let mut output = CpuState {
            registers: [0; 16],
            flags: self.read_u64(self.base() + OUTPUT_OFFSET + 8 * 16),
        };
        for (index, value) in output.registers.iter_mut().enumerate() {
            *value = self.read_u64(self.base() + OUTPUT_OFFSET + 8 * index as u64);
        }
        output
    }

    fn write(&self, offset: u64, bytes: &[u8]) {
        assert!(offset as usize + bytes.len() <= MAPPING_BYTES);
        // SAFETY: in bounds, checked above; the mapping is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.pages.base().add(offset as usize),
                bytes.len(),
            )
        };
    }

    fn slot(&self, offset: u64) -> MemoryOperand {
        MemoryOperand::with_base_displ(Register::RIP, (self.base() + offset) as i64)
    }

    fn prologue(&self) -> Vec<u8> {
        let mut code = Vec::new();
        for register in CALLEE_SAVED {
            code.push(Instruction::with1(Code::Push_r64, register));
        }
        code.push(Instruction::with2(
            Code::Mov_rm64_r64,
            self.slot(SAVED_RSP_OFFSET),
            Register::RSP,
        ));
        code.push(Instruction::with1(
            Code::Push_rm64,
            self.slot(INPUT_OFFSET + 8 * 16),
        ));
        code.push(Ok(Instruction::with(Code::Popfq)));
        // rsp last: from then on the host stack is out of reach.
        for (index, register) in GENERAL_PURPOSE_REGISTERS
            .iter()
            .enumerate()
            .filter(|(_, r)| **r != Register::RSP)
        {
            code.push(Instruction::with2(
                Code::Mov_r64_rm64,
                *register,
                self.slot(INPUT_OFFSET + 8 * index as u64),
            ));
        }
        code.push(Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RSP,
            self.slot(INPUT_OFFSET + 8 * 4),
        ));
        code.push(Instruction::with_branch(
            Code::Jmp_rel32_64,
            self.instruction_address(),
        ));
        self.encode(code, 0)
    }

    fn epilogue(&self, offset: u64) -> Vec<u8> {
        let mut code = Vec::new();
        for (index, register) in GENERAL_PURPOSE_REGISTERS.iter().enumerate() {
            code.push(Instruction::with2(
                Code::Mov_rm64_r64,
                self.slot(OUTPUT_OFFSET + 8 * index as u64),
                *register,
            ));
        }
        code.push(Instruction::with2(
            Code::Mov_r64_rm64,
            Register::RSP,
            self.slot(SAVED_RSP_OFFSET),
        ));
        code.push(Ok(Instruction::with(Code::Pushfq)));
        code.push(Instruction::with1(
            Code::Pop_rm64,
            self.slot(OUTPUT_OFFSET + 8 * 16),
        ));
        for register in CALLEE_SAVED.iter().rev() {
            code.push(Instruction::with1(Code::Pop_r64, *register));
        }
        code.push(Ok(Instruction::with(Code::Retnq)));
        self.encode(code, offset)
    }

    fn encode(
        &self,
        instructions: Vec<Result<Instruction, iced_x86::IcedError>>,
        offset: u64,
    ) -> Vec<u8> {
        let instructions: Vec<Instruction> = instructions
            .into_iter()
            .collect::<Result<_, _>>()
            .expect("harness instruction");
        let block = InstructionBlock::new(&instructions, self.base() + offset);
        BlockEncoder::encode(64, block, BlockEncoderOptions::NONE)
            .expect("harness encodes")
            .code_buffer
    }
}
