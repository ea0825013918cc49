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

/// The return value of a filter the kernel would have refused, or of a division by zero:
/// the strictest there is, SECCOMP_RET_KILL_PROCESS.
pub const INVALID: u32 = 0x8000_0000;

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
/// the end) or where it divides by zero.
pub fn run(program: &[libc::sock_filter], data: &SeccompData) -> u32 {
    if program.is_empty() || program.len() > MAX_INSTRUCTIONS {
        return INVALID;
    }
    let (mut a, mut x) = (0u32, 0u32);
    let mut scratch = [0u32; SCRATCH_WORDS];
    let mut pc = 0usize;
    while let Some(instruction) = program.get(pc) {
        let k = instruction.k;
        pc += 1;
        let code = instruction.code;
        match code & 0x07 {
            // BPF_LD, BPF_LDX: only 32-bit loads from the data, its length, a constant or
            // the scratch words.
            class @ (0x00 | 0x01) => {
                let value = match code & !0x07 {
                    0x20 if class == 0x00 => data.word(k),
                    0x80 => Some(DATA_BYTES),
                    0x00 => Some(k),
                    0x60 => scratch.get(k as usize).copied(),
                    _ => None,
                };
                let Some(value) = value else {
                    return INVALID;
                };
                if class == 0x00 {
                    a = value;
                } else {
                    x = value;
                }
            }
            // BPF_ST, BPF_STX
            class @ (0x02 | 0x03) => {
                let Some(word) = scratch.get_mut(k as usize) else {
                    return INVALID;
                };
                *word = if class == 0x02 { a } else { x };
            }
            // BPF_ALU
            0x04 => {
                let operand = if code & 0x08 != 0 { x } else { k };
                a = match code & 0xf0 {
                    0x00 => a.wrapping_add(operand),
                    0x10 => a.wrapping_sub(operand),
                    0x20 => a.wrapping_mul(operand),
                    0x30 if operand == 0 => return INVALID,
                    0x30 => a / operand,
                    0x40 => a | operand,
                    0x50 => a & operand,
                    0x60 => a.checked_shl(operand).unwrap_or(0),
                    0x70 => a.checked_shr(operand).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 if operand == 0 => return INVALID,
                    0x90 => a % operand,
                    0xa0 => a ^ operand,
                    _ => return INVALID,
                };
            }
            // BPF_JMP: forward only, as the kernel checks.
            0x05 => {
                let operand = if code & 0x08 != 0 { x } else { k };
                let taken = match code & 0xf0 {
                    0x00 => {
                        pc += k as usize;
                        continue;
                    }
                    0x10 => a == operand,
                    0x20 => a > operand,
                    0x30 => a >= operand,
                    0x40 => a & operand != 0,
                    _ => return INVALID,
                };
                pc += usize::from(if taken {
                    instruction.jt
                } else {
                    instruction.jf
                });
            }
            // BPF_RET: a constant or A.
            0x06 => {
                return match code & 0x18 {
                    0x00 => k,
                    0x10 => a,
                    _ => INVALID,
                };
            }
            // BPF_MISC: TAX, TXA.
            _ => match code & 0xf8 {
                0x00 => x = a,
                0x80 => a = x,
                _ => return INVALID,
            },
        }
    }
    // Ran off the end: the kernel refuses a program whose last instruction is no return.
    INVALID
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
            statement(0x94, 7),           // A %= 7  -> 2
            statement(0x07, 0),           // X = A
            statement(0x00, 0x7ff0_0000), // A = TRACE
            statement(0x4c, 0),           // A |= X  -> TRACE | 2
            statement(0x16, 0),           // return A
        ];
        assert_eq!(run(&program, &call(9, [0; 6])), TRACE | 2);
    }

    #[test]
    fn what_the_kernel_would_refuse_is_the_strictest_answer() {
        let unaligned = [statement(0x20, 2), statement(0x06, ALLOW)];
        let outside = [statement(0x20, 64), statement(0x06, ALLOW)];
        let no_return = [statement(0x20, 0)];
        let past_the_end = [jump(0x15, 0, 5, 5), statement(0x06, ALLOW)];
        let divide_by_zero_x = [
            statement(0x01, 0),
            statement(0x3c, 0),
            statement(0x06, ALLOW),
        ];
        let packet_load = [statement(0x28, 0), statement(0x06, ALLOW)];
        for program in [
            &unaligned[..],
            &outside,
            &no_return,
            &past_the_end,
            &divide_by_zero_x,
            &packet_load,
            &[],
        ] {
            assert_eq!(run(program, &call(0, [0; 6])), INVALID, "{program:?}");
        }
    }
}
