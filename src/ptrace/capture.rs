//! Stack capture at a stop: the registers an unwind needs and one read of the stack above
//! rsp. The thread is resumed right after; the collector unwinds the copy.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::sink::{Capture, StackSource};
use crate::ptrace::tracer::Tracer;
use crate::unwind::StackSnapshot;

/// First copy size of a thread's stack; the collector doubles it when a walk ran off the end.
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
    /// How many bytes to copy; shared with the collector, which grows it.
    pub window: Arc<AtomicU32>,
}

impl Default for StackCopyState {
    fn default() -> StackCopyState {
        StackCopyState {
            mapping: None,
            window: Arc::new(AtomicU32::new(INITIAL_WINDOW)),
        }
    }
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
    ) -> Result<(u64, StackSource)> {
        if self.stack_mode == StackMode::Full {
            if let Some(capture) = self.copy_stack(tid, pid, entry_ip, entry_rsp, bp, true) {
                if let Some(original_return) = capture.snapshot.read_word(entry_rsp) {
                    return Ok((original_return, StackSource::Snapshot(capture)));
                }
            }
        }
        let original_return = self.process(pid)?.memory.read_u64(entry_rsp)?;
        let stack = match self.stack_mode {
            StackMode::Full => StackSource::Uncopied(original_return),
            StackMode::Caller => StackSource::Caller(original_return),
        };
        Ok((original_return, stack))
    }

    /// At a system call's entry stop: the walk starts at the instruction after `syscall`.
    pub(crate) fn capture_at_syscall(
        &mut self,
        tid: i32,
        pid: i32,
        regs: &libc::user_regs_struct,
    ) -> StackSource {
        if self.stack_mode == StackMode::Full {
            if let Some(capture) = self.copy_stack(tid, pid, regs.rip, regs.rsp, regs.rbp, false) {
                return StackSource::Snapshot(capture);
            }
            return StackSource::Uncopied(regs.rip);
        }
        StackSource::Caller(regs.rip)
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
    ) -> Option<Box<Capture>> {
        let trampoline = self
            .processes
            .get(&pid)
            .and_then(|p| p.scratch.as_ref())
            .map(|s| s.trampoline());
        let started = Instant::now();
        let thread = self.threads.get_mut(&tid)?;
        let copy = &mut thread.stack_copy;
        if !copy.mapping.as_ref().is_some_and(|m| m.contains(&sp)) {
            copy.mapping = self.tracee.mapping_containing(tid, sp);
        }
        let mapping = copy.mapping.clone()?;
        let window = Arc::clone(&copy.window);
        let limit = u64::from(window.load(Ordering::Relaxed));
        let length = (mapping.end - sp).min(limit) as usize;
        let stack = self.tracee.read_partial(tid, sp, length)?;
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
        Some(Box::new(Capture {
            snapshot: StackSnapshot {
                ip,
                at_function_entry,
                sp,
                bp,
                stack,
            },
            window_limited: (length as u64) < mapping.end - sp,
            trampoline,
            hijacked,
            window,
        }))
    }
}
