//! Where a new thread's stack is, read from the clone call that made it: the one reliable
//! way to tell a thread stack from other anonymous memory, whether or not the stack of the
//! `mmap` that allocated it could be walked (musl has no unwind tables).

use libc::user_regs_struct;

use crate::ptrace::memory::RemoteMemory;

/// Offset of `stack` in the kernel's `struct clone_args` (`stack_size` follows it).
const CLONE_ARGS_STACK: u64 = 40;

/// The top of the stack that a clone or clone3 call (`registers` of the thread stopped at its
/// clone event) gives the new thread; None when it gives none (the child shares the stack).
pub fn clone_stack_top(registers: &user_regs_struct, memory: &dyn RemoteMemory) -> Option<u64> {
    let top = match registers.orig_rax as i64 {
        // clone(flags, stack, ...)
        libc::SYS_clone => registers.rsi,
        // clone3(&args, size): the stack is [stack, stack + stack_size)
        libc::SYS_clone3 => {
            let base = memory.read_u64(registers.rdi + CLONE_ARGS_STACK).ok()?;
            let size = memory.read_u64(registers.rdi + CLONE_ARGS_STACK + 8).ok()?;
            if base == 0 {
                0
            } else {
                base + size
            }
        }
        _ => 0,
    };
    (top != 0).then_some(top)
}
