//! Runs a seccomp filter (classic BPF, as the kernel accepts it for seccomp) on one system
//! call, as the kernel would: what memsup needs to know before it runs a call in a tracee
//! under a filter the program installed (`seccomp_judge`).

/// The kernel's `struct seccomp_data` for one call on x86-64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeccompData {
    pub number: u32,
    pub arch: u32,
    /// The address after the `syscall` instruction.
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

/// `sizeof(struct seccomp_data)`.
const DATA_BYTES: u32 = 64;
/// The kernel's bound on a filter's length (BPF_MAXINSNS).
const MAX_INSTRUCTIONS: usize = 4096;
const SCRATCH_WORDS: usize = 16;

/// The return value of a filter the kernel would have refused at load: the strictest there
/// is, SECCOMP_RET_KILL_PROCESS.
pub const INVALID: u32 = 0x8000_0000;
/// What a classic-BPF division by a zero X returns (the kernel's conversion of the filter
/// makes it end the program so): SECCOMP_RET_KILL_THREAD.
const DIVIDED_BY_ZERO: u32 = 0;

/// An instruction's class (`code & 0x07`) and, within it, the fields seccomp uses.
const CLASS: u16 = 0x07;
const LOAD: u16 = 0x00;
const LOAD_X: u16 = 0x01;
const STORE: u16 = 0x02;
const STORE_X: u16 = 0x03;
const ALU: u16 = 0x04;
const JUMP: u16 = 0x05;
const RETURN: u16 = 0x06;
/// Loads: where the 32-bit word comes from (the size and mode bits, `code & 0xf8`).
const FROM_CONSTANT: u16 = 0x00;
const FROM_DATA: u16 = 0x20;
const FROM_SCRATCH: u16 = 0x60;
const DATA_LENGTH: u16 = 0x80;
/// ALU and jumps: the operand is X, not the constant k.
const OPERAND_X: u16 = 0x08;
/// ALU operations and jump tests (`code & 0xf0`).
const OPERATION: u16 = 0xf0;
const ADD: u16 = 0x00;
const SUBTRACT: u16 = 0x10;
const MULTIPLY: u16 = 0x20;
const DIVIDE: u16 = 0x30;
const OR: u16 = 0x40;
const AND: u16 = 0x50;
const SHIFT_LEFT: u16 = 0x60;
const SHIFT_RIGHT: u16 = 0x70;
const NEGATE: u16 = 0x80;
const XOR: u16 = 0xa0;
const ALWAYS: u16 = 0x00;
const IF_EQUAL: u16 = 0x10;
const IF_GREATER: u16 = 0x20;
const IF_GREATER_OR_EQUAL: u16 = 0x30;
const IF_ANY_BIT: u16 = 0x40;
/// Returns: the constant k, or A (`code & 0x18`).
const RETURN_SOURCE: u16 = 0x18;
const RETURN_K: u16 = 0x00;
const RETURN_A: u16 = 0x10;
/// The other class: copies between A and X (`code & 0xf8`).
const COPY_A_TO_X: u16 = 0x00;
const COPY_X_TO_A: u16 = 0x80;

impl SeccompData {
    /// The 32-bit word at byte `offset`, as `BPF_LD|BPF_W|BPF_ABS` reads it (the host's
    /// byte order: little-endian here).
    fn word(&self, offset: u32) -> Option<u32> {
        if offset % 4 != 0 || offset >= DATA_BYTES {
            return None;
        }
        let value = match offset {
            0 => self.number,
            4 => self.arch,
            8 => self.instruction_pointer as u32,
            12 => (self.instruction_pointer >> 32) as u32,
            _ => {
                let index = ((offset - 16) / 8) as usize;
                let argument = self.args[index];
                match (offset - 16) % 8 {
                    0 => argument as u32,
                    _ => (argument >> 32) as u32,
                }
            }
        };
        Some(value)
    }
}

