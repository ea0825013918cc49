//! Leaving attached processes exactly as they were: every thread stopped, threads inside the
//! scratch page moved back to the original code, hijacked return addresses written back,
//! original bytes restored (only where our int3 still is), then PTRACE_DETACH.

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::ptrace::hits::return_event;
use crate::ptrace::inject::{choose_live_injector, remote_syscall, RemoteSyscall, PAGE_SIZE};
use crate::ptrace::leave_hooks::is_job_control_stop;
use crate::ptrace::memory::RemoteMemory;
use crate::ptrace::regs;
use crate::ptrace::state::Process;
use crate::ptrace::stop::{
    wait_for_thread_until, Deadline, Event, Stop, WaitFailure, STOP_TIMEOUT,
};
use crate::ptrace::tracer::Tracer;
use crate::trace::format::ExitKind;

impl Tracer<'_> {
    /// Interrupts `tids` and waits until each is stopped, until `deadline` at the latest.
    /// Stops that are not our interrupt are kept for the event loop. Returns the threads
    /// stopped by the interrupt; those that did not stop in time go to `unresponsive`.
    pub(crate) fn stop_threads(&mut self, tids: &[i32], deadline: &Deadline) -> Vec<i32> {
        let mut stopped = Vec::new();
        // Threads whose stop is already collected and not yet handled are stopped: an
        // interrupt would produce no new stop to wait for.
        let already_stopped: Vec<i32> = self.deferred.iter().map(|stop| stop.tid()).collect();
        for &tid in tids {
            let pid = self.threads.process_of(tid).unwrap_or(tid);
            // A zombie thread (a main thread ended by pthread_exit) never stops again.
            if already_stopped.contains(&tid)
                || self.early_threads.contains(&tid)
                || self.joining.contains(&tid)
                || thread_is_zombie(pid, tid)
            {
                continue;
            }
            match stopped_or_interrupted(tid, deadline) {
                Ok(status) => match Stop::from_wait_status(status) {
                    Some(Stop::Event {
                        event: Event::Stop,
                        signal,
                        ..
                    }) if signal == libc::SIGTRAP => stopped.push(tid),
                    Some(stop) => self.deferred.push_back(stop),
                    None => {}
                },
                Err(WaitFailure::TimedOut) => self.unresponsive.push(tid),
                Err(_) => {}
            }
        }
        stopped
    }

    /// Waits, until `deadline`, for the trap of the single step `tid` was just given; a
    /// signal that comes first is held for the thread and the step asked again. A thread that
    /// ends fails (its end kept for the event loop); so does one that does not stop in time,
    /// and its trap, when it comes, is dropped (`late_steps`).
    pub(crate) fn wait_for_step(&mut self, tid: i32, deadline: &Deadline) -> Result<()> {
        loop {
            let status = match wait_for_thread_until(tid, deadline) {
                Ok(status) => status,
                Err(failure) => {
                    if matches!(failure, WaitFailure::TimedOut) {
                        self.late_steps.insert(tid);
                    }
                    return Err(failure.into_error(tid, deadline, "single-stepping"));
                }
            };
            match Stop::from_wait_status(status) {
                Some(Stop::Signal { signal, .. }) if signal == libc::SIGTRAP => return Ok(()),
                // Held and sent again once the thread runs free (a stop signal too: the
                // thread is not to stop in the middle of a step).
                Some(Stop::Signal { signal, .. }) => {
                    if let Some(thread) = self.threads.get_mut(&tid) {
                        thread.pending_signals.push(signal);
                    }
                    regs::single_step(tid)?;
                }
                Some(stop @ (Stop::Exited { .. } | Stop::Killed { .. })) => {
                    self.deferred.push_back(stop);
                    return Err(Error::ProcessGone(tid));
                }
                Some(_) => regs::single_step(tid)?,
                None => {}
            }
        }
    }

    /// Detaches from every process, leaving each running unmodified. Every wait is bounded:
    /// a thread that does not stop in time is left running (the kernel releases it when
    /// memsup exits) and reported as the error, after everything else is detached.
    pub fn detach_all(&mut self) -> Result<()> {
        let deadline = Deadline::after(STOP_TIMEOUT);
        self.unresponsive.clear();
        self.inside_event.clear();
        // A stop whose handling failed half-way (a panic): the thread is stopped, settle it.
        if let Some(stop) = self.in_hand.take() {
            self.deferred.push_front(stop);
        }
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        let _ = self.stop_threads(&tids, &deadline);
        let mut first_error = None;
        // Stops that raced with the interrupt: finish returns, rewind probe hits.
        while let Some(stop) = self.deferred.pop_front() {
            keep_first_error(&mut first_error, self.settle_for_detach(stop, &deadline));
        }
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            let consumed = self.consume_pending_trap(tid, &deadline);
            keep_first_error(&mut first_error, consumed);
        }
        // A process forked while the threads ran out of the hook code is detached too.
        while let Some(pid) = self.processes.keys().copied().min() {
            self.detach_process(pid);
        }
        self.joining.clear();
        if let Some(&tid) = self.unresponsive.first() {
            return Err(WaitFailure::TimedOut.into_error(tid, &deadline, "detaching"));
        }
        first_error.map_or(Ok(()), Err)
    }

    /// A thread can report our interrupt right after executing one of our int3s, with that
    /// SIGTRAP still pending: once detached, it would kill the program. Let the thread take
    /// it now, under our control.
    fn consume_pending_trap(&mut self, tid: i32, deadline: &Deadline) -> Result<()> {
        let Some(pid) = self.threads.process_of(tid) else {
            return Ok(());
        };
        if !trap_pending(pid, tid) {
            return Ok(());
        }
        regs::resume(tid, 0)?;
        loop {
            let status = match wait_for_thread_until(tid, deadline) {
                Ok(status) => status,
                Err(WaitFailure::TimedOut) => {
                    self.unresponsive.push(tid);
                    return Ok(());
                }
                Err(_) => return Ok(()),
            };
            let Some(stop) = Stop::from_wait_status(status) else {
                continue;
            };
            let is_trap = matches!(stop, Stop::Signal { signal, .. } if signal == libc::SIGTRAP);
            self.settle_for_detach(stop, deadline)?;
            if is_trap || !self.threads.contains_key(&tid) || !matches!(stop, Stop::Signal { .. }) {
                return Ok(());
            }
            // Another signal came first; it is kept for the detach. Go on to the trap.
            regs::resume(tid, 0)?;
        }
    }

    /// Brings a thread that reported something other than our interrupt to a clean stop.
    pub(super) fn settle_for_detach(&mut self, stop: Stop, deadline: &Deadline) -> Result<()> {
        let tid = stop.tid();
        if is_job_control_stop(&stop) {
            // Not to be run before the detach hands it back to its group-stop.
            if let Some(thread) = self.threads.get_mut(&tid) {
                thread.job_stopped = true;
            }
        }
        if matches!(stop, Stop::Syscall { .. })
            || matches!(stop, Stop::Event { event, .. } if event != Event::Stop)
        {
            self.inside_event.insert(tid);
        }
        match stop {
            Stop::Exited { code, .. } => self.on_thread_gone(tid, ExitKind::Code(code)),
            Stop::Killed { signal, .. } => self.on_thread_gone(tid, ExitKind::Signal(signal)),
            Stop::Signal { signal, .. } if signal == libc::SIGTRAP => self.settle_trap(tid),
            Stop::Signal { signal, .. } => {
                if let Some(thread) = self.threads.get_mut(&tid) {
                    thread.pending_signals.push(signal);
                }
                Ok(())
            }
            // A child born as we stopped everyone carries our int3s: it is detached with them.
            Stop::Event {
                event: event @ (Event::Clone | Event::Fork | Event::Vfork),
                ..
            } => {
                let child = self.register_child(tid, event)?;
                self.stop_new_child(child, deadline)
            }
            // The image that had our probes is gone with the exec.
            Stop::Event {
                event: Event::Exec, ..
            } => {
                self.threads.keep_only_leader(tid);
                let memory = self.tracee.open_memory(tid);
                if let Some(process) = self.processes.get_mut(&tid) {
                    process.reset_for_exec(memory);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Waits for the first stop of a child announced during detach.
    fn stop_new_child(&mut self, child: i32, deadline: &Deadline) -> Result<()> {
        if self.early_threads.remove(&child) {
            return Ok(());
        }
        loop {
            let status = match wait_for_thread_until(child, deadline) {
                Ok(status) => status,
                Err(WaitFailure::TimedOut) => {
                    self.unresponsive.push(child);
                    return Ok(());
                }
                Err(_) => return Ok(()),
            };
            match Stop::from_wait_status(status) {
                Some(Stop::Event {
                    event: Event::Stop, ..
                }) => return Ok(()),
                Some(stop @ (Stop::Exited { .. } | Stop::Killed { .. })) => {
                    return self.settle_for_detach(stop, deadline);
                }
                Some(Stop::Signal { signal, .. }) => {
                    if let Some(thread) = self.threads.get_mut(&child) {
                        thread.pending_signals.push(signal);
                    }
                    regs::resume(child, 0)?;
                }
                Some(_) => regs::resume(child, 0)?,
                None => {}
            }
        }
    }

    /// A thread stopped at one of our int3s: a return completes; an entry is rewound so the
    /// restored original instruction runs when it resumes.
    fn settle_trap(&mut self, tid: i32) -> Result<()> {
        let Some(pid) = self.threads.process_of(tid) else {
            return Ok(());
        };
        let mut regs = regs::get_registers(tid)?;
        let address = regs.rip.wrapping_sub(1);
        let process = self.process(pid)?;
        if process
            .scratch
            .as_ref()
            .is_some_and(|s| s.trampoline() == address)
        {
            if let Some((entry, _)) = self.thread_mut(tid)?.shadow.pop_returning(regs.rsp) {
                // The call returned just as everyone was stopped: it still counts.
                let memory = &self.process(pid)?.memory;
                let original_return = entry.original_return;
                if let Ok(event) = return_event(entry, regs.rax, memory) {
                    self.send(pid, tid, event);
                }
                regs.rip = original_return;
                regs::set_registers(tid, &regs)?;
            }
        } else if process.breakpoints.get(address).is_some() {
            regs.rip = address;
            regs::set_registers(tid, &regs)?;
        } else {
            match trap_kind(tid, &process.memory, address) {
                Trap::Int3Gone => {
                    regs.rip = address;
                    regs::set_registers(tid, &regs)?;
                }
                Trap::Step => {}
                Trap::Program => {
                    if let Some(thread) = self.threads.get_mut(&tid) {
                        thread.pending_signals.push(libc::SIGTRAP);
                    }
                }
            }
        }
        Ok(())
    }

    /// The threads among `tids` of `process` a detach may run a remote call in: none held
    /// in the middle of an event (its system call completes on resume) and none at its exit
    /// (it never runs the program's code again).
    pub(crate) fn remote_call_threads(&self, process: &Process, tids: &[i32]) -> Vec<i32> {
        tids.iter()
            .copied()
            .filter(|tid| {
                !self.inside_event.contains(tid) && !process.exiting_threads.contains(tid)
            })
            .collect()
    }

    /// Removes the scratch page, run from any stopped thread whose rip is outside it: one
    /// interrupted inside a system call gets its restart state back (see `remote_syscall`).
    fn unmap_scratch(&mut self, process: &mut Process, tids: &[i32]) {
        let Some(scratch) = process.scratch.take() else {
            return;
        };
        let candidates = self.remote_call_threads(process, tids);
        let Some(tid) = choose_live_injector(&candidates, Some(&scratch)) else {
            return;
        };
        let munmap = RemoteSyscall {
            number: libc::SYS_munmap as u64,
            args: [scratch.base, PAGE_SIZE, 0, 0, 0, 0],
        };
        if !stub_is_mapped(process.pid, scratch.syscall_stub()) {
            return;
        }
        // From the page's own stub: the result is taken at the syscall-exit stop, before
        // the thread could run on in the page.
        let stub = Some(scratch.syscall_stub());
        match remote_syscall(&mut process.memory, tid, stub, &munmap) {
            Ok((_, signals)) => {
                if let Some(thread) = self.threads.get_mut(&tid) {
                    thread.pending_signals.extend(signals);
                }
            }
            Err(error @ Error::SeccompForbids { .. }) => self.warn(
                process.pid,
                format!("{error}: memsup's scratch page stays mapped"),
            ),
            Err(_) => {}
        }
    }

    fn detach_process(&mut self, pid: i32) {
        let tids = self.threads.of(pid);
        let Some(mut process) = self.processes.take(pid) else {
            return;
        };
        if let Some(&live) = tids.iter().find(|&&tid| !thread_is_zombie(pid, tid)) {
            process.memory.use_thread(live);
        }
        let trampoline = process.scratch.as_ref().map(|s| s.trampoline());
        for &tid in &tids {
            let thread = &self.threads[&tid];
            // Newest first: a slot reused by a later call holds the later original.
            for entry in thread.shadow.entries().iter().rev() {
                if process.memory.read_u64(entry.slot).ok() == trampoline {
                    let _ = process
                        .memory
                        .write_data(entry.slot, &entry.original_return.to_le_bytes());
                }
            }
            if let (Ok(mut regs), Some(scratch)) =
                (regs::get_registers(tid), process.scratch.as_ref())
            {
                if let Some(original) = scratch.original_address_for(regs.rip) {
                    regs.rip = original;
                    let _ = regs::set_registers(tid, &regs);
                }
            }
        }
        self.processes.put_back(process);
        self.finish_image(pid);
        let Ok(process) = self.process_mut(pid) else {
            return;
        };
        let shares_parent_memory = process.shares_parent_memory;
        if shares_parent_memory {
            // The parent's detach restores the one memory they share.
            process.breakpoints.clear();
        } else {
            // Before the hooks go: their threads may run out of the hook code, past no int3.
            process.counters.foreign_patches +=
                process.breakpoints.restore_all(&mut process.memory);
            self.remove_hooks(pid);
        }
        // Threads may have started or ended while running out of the hook code.
        let tids = self.threads.of(pid);
        let Some(mut process) = self.processes.end(pid) else {
            return;
        };
        if !process.shares_parent_memory {
            self.unmap_scratch(&mut process, &tids);
        }
        for &tid in &tids {
            // Held-back signals are sent again once the thread runs free: a signal given to
            // PTRACE_DETACH reaches the thread only from a signal-delivery stop, and most
            // threads here sit in an interrupt stop.
            let signals = self
                .threads
                .end(tid)
                .map(|t| t.pending_signals)
                .unwrap_or_default();
            let _ = regs::detach(tid, 0);
            for signal in signals {
                // SAFETY: tgkill has no memory effects.
                unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) };
            }
        }
        self.send(
            pid,
            pid,
            EventKind::ProcessExit {
                status: ExitKind::Detached,
                counters: process.counters,
            },
        );
    }
}

fn keep_first_error(first: &mut Option<Error>, outcome: Result<()>) {
    if let Err(error) = outcome {
        first.get_or_insert(error);
    }
}

/// Where a SIGTRAP that no breakpoint of memsup's explains came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trap {
    /// An int3 the kernel reported (SI_KERNEL) where no int3 is now: one of memsup's, taken
    /// out (put back, or replaced by a hook) after the thread hit it. Rewound, the thread
    /// runs what is there now.
    Int3Gone,
    /// A single step's trap: memsup's, to be dropped.
    Step,
    /// The program's own: an int3 of its code, or a signal sent to it.
    Program,
}

