//! The code a remote system call runs from the scratch page: `syscall`, then a resume block
//! that puts back every register the call changed and jumps to where the thread was. memsup
//! takes the call's result at the syscall-exit stop and sets the registers itself, so the
//! block never runs while memsup lives; it runs only when memsup dies (SIGKILL, OOM) during
//! the call, and then the thread goes on as if it had never been borrowed. No int3 is
//! involved: an int3 executed with no tracer kills the program with SIGTRAP.

use libc::user_regs_struct;

/// `syscall`.
pub const SYSCALL: [u8; 2] = [0x0f, 0x05];
/// Bytes the stub takes in the scratch page: `syscall`, nine `movabs` and an absolute jump.
pub const STUB_BYTES: u64 = 128;

const ERESTARTSYS: i64 = 512;
const ERESTARTNOINTR: i64 = 513;
const ERESTARTNOHAND: i64 = 514;
const ERESTART_RESTARTBLOCK: i64 = 516;

/// Register numbers in the `movabs` encoding (r8-r15 take REX.B).
const RAX: u8 = 0;
const RCX: u8 = 1;
const RDX: u8 = 2;
const RSI: u8 = 6;
const RDI: u8 = 7;
const R8: u8 = 8;
const R9: u8 = 9;
const R10: u8 = 10;
const R11: u8 = 11;

/// Where and with which rax a thread goes on when it resumes from `original` without a
/// tracer. One stopped inside an interrupted system call (orig_rax >= 0, rax -ERESTART*)
/// restarts it, as the kernel would have on resume: back over its `syscall` (2 bytes), with
/// the call's number, or `restart_syscall` for a call that left a restart block.
pub fn resume_point(original: &user_regs_struct) -> (u64, u64) {
    let interrupted = (original.orig_rax as i64) >= 0;
    match -(original.rax as i64) {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND if interrupted => {
            (original.rip - 2, original.orig_rax)
        }
        ERESTART_RESTARTBLOCK if interrupted => {
            (original.rip - 2, libc::SYS_restart_syscall as u64)
        }
        _ => (original.rip, original.rax),
    }
}

/// The stub for a thread stopped with `original` registers: `syscall`, then the registers
/// a call sets or the instruction clobbers (rax, the six arguments, rcx, r11) back to
/// `original`, then `jmp [rip+0]` to the resume point. Flags are untouched by `movabs` and
/// restored from r11 by the kernel's return.
pub fn stub_code(original: &user_regs_struct) -> Vec<u8> {
    let (rip, rax) = resume_point(original);
    let mut code = SYSCALL.to_vec();
    let values = [
        (RAX, rax),
        (RDI, original.rdi),
        (RSI, original.rsi),
        (RDX, original.rdx),
        (R10, original.r10),
        (R8, original.r8),
        (R9, original.r9),
        (RCX, original.rcx),
        (R11, original.r11),
    ];
    for (register, value) in values {
        let rex = 0x48 | u8::from(register >= 8);
        code.extend_from_slice(&[rex, 0xb8 + (register & 7)]);
        code.extend_from_slice(&value.to_le_bytes());
    }
    code.extend_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    code.extend_from_slice(&rip.to_le_bytes());
    debug_assert!(code.len() as u64 <= STUB_BYTES);
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};

    fn registers() -> user_regs_struct {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut registers: user_regs_struct = unsafe { std::mem::zeroed() };
        registers.rip = 0x40_1002;
        registers.orig_rax = u64::MAX;
        registers.rax = 42;
        registers.rdi = 1;
        registers.rsi = 2;
        registers.rdx = 3;
        registers.r10 = 4;
        registers.r8 = 5;
        registers.r9 = 6;
        registers.rcx = 7;
        registers.r11 = 0x246;
        registers
    }

    /// (register, value) of each `movabs`, and the jump's target, decoded.
    fn decoded(code: &[u8], base: u64) -> (Vec<(Register, u64)>, u64) {
        let mut decoder = Decoder::with_ip(64, code, base, DecoderOptions::NONE);
        let first = decoder.decode();
        assert_eq!(first.mnemonic(), Mnemonic::Syscall);
        let mut moves = Vec::new();
        loop {
            let instruction = decoder.decode();
            if instruction.mnemonic() == Mnemonic::Jmp {
                assert_eq!(instruction.op0_kind(), OpKind::Memory);
                let slot = (instruction.memory_displacement64() - base) as usize;
                let target = u64::from_le_bytes(code[slot..slot + 8].try_into().unwrap());
                assert_eq!(slot + 8, code.len(), "the target ends the stub");
                return (moves, target);
            }
            assert_eq!(instruction.mnemonic(), Mnemonic::Mov, "{instruction:?}");
            moves.push((instruction.op0_register(), instruction.immediate64()));
        }
    }

    #[test]
    fn the_block_puts_back_every_register_a_call_touches_and_jumps_to_the_thread() {
        let code = stub_code(&registers());
        assert!(code.len() as u64 <= STUB_BYTES, "{} bytes", code.len());
        let (moves, target) = decoded(&code, 0x7000_0f80);
        assert_eq!(
            moves,
            [
                (Register::RAX, 42),
                (Register::RDI, 1),
                (Register::RSI, 2),
                (Register::RDX, 3),
                (Register::R10, 4),
                (Register::R8, 5),
                (Register::R9, 6),
                (Register::RCX, 7),
                (Register::R11, 0x246),
            ]
        );
        assert_eq!(target, 0x40_1002);
    }

    #[test]
    fn a_thread_stopped_in_an_interrupted_call_restarts_it() {
        let mut read = registers();
        read.orig_rax = 0;
        read.rax = (-ERESTARTSYS) as u64;
        assert_eq!(resume_point(&read), (0x40_1000, 0));
        read.rax = (-ERESTARTNOHAND) as u64;
        assert_eq!(resume_point(&read), (0x40_1000, 0));
        let mut sleep = registers();
        sleep.orig_rax = libc::SYS_clock_nanosleep as u64;
        sleep.rax = (-ERESTART_RESTARTBLOCK) as u64;
        assert_eq!(
            resume_point(&sleep),
            (0x40_1000, libc::SYS_restart_syscall as u64)
        );
        // A call that completed keeps its result; user code keeps its rax.
        let mut done = registers();
        done.orig_rax = 0;
        done.rax = 5;
        assert_eq!(resume_point(&done), (0x40_1002, 5));
        assert_eq!(resume_point(&registers()), (0x40_1002, 42));
    }
}
