//! The hot path: a probe's int3, the return trampoline, and seccomp-reported mapping calls.
//! Each hit costs one stop: registers, at most one stack read and one stack write, resume.

use libc::user_regs_struct;

use crate::breakpoints::probes::needs_return;
use crate::breakpoints::returns::PendingReturn;
use crate::breakpoints::table::{Breakpoint, ProbeKind, StepOver, INT3};
use crate::error::{Error, Result};
use crate::events::calls::{mapping_result, returned_call};
use crate::events::{EventKind, RawStack};
use crate::ptrace::detach::{trap_kind, Trap};
use crate::ptrace::memory::{RemoteMemory, RemoteMemoryMut};
use crate::ptrace::regs;
use crate::ptrace::state::PendingSyscall;
use crate::ptrace::stop::{Deadline, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{AllocFunction, MapCall};

fn arguments(regs: &user_regs_struct) -> [u64; 6] {
    // The C calling convention (rcx is the 4th argument of a function, r10 of a syscall).
    [regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9]
}

fn map_call_of_syscall(number: u64) -> Option<MapCall> {
    match number as i64 {
        libc::SYS_mmap => Some(MapCall::Mmap),
        libc::SYS_munmap => Some(MapCall::Munmap),
        libc::SYS_mremap => Some(MapCall::Mremap),
        libc::SYS_brk => Some(MapCall::Brk),
        libc::SYS_shmat => Some(MapCall::Shmat),
        libc::SYS_shmdt => Some(MapCall::Shmdt),
        _ => None,
    }
}

impl Tracer<'_> {
    pub(crate) fn on_trap(&mut self, tid: i32) -> Result<()> {
        let regs = self.tracee.registers(tid)?;
        let pid = self.thread(tid)?.pid;
        let process = self.process(pid)?;
        let address = regs.rip.wrapping_sub(1);
        if process
            .scratch
            .as_ref()
            .is_some_and(|s| s.trampoline() == address)
        {
            return self.on_return(tid, pid, regs);
        }
        match process.breakpoints.get(address) {
            Some(breakpoint) => {
                let breakpoint = breakpoint.clone();
                self.on_entry(tid, pid, regs, &breakpoint)
            }
            // A step memsup gave up waiting for ends late: its trap is not the program's.
            None if self.late_steps.contains(&tid)
                && trap_kind(tid, &process.memory, address) == Trap::Step =>
            {
                self.late_steps.remove(&tid);
                self.tracee.resume(tid, 0)
            }
            // Not ours: the program's own SIGTRAP.
            None => self.tracee.resume(tid, libc::SIGTRAP),
        }
    }

    fn on_entry(
        &mut self,
        tid: i32,
        pid: i32,
        mut regs: user_regs_struct,
        breakpoint: &Breakpoint,
    ) -> Result<()> {
        let entry_rsp = regs.rsp;
        let (thread, process) = self.thread_and_process_mut(tid)?;
        let trampoline = process.scratch.as_ref().map(|s| s.trampoline());
        let memory = &process.memory;
        let abandoned = thread
            .shadow
            .drop_abandoned(entry_rsp, || memory.read_u64(entry_rsp).ok() == trampoline);
        let nested = match breakpoint.kind {
            ProbeKind::Alloc(_) => thread.shadow.inside_allocator(entry_rsp),
            // Only a thread's outermost MPI call is recorded.
            ProbeKind::Mpi(_) => thread.shadow.inside_mpi_call(entry_rsp),
            _ => false,
        };
        // Bookkeeping probes (rendezvous, IFUNC resolvers) only count as stops.
        let is_probe = breakpoint.kind.is_program_probe();
        if is_probe {
            process.counters.entry_hits += 1;
        }
        if nested && is_probe {
            process.counters.nested_calls += 1;
        }
        self.report_abandoned(pid, tid, &abandoned);
        let mut hijack = None;
        match breakpoint.kind {
            ProbeKind::Alloc(AllocFunction::Free) if !nested => {
                self.flush_hooks_before_int3(pid);
                let free = EventKind::Free { address: regs.rdi };
                self.sink.send(pid as u32, tid as u32, free)
            }
            ProbeKind::Alloc(function) if !nested && needs_return(function) => {
                hijack = Some(breakpoint.kind)
            }
            ProbeKind::Map(_) | ProbeKind::IfuncResolver(_) => hijack = Some(breakpoint.kind),
            ProbeKind::Mpi(_) if !nested => hijack = Some(breakpoint.kind),
            _ => {}
        }
        let mut hijack_slot = None;
        if let (Some(kind), Some(trampoline)) = (hijack, trampoline) {
            // IFUNC resolvers are bookkeeping: no record, so no stack.
            let (original_return, stack) = match kind {
                ProbeKind::Alloc(_) | ProbeKind::Map(_) => {
                    let (original_return, stack) =
                        self.capture_at_entry(tid, pid, breakpoint.address, entry_rsp, regs.rbp)?;
                    (original_return, Some(stack))
                }
                _ => (self.process(pid)?.memory.read_u64(entry_rsp)?, None),
            };
            // A tail call from another probed function already returns to the trampoline.
            if original_return != trampoline {
                self.thread_mut(tid)?.shadow.push(PendingReturn {
                    slot: entry_rsp,
                    original_return,
                    kind,
                    args: arguments(&regs),
                    stack,
                });
                hijack_slot = Some(trampoline);
                if let ProbeKind::Mpi(function) = kind {
                    self.mpi_call(pid, tid, function, true);
                }
            }
        }
        regs.rip = breakpoint.address;
        if breakpoint.kind == ProbeKind::Rendezvous {
            // While the thread is stopped: the hook engine runs system calls in it.
            self.scan_modules(pid, Some(tid))?;
        }
        self.step_over(tid, pid, regs, breakpoint, entry_rsp, hijack_slot, is_probe)
    }

    /// Continues past the probed instruction, writing the hijacked return address (and a
    /// pushed value) in one stack write.
    #[allow(clippy::too_many_arguments)]
    fn step_over(
        &mut self,
        tid: i32,
        pid: i32,
        mut regs: user_regs_struct,
        breakpoint: &Breakpoint,
        entry_rsp: u64,
        trampoline: Option<u64>,
        is_probe: bool,
    ) -> Result<()> {
        let process = self.process_mut(pid)?;
        let counted = u64::from(is_probe);
        match &breakpoint.step_over {
            StepOver::Emulate(emulation) => {
                process.counters.emulated += counted;
                let pushed = emulation.apply(&mut regs, &process.memory)?;
                match (pushed, trampoline) {
                    (Some(value), Some(trampoline)) if regs.rsp == entry_rsp - 8 => {
                        let mut bytes = [0u8; 16];
                        bytes[..8].copy_from_slice(&value.to_le_bytes());
                        bytes[8..].copy_from_slice(&trampoline.to_le_bytes());
                        process.memory.write_data(regs.rsp, &bytes)?;
                    }
                    (pushed, trampoline) => {
                        if let Some(trampoline) = trampoline {
                            process
                                .memory
                                .write_data(entry_rsp, &trampoline.to_le_bytes())?;
                        }
                        if let Some(value) = pushed {
                            process.memory.write_data(regs.rsp, &value.to_le_bytes())?;
                        }
                    }
                }
            }
            StepOver::Return => {
                process.counters.emulated += counted;
                regs.rip = process.memory.read_u64(regs.rsp)?;
                regs.rsp += 8;
            }
            StepOver::OutOfLine { slot } => {
                process.counters.out_of_line += counted;
                regs.rip = *slot;
                if let Some(trampoline) = trampoline {
                    process
                        .memory
                        .write_data(entry_rsp, &trampoline.to_le_bytes())?;
                }
            }
            StepOver::StopTheWorld => {
                if let Some(trampoline) = trampoline {
                    process
                        .memory
                        .write_data(entry_rsp, &trampoline.to_le_bytes())?;
                }
                self.tracee.set_registers(tid, &regs)?;
                self.step_stopping_the_world(tid, pid, breakpoint)?;
                return self.resume(tid);
            }
        }
        self.tracee.set_registers(tid, &regs)?;
        self.resume(tid)
    }

    fn on_return(&mut self, tid: i32, pid: i32, mut regs: user_regs_struct) -> Result<()> {
        let thread = self.thread_mut(tid)?;
        let Some((entry, abandoned)) = thread.shadow.pop_returning(regs.rsp) else {
            return Err(Error::Internal(format!(
                "thread {tid} returned to memsup's trampoline with no pending call (rsp {:#x})",
                regs.rsp
            )));
        };
        self.report_abandoned(pid, tid, &abandoned);
        regs.rip = entry.original_return;
        if let ProbeKind::IfuncResolver(function) = entry.kind {
            self.probe_ifunc_target(pid, tid, function, regs.rax);
        } else if let ProbeKind::Mpi(function) = entry.kind {
            self.mpi_call(pid, tid, function, false);
            self.mpi_returned(pid, function, entry.args, regs.rax);
        } else {
            self.flush_hooks_before_int3(pid);
            let process = self.process_mut(pid)?;
            process.counters.return_hits += 1;
            let event = return_event(entry, regs.rax, &process.memory)?;
            self.send(pid, tid, event);
        }
        self.tracee.set_registers(tid, &regs)?;
        self.resume(tid)
    }

    /// Allocator calls that will never return still count as calls.
    pub(crate) fn report_abandoned(&mut self, pid: i32, tid: i32, abandoned: &[PendingReturn]) {
        for entry in abandoned {
            match entry.kind {
                ProbeKind::Alloc(function) => {
                    self.send(pid, tid, EventKind::AbandonedCall { function })
                }
                ProbeKind::Mpi(function) => self.mpi_call(pid, tid, function, false),
                _ => {}
            }
        }
    }

    pub(crate) fn on_seccomp(&mut self, tid: i32) -> Result<()> {
        let regs = self.tracee.registers(tid)?;
        let pid = self.thread(tid)?.pid;
        if regs.orig_rax == libc::SYS_mlockall as u64 && self.before_memory_lock(pid, tid, &regs)? {
            // Sent back to make the call again, which stops here once more.
            return self.resume(tid);
        }
        if let Some(call) = map_call_of_syscall(regs.orig_rax) {
            let stack = self.capture_at_syscall(tid, pid, &regs);
            self.thread_mut(tid)?.pending_syscall = Some(PendingSyscall {
                call,
                args: [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9],
                stack,
            });
            if let Some(process) = self.processes.get_mut(&pid) {
                process.counters.syscall_stops += 1;
            }
        }
        self.tracee.resume_to_syscall(tid, 0)
    }

    pub(crate) fn on_syscall_exit(&mut self, tid: i32) -> Result<()> {
        let thread = self.thread_mut(tid)?;
        let pid = thread.pid;
        if let Some(pending) = thread.pending_syscall.take() {
            let result = self.tracee.registers(tid)?.rax as i64;
            let event = EventKind::Mapping {
                call: pending.call,
                args: pending.args,
                result,
                stack: pending.stack,
            };
            self.send(pid, tid, event);
            if let Some(process) = self.processes.get_mut(&pid) {
                process.counters.syscall_stops += 1;
            }
        }
        self.resume(tid)
    }

    /// Last resort: stop every other thread of the process, lift the int3, single-step the
    /// original instruction, put the int3 back, let everyone go.
    fn step_stopping_the_world(
        &mut self,
        tid: i32,
        pid: i32,
        breakpoint: &Breakpoint,
    ) -> Result<()> {
        let mut others = self.threads.of(pid);
        others.retain(|&other| other != tid);
        let deadline = Deadline::after(STOP_TIMEOUT);
        let stopped = self.stop_threads(&others, &deadline);
        let process = self.process_mut(pid)?;
        process.counters.stop_the_world += 1;
        process.counters.single_steps += 1;
        process
            .memory
            .write_code(breakpoint.address, &[breakpoint.original_byte])?;
        let step = regs::single_step(tid).and_then(|_| self.wait_for_step(tid, &deadline));
        self.process_mut(pid)?
            .memory
            .write_code(breakpoint.address, &[INT3])?;
        for other in stopped {
            let _ = self.resume(other);
        }
        step
    }
}

/// The event of a probed call that just returned `result`, with the stack taken at its entry.
pub(crate) fn return_event(
    entry: PendingReturn,
    result: u64,
    memory: &dyn RemoteMemory,
) -> Result<EventKind> {
    let args = entry.args;
    let stack = entry.stack.unwrap_or(RawStack::Frames(Vec::new()));
    let no_record = || Error::Internal("no return record for this probe".into());
    match entry.kind {
        ProbeKind::Alloc(function) => {
            let mut failed = None;
            let stored = || match memory.read_u64(args[0]) {
                Ok(value) => Some(value),
                Err(error) => {
                    failed = Some(error);
                    None
                }
            };
            let event = returned_call(function, &args, result, stored, stack);
            match (event, failed) {
                (_, Some(error)) => Err(error),
                (Some(event), None) => Ok(event),
                (None, None) => Err(no_record()),
            }
        }
        ProbeKind::Map(call) => Ok(EventKind::Mapping {
            call,
            args,
            result: mapping_result(call, &args, result),
            stack,
        }),
        ProbeKind::Rendezvous | ProbeKind::IfuncResolver(_) | ProbeKind::Mpi(_) => Err(no_record()),
    }
}