/// What `program` returns for `data`; `INVALID` where the kernel would have refused the
/// program (an instruction seccomp does not allow, a load outside the data, a jump past
/// the end, a constant divisor of 0 or shift of 32 or more).
pub fn run(program: &[libc::sock_filter], data: &SeccompData) -> u32 {
    if program.is_empty() || program.len() > MAX_INSTRUCTIONS {
        return INVALID;
    }
    let (mut a, mut x) = (0u32, 0u32);
    let mut scratch = [0u32; SCRATCH_WORDS];
    let mut pc = 0usize;
    while let Some(instruction) = program.get(pc) {
        let (code, k) = (instruction.code, instruction.k);
        pc += 1;
        match code & CLASS {
            class @ (LOAD | LOAD_X) => {
                let value = match code & !CLASS {
                    FROM_DATA if class == LOAD => data.word(k),
                    DATA_LENGTH => Some(DATA_BYTES),
                    FROM_CONSTANT => Some(k),
                    FROM_SCRATCH => scratch.get(k as usize).copied(),
                    _ => None,
                };
                let Some(value) = value else {
                    return INVALID;
                };
                match class {
                    LOAD => a = value,
                    _ => x = value,
                }
            }
            class @ (STORE | STORE_X) => {
                let Some(word) = scratch.get_mut(k as usize) else {
                    return INVALID;
                };
                *word = if class == STORE { a } else { x };
            }
            ALU => match alu(code, a, x, k) {
                Ok(value) => a = value,
                Err(end) => return end,
            },
            // Forward only, as the kernel checks.
            JUMP => {
                let operand = if code & OPERAND_X != 0 { x } else { k };
                let taken = match code & OPERATION {
                    ALWAYS => {
                        pc += k as usize;
                        continue;
                    }
                    IF_EQUAL => a == operand,
                    IF_GREATER => a > operand,
                    IF_GREATER_OR_EQUAL => a >= operand,
                    IF_ANY_BIT => a & operand != 0,
                    _ => return INVALID,
                };
                pc += usize::from(if taken {
                    instruction.jt
                } else {
                    instruction.jf
                });
            }
            RETURN => {
                return match code & RETURN_SOURCE {
                    RETURN_K => k,
                    RETURN_A => a,
                    _ => INVALID,
                };
            }
            _ => match code & !CLASS {
                COPY_A_TO_X => x = a,
                COPY_X_TO_A => a = x,
                _ => return INVALID,
            },
        }
    }
    // Ran off the end: the kernel refuses a program whose last instruction is no return.
    INVALID
}

