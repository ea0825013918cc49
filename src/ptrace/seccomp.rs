//! The seccomp filter that turns the mapping system calls, and mlockall, into ptrace stops in
//! run mode. Every other system call runs with no stop at all.

/// System calls reported to the tracer: mmap, munmap, mremap, brk, shmat, shmdt, and
/// mlockall, before which the hook engine takes its ring area out of the program.
pub const TRACED_SYSCALLS: [u32; 7] = [
    libc::SYS_mmap as u32,
    libc::SYS_munmap as u32,
    libc::SYS_mremap as u32,
    libc::SYS_brk as u32,
    libc::SYS_shmat as u32,
    libc::SYS_shmdt as u32,
    libc::SYS_mlockall as u32,
];

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_if_equal(k: u32, jump_true: u8, jump_false: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JEQ_K,
        jt: jump_true,
        jf: jump_false,
        k,
    }
}

/// The BPF program: other architectures and other calls are allowed, the mapping calls traced.
pub fn filter_program() -> Vec<libc::sock_filter> {
    let count = TRACED_SYSCALLS.len() as u8;
    let mut program = vec![
        statement(BPF_LD_W_ABS, OFFSET_ARCH),
        // Not x86-64: skip to the final ALLOW (1 load + count compares + 1 allow ahead).
        jump_if_equal(AUDIT_ARCH_X86_64, 0, count + 1),
        statement(BPF_LD_W_ABS, OFFSET_NR),
    ];
    for (index, nr) in TRACED_SYSCALLS.iter().enumerate() {
        let remaining = count - index as u8 - 1;
        // Equal: jump over the remaining compares and the ALLOW to the TRACE return.
        program.push(jump_if_equal(*nr, remaining + 1, 0));
    }
    program.push(statement(BPF_RET_K, SECCOMP_RET_ALLOW));
    program.push(statement(BPF_RET_K, SECCOMP_RET_TRACE));
    program
}

/// Installs `program` in the calling process. Called in the forked child before exec, so it
/// only makes raw system calls. Tries without no_new_privs first (root keeps setuid working).
///
/// # Safety
/// `program` must stay alive during the call; safe to call between fork and exec.
pub unsafe fn install(program: &[libc::sock_filter]) -> i32 {
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    let install = || {
        libc::syscall(
            libc::SYS_seccomp,
            1usize, // SECCOMP_SET_MODE_FILTER
            0usize,
            &fprog as *const libc::sock_fprog,
        )
    };
    if install() == 0 {
        return 0;
    }
    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    install() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_traced_call_jumps_to_the_trace_return() {
        let program = filter_program();
        let trace_index = program.len() - 1;
        assert_eq!(program[trace_index].k, SECCOMP_RET_TRACE);
        for (index, instruction) in program
            .iter()
            .enumerate()
            .skip(3)
            .take(TRACED_SYSCALLS.len())
        {
            assert_eq!(index + 1 + instruction.jt as usize, trace_index);
            assert_eq!(instruction.jf, 0);
        }
        // The architecture check skips to the ALLOW return.
        assert_eq!(2 + program[1].jf as usize, trace_index - 1);
        assert_eq!(program[trace_index - 1].k, SECCOMP_RET_ALLOW);
    }
}
