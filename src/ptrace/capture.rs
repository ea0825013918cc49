//! Stack capture at a stop: the registers an unwind needs and one read of the stack above
//! rsp. The thread is resumed right after; the interpret stage unwinds the copy.

use std::ops::Range;
use std::time::Instant;

use crate::error::Result;
use crate::events::{RawStack, StackCopy};
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::tracee::Tracee;
use crate::ptrace::tracer::Tracer;
use crate::unwind::StackSnapshot;

/// First copy size of a thread's stack; doubled when a walk ran off the end of a copy.
pub const INITIAL_WINDOW: u32 = 32 << 10;
/// The largest copy ever made of one stack.
pub const MAX_WINDOW: u32 = 1 << 20;

/// What memsup records as the stack of an allocator or mapping call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackMode {
    /// The whole call stack, unwound from a copy of the stack.
    Full,
    /// Only the return address into the caller (no copy, no unwind).
    Caller,
}

/// Per-thread capture state.
#[derive(Debug)]
pub struct StackCopyState {
    /// The mapping the stack pointer was last found in.
    mapping: Option<Range<u64>>,
    /// How many bytes to copy.
    pub window: u32,
}

impl Default for StackCopyState {
    fn default() -> StackCopyState {
        StackCopyState {
            mapping: None,
            window: INITIAL_WINDOW,
        }
    }
}

/// The window after a walk ran off the end of a copy of `length` bytes: twice that, at most
/// `MAX_WINDOW`, never smaller than it was.
pub fn grown_window(window: u32, length: u32) -> u32 {
    window.max(length.saturating_mul(2).min(MAX_WINDOW))
}

/// Where a stopped thread's walk starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackRegisters {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// rsp points at a return address (a probed function's first instruction).
    pub at_function_entry: bool,
}

/// One read of a stopped thread's stack from `sp` to the end of `mapping` (the mapping that
/// holds `sp`), at most `window` bytes; None when nothing could be read.
pub(crate) fn read_stack_copy(
    tracee: &mut dyn Tracee,
    tid: i32,
    registers: StackRegisters,
    mapping: &Range<u64>,
    window: u32,
) -> Option<StackCopy> {
    let StackRegisters {
        ip,
        sp,
        bp,
        at_function_entry,
    } = registers;
    let length = (mapping.end.checked_sub(sp)?).min(u64::from(window)) as usize;
    let stack = tracee.read_partial(tid, sp, length)?;
    Some(StackCopy {
        snapshot: StackSnapshot {
            ip,
            at_function_entry,
            sp,
            bp,
            stack,
        },
        window_limited: (length as u64) < mapping.end - sp,
        substitute: None,
        substituted: Vec::new(),
    })
}

impl Tracer<'_> {
    /// At the entry of a probed function (rsp points at the return address): the return
    /// address, and the stack for the call's record. With full stacks the one copy of the
    /// stack also yields the return address, so the stop costs no extra read.
    pub(crate) fn capture_at_entry(
        &mut self,
        tid: i32,
        pid: i32,
        entry_ip: u64,
        entry_rsp: u64,
        bp: u64,
    ) -> Result<(u64, RawStack)> {
        if self.stack_mode == StackMode::Full {
            if let Some(capture) = self.copy_stack(tid, pid, entry_ip, entry_rsp, bp, true) {
                if let Some(original_return) = capture.snapshot.read_word(entry_rsp) {
                    return Ok((original_return, RawStack::Copy(capture)));
                }
            }
        }
        let original_return = self.process(pid)?.memory.read_u64(entry_rsp)?;
        let stack = match self.stack_mode {
            StackMode::Full => RawStack::Uncopied(original_return),
            StackMode::Caller => RawStack::Caller(original_return),
        };
        Ok((original_return, stack))
    }

    /// At a system call's entry stop: the walk starts at the instruction after `syscall`.
    pub(crate) fn capture_at_syscall(
        &mut self,
        tid: i32,
        pid: i32,
        regs: &libc::user_regs_struct,
    ) -> RawStack {
        if self.stack_mode == StackMode::Full {
            if let Some(capture) = self.copy_stack(tid, pid, regs.rip, regs.rsp, regs.rbp, false) {
                return RawStack::Copy(capture);
            }
            return RawStack::Uncopied(regs.rip);
        }
        RawStack::Caller(regs.rip)
    }

    /// One read of the stack from `sp` to the end of its mapping, at most the thread's window.
    fn copy_stack(
        &mut self,
        tid: i32,
        pid: i32,
        ip: u64,
        sp: u64,
        bp: u64,
        at_function_entry: bool,
    ) -> Option<Box<StackCopy>> {
        let trampoline = self
            .processes
            .get(&pid)
            .and_then(|p| p.scratch.as_ref())
            .map(|s| s.trampoline());
        let started = Instant::now();
        self.grow_windows();
        let thread = self.threads.get_mut(&tid)?;
        let copy = &mut thread.stack_copy;
        if !copy.mapping.as_ref().is_some_and(|m| m.contains(&sp)) {
            copy.mapping = self.tracee.mapping_containing(tid, sp);
        }
        let mapping = copy.mapping.clone()?;
        let registers = StackRegisters {
            ip,
            sp,
            bp,
            at_function_entry,
        };
        let mut capture =
            read_stack_copy(&mut *self.tracee, tid, registers, &mapping, copy.window)?;
        let hijacked = thread
            .shadow
            .entries()
            .iter()
            .rev()
            .filter(|entry| entry.slot >= sp)
            .map(|entry| entry.original_return)
            .collect();
        if let Some(process) = self.processes.get_mut(&pid) {
            process.counters.stack_copies += 1;
            process.counters.stack_copy_ns += started.elapsed().as_nanos() as u64;
        }
        capture.substitute = trampoline;
        capture.substituted = hijacked;
        Some(Box::new(capture))
    }

    /// Copies more of the stacks of threads whose copies the interpret stage found too short.
    fn grow_windows(&mut self) {
        let threads = &mut self.threads;
        self.sink.copy_windows().take(|tid, length| {
            if let Some(thread) = threads.get_mut(&(tid as i32)) {
                let copy = &mut thread.stack_copy;
                copy.window = grown_window(copy.window, length);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_doubles_the_short_copy_up_to_its_maximum() {
        assert_eq!(
            grown_window(INITIAL_WINDOW, INITIAL_WINDOW),
            2 * INITIAL_WINDOW
        );
        // A report about an older, shorter copy does not shrink a window grown since.
        assert_eq!(
            grown_window(4 * INITIAL_WINDOW, INITIAL_WINDOW),
            4 * INITIAL_WINDOW
        );
        assert_eq!(grown_window(INITIAL_WINDOW, MAX_WINDOW), MAX_WINDOW);
        assert_eq!(grown_window(INITIAL_WINDOW, 3 * MAX_WINDOW / 4), MAX_WINDOW);
    }
}