/// A after ALU instruction `code`, or the filter's end: `INVALID` for what the kernel
/// refuses at load (modulo, a constant divisor of 0, a constant shift of 32 or more), the
/// kill a division by a zero X ends in. A shift by X takes X's low 5 bits, as the kernel's
/// BPF does.
fn alu(code: u16, a: u32, x: u32, k: u32) -> Result<u32, u32> {
    let by_x = code & OPERAND_X != 0;
    let operand = if by_x { x } else { k };
    let operation = code & OPERATION;
    let refused_at_load = !by_x
        && match operation {
            DIVIDE => k == 0,
            SHIFT_LEFT | SHIFT_RIGHT => k >= 32,
            _ => false,
        };
    if refused_at_load {
        return Err(INVALID);
    }
    Ok(match operation {
        ADD => a.wrapping_add(operand),
        SUBTRACT => a.wrapping_sub(operand),
        MULTIPLY => a.wrapping_mul(operand),
        DIVIDE if operand == 0 => return Err(DIVIDED_BY_ZERO),
        DIVIDE => a / operand,
        OR => a | operand,
        AND => a & operand,
        SHIFT_LEFT => a.wrapping_shl(operand),
        SHIFT_RIGHT => a.wrapping_shr(operand),
        NEGATE => a.wrapping_neg(),
        XOR => a ^ operand,
        // Modulo among them: seccomp does not accept it.
        _ => return Err(INVALID),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptrace::seccomp::filter_program;

    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const ALLOW: u32 = 0x7fff_0000;
    const TRACE: u32 = 0x7ff0_0000;

    fn call(number: i64, args: [u64; 6]) -> SeccompData {
        SeccompData {
            number: number as u32,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0x7f12_3456_7002,
            args,
        }
    }

    fn statement(code: u16, k: u32) -> libc::sock_filter {
        libc::sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
        libc::sock_filter { code, jt, jf, k }
    }

    #[test]
    fn memsups_own_filter_traces_the_mapping_calls_and_allows_the_rest() {
        let program = filter_program();
        assert_eq!(run(&program, &call(libc::SYS_mmap, [0; 6])), TRACE);
        assert_eq!(run(&program, &call(libc::SYS_shmdt, [0; 6])), TRACE);
        assert_eq!(run(&program, &call(libc::SYS_memfd_create, [0; 6])), ALLOW);
        let mut other_arch = call(libc::SYS_mmap, [0; 6]);
        other_arch.arch = 0x4000_0003;
        assert_eq!(run(&program, &other_arch), ALLOW);
    }

    /// mmap with PROT_EXEC in its third argument gets EPERM; otherwise the high half of its
    /// first argument, taken through a scratch word, X and TXA, must be 0x100.
    #[test]
    fn arguments_halves_scratch_words_and_bit_tests_read_as_the_kernel_reads_them() {
        let errno_eperm = 0x0005_0001;
        let program = [
            statement(0x20, 0),                       // 0: A = nr
            jump(0x15, libc::SYS_mmap as u32, 0, 10), // 1: mmap? else 12
            statement(0x20, 16 + 2 * 8),              // 2: A = low half of args[2]
            jump(0x45, libc::PROT_EXEC as u32, 0, 1), // 3: A & PROT_EXEC? else 5
            statement(0x06, errno_eperm),             // 4
            statement(0x20, 16 + 4),                  // 5: A = high half of args[0]
            statement(0x02, 3),                       // 6: M[3] = A
            statement(0x00, 0),                       // 7: A = 0
            statement(0x61, 3),                       // 8: X = M[3]
            statement(0x87, 0),                       // 9: A = X
            jump(0x15, 0x100, 0, 1),                  // 10: A == 0x100? else 12
            statement(0x06, ALLOW),                   // 11
            statement(0x06, 0),                       // 12: KILL_THREAD
        ];
        let executable = call(libc::SYS_mmap, [0, 4096, 5, 0x22, u64::MAX, 0]);
        assert_eq!(run(&program, &executable), errno_eperm);
        let high = call(libc::SYS_mmap, [1 << 40, 4096, 1, 0x22, u64::MAX, 0]);
        assert_eq!(run(&program, &high), ALLOW);
        let low = call(libc::SYS_mmap, [1 << 8, 4096, 1, 0x22, u64::MAX, 0]);
        assert_eq!(run(&program, &low), 0);
        assert_eq!(run(&program, &call(libc::SYS_getpid, [0; 6])), 0);
        assert_eq!(
            SeccompData::word(&call(0, [0; 6]), 12),
            Some(0x7f12),
            "the instruction pointer's high half"
        );
    }

    #[test]
    fn arithmetic_and_returning_a_computes_the_kernels_answer() {
        let program = [
            statement(0x20, 0),           // A = nr (9)
            statement(0x04, 3),           // A += 3  -> 12
            statement(0x24, 10),          // A *= 10 -> 120
            statement(0x74, 2),           // A >>= 2 -> 30
            statement(0x54, 7),           // A &= 7 -> 6
            statement(0x07, 0),           // X = A
            statement(0x00, 0x7ff0_0000), // A = TRACE
            statement(0x4c, 0),           // A |= X -> TRACE | 6
            statement(0x16, 0),           // return A
        ];
        assert_eq!(run(&program, &call(9, [0; 6])), TRACE | 6);
        // A shift by X takes X's low 5 bits: 33 shifts by 1.
        let shift_by_x = [
            statement(0x01, 33),          // X = 33
            statement(0x00, 0x3fff_8000), // A = ALLOW >> 1
            statement(0x6c, 0),           // A <<= X
            statement(0x16, 0),           // return A
        ];
        assert_eq!(run(&shift_by_x, &call(9, [0; 6])), ALLOW);
        // Dividing by a zero X ends the program: SECCOMP_RET_KILL_THREAD.
        let divide_by_zero_x = [
            statement(0x01, 0),
            statement(0x3c, 0),
            statement(0x06, ALLOW),
        ];
        assert_eq!(run(&divide_by_zero_x, &call(9, [0; 6])), 0);
    }

    #[test]
    fn what_the_kernel_would_refuse_is_the_strictest_answer() {
        let unaligned = [statement(0x20, 2), statement(0x06, ALLOW)];
        let outside = [statement(0x20, 64), statement(0x06, ALLOW)];
        let no_return = [statement(0x20, 0)];
        let past_the_end = [jump(0x15, 0, 5, 5), statement(0x06, ALLOW)];
        let divide_by_zero = [statement(0x34, 0), statement(0x06, ALLOW)];
        let shift_by_32 = [statement(0x64, 32), statement(0x06, ALLOW)];
        let modulo = [statement(0x94, 7), statement(0x06, ALLOW)];
        let packet_load = [statement(0x28, 0), statement(0x06, ALLOW)];
        for program in [
            &unaligned[..],
            &outside,
            &no_return,
            &past_the_end,
            &divide_by_zero,
            &shift_by_32,
            &modulo,
            &packet_load,
            &[],
        ] {
            assert_eq!(run(program, &call(0, [0; 6])), INVALID, "{program:?}");
        }
    }
}