/// Which trap thread `tid` is stopped with, `address` being the byte before its rip.
pub(crate) fn trap_kind(tid: i32, memory: &dyn RemoteMemory, address: u64) -> Trap {
    const SI_KERNEL: i32 = 0x80;
    const TRAP_BRKPT: i32 = 1;
    const TRAP_TRACE: i32 = 2;
    let Ok(info) = nix::sys::ptrace::getsiginfo(nix::unistd::Pid::from_raw(tid)) else {
        return Trap::Program;
    };
    let mut byte = [0u8; 1];
    let int3_there = memory.read(address, &mut byte).is_ok() && byte[0] == 0xcc;
    match info.si_code {
        SI_KERNEL | TRAP_BRKPT if !int3_there => Trap::Int3Gone,
        TRAP_TRACE => Trap::Step,
        _ => Trap::Program,
    }
}

/// Whether SIGTRAP is pending for thread `tid` (its private set, where int3 traps go).
fn trap_pending(pid: i32, tid: i32) -> bool {
    let path = format!("/proc/{pid}/task/{tid}/status");
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines()
        .find_map(|line| line.strip_prefix("SigPnd:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGTRAP - 1)) != 0)
}

/// Whether thread `tid` has exited and waits to be reaped with its process.
pub(crate) fn thread_is_zombie(pid: i32, tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may contain anything.
    stat.rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next())
        == Some("Z")
}

/// Whether the scratch page's stub is still mapped executable in process `pid`: a detach
/// runs a remote call from it only then (an exec during the detach's turns, reported under a
/// main thread that had ended, would go unseen and leave no page there).
pub(crate) fn stub_is_mapped(pid: i32, stub: u64) -> bool {
    read_maps(pid)
        .is_ok_and(|maps| mapping_containing(&maps, stub).is_some_and(|mapping| mapping.executable))
}

/// Thread `tid`'s next stop: one it already reported (an interrupt left pending when an
/// earlier interrupt met another stop first, and taken as soon as the thread resumed), else
/// the one an interrupt brings, by `deadline`. An interrupt sent to a thread already stopped
/// would stay pending and stop it again the moment it resumes, turn after turn.
fn stopped_or_interrupted(tid: i32, deadline: &Deadline) -> Result<WaitStatus, WaitFailure> {
    let flags = WaitPidFlag::__WALL | WaitPidFlag::WNOHANG;
    match waitpid(Pid::from_raw(tid), Some(flags)) {
        Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
        Ok(status) => return Ok(status),
        Err(errno) => return Err(WaitFailure::Failed(errno)),
    }
    regs::interrupt(tid).map_err(|_| WaitFailure::Failed(Errno::ESRCH))?;
    wait_for_thread_until(tid, deadline)
}
