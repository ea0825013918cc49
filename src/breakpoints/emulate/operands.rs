//! Operands of emulated instructions and their access to the tracee's registers and memory.

use iced_x86::Register;
use libc::user_regs_struct;

use crate::error::Result;
use crate::ptrace::memory::RemoteMemory;

/// Operand size of an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Width {
    Byte,
    Word,
    Dword,
    Qword,
}

impl Width {
    pub(super) fn from_bytes(bytes: usize) -> Option<Width> {
        match bytes {
            1 => Some(Width::Byte),
            2 => Some(Width::Word),
            4 => Some(Width::Dword),
            8 => Some(Width::Qword),
            _ => None,
        }
    }

    pub(super) fn bytes(self) -> usize {
        match self {
            Width::Byte => 1,
            Width::Word => 2,
            Width::Dword => 4,
            Width::Qword => 8,
        }
    }

    /// The bits of a 64-bit value that belong to an operand of this width.
    pub(super) fn mask(self) -> u64 {
        match self {
            Width::Qword => u64::MAX,
            other => (1u64 << (other.bytes() * 8)) - 1,
        }
    }

    pub(super) fn sign_bit(self) -> u64 {
        1u64 << (self.bytes() * 8 - 1)
    }
}

/// A general-purpose register as an instruction names it: one of the 16 (in encoding order,
/// rax = 0 … r15 = 15), its width, and for ah/ch/dh/bh that it is bits 8–15.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RegisterOperand {
    pub(super) number: u8,
    pub(super) width: Width,
    pub(super) high_byte: bool,
}

impl RegisterOperand {
    /// None for anything but a GPR (segment, control, vector registers, rip).
    pub(super) fn from_iced(register: Register) -> Option<RegisterOperand> {
        if !register.is_gpr() {
            return None;
        }
        let high_byte = matches!(
            register,
            Register::AH | Register::CH | Register::DH | Register::BH
        );
        Some(RegisterOperand {
            number: register.full_register().number() as u8,
            width: Width::from_bytes(register.size())?,
            high_byte,
        })
    }

    fn shift(&self) -> u32 {
        if self.high_byte {
            8
        } else {
            0
        }
    }

    pub(super) fn read(&self, regs: &user_regs_struct) -> u64 {
        (full_register(regs, self.number) >> self.shift()) & self.width.mask()
    }

    /// Writes as the CPU does: 32-bit writes clear the upper half, 8- and 16-bit writes keep
    /// the other bits.
    pub(super) fn write(&self, regs: &mut user_regs_struct, value: u64) {
        let old = full_register(regs, self.number);
        let new = match self.width {
            Width::Qword => value,
            Width::Dword => value & Width::Dword.mask(),
            narrow => {
                let field = narrow.mask() << self.shift();
                (old & !field) | ((value << self.shift()) & field)
            }
        };
        set_full_register(regs, self.number, new);
    }
}

/// A memory operand's address: base + index * scale + displacement, all in 64 bits. A
/// rip-relative operand has neither base nor index and its absolute target as displacement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Address {
    pub(super) base: Option<u8>,
    pub(super) index: Option<u8>,
    pub(super) scale: u8,
    pub(super) displacement: u64,
}

impl Address {
    pub(super) fn effective(&self, regs: &user_regs_struct) -> u64 {
        let base = self.base.map_or(0, |number| full_register(regs, number));
        let index = self.index.map_or(0, |number| full_register(regs, number));
        base.wrapping_add(index.wrapping_mul(u64::from(self.scale)))
            .wrapping_add(self.displacement)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operand {
    Register(RegisterOperand),
    /// Already sign-extended to 64 bits where the encoding says so.
    Immediate(u64),
    Memory(Address),
}

impl Operand {
    /// The operand's value in the low `width` bits (upper bits zero).
    pub(super) fn read(
        &self,
        width: Width,
        regs: &user_regs_struct,
        memory: &dyn RemoteMemory,
    ) -> Result<u64> {
        let value = match self {
            Operand::Register(register) => register.read(regs),
            Operand::Immediate(value) => *value,
            Operand::Memory(address) => {
                let mut bytes = [0u8; 8];
                memory.read(address.effective(regs), &mut bytes[..width.bytes()])?;
                u64::from_le_bytes(bytes)
            }
        };
        Ok(value & width.mask())
    }
}

/// Register `number` in encoding order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8 … r15).
pub(super) fn full_register(regs: &user_regs_struct, number: u8) -> u64 {
    match number {
        0 => regs.rax,
        1 => regs.rcx,
        2 => regs.rdx,
        3 => regs.rbx,
        4 => regs.rsp,
        5 => regs.rbp,
        6 => regs.rsi,
        7 => regs.rdi,
        8 => regs.r8,
        9 => regs.r9,
        10 => regs.r10,
        11 => regs.r11,
        12 => regs.r12,
        13 => regs.r13,
        14 => regs.r14,
        15 => regs.r15,
        _ => unreachable!("GPR number {number} out of range"),
    }
}

pub(super) fn set_full_register(regs: &mut user_regs_struct, number: u8, value: u64) {
    let slot = match number {
        0 => &mut regs.rax,
        1 => &mut regs.rcx,
        2 => &mut regs.rdx,
        3 => &mut regs.rbx,
        4 => &mut regs.rsp,
        5 => &mut regs.rbp,
        6 => &mut regs.rsi,
        7 => &mut regs.rdi,
        8 => &mut regs.r8,
        9 => &mut regs.r9,
        10 => &mut regs.r10,
        11 => &mut regs.r11,
        12 => &mut regs.r12,
        13 => &mut regs.r13,
        14 => &mut regs.r14,
        15 => &mut regs.r15,
        _ => unreachable!("GPR number {number} out of range"),
    };
    *slot = value;
}
