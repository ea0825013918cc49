//! A program that locks all its memory (`mlockall` with `MCL_CURRENT`) would lock the hook
//! engine's ring area with it: hundreds of MiB the hooks reserve and never touch, every page
//! made resident. Under a small `RLIMIT_MEMLOCK` the call would fail instead, since the
//! kernel weighs the whole address space against it. So in run mode, where memsup's seccomp
//! filter stops the thread at the call, the process's hooks are taken out before it runs:
//! its entries get int3 probes, what its hooks recorded is sent first, and the code pages
//! and the area are unmapped once no thread can be inside them. Then the call starts again,
//! as the program made it.

use std::time::{Duration, Instant};

use libc::user_regs_struct;

use crate::error::{Error, Result};
use crate::ptrace::hooks::{probe_with_int3_instead, switch_hooks_off};
use crate::ptrace::regs;
use crate::ptrace::stop::{Deadline, Stop, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;

/// `mlockall`'s flag that locks what is mapped now.
const MCL_CURRENT: u64 = 1;

/// Why an image's entries stop at int3 from the lock on.
pub(crate) const LOCKED_REASON: &str =
    "the program locked all its memory (mlockall), and memsup took its hooks out first";

/// How long the other threads may run, in all, to leave the hook code.
const LEAVE_TIME: Duration = Duration::from_millis(500);
/// Their first turn (an allocator call returns in microseconds), doubled up to the longest.
const FIRST_TURN: Duration = Duration::from_millis(1);
const LONGEST_TURN: Duration = Duration::from_millis(50);

impl Tracer<'_> {
    /// Thread `tid` of `pid` is stopped at the entry of `mlockall` (`registers`): with
    /// `MCL_CURRENT` in a hooked image, the hooks go first. Returns whether the call was
    /// made to start again (the thread then stops at it once more, with no hooks left).
    pub(crate) fn before_memory_lock(
        &mut self,
        pid: i32,
        tid: i32,
        registers: &user_regs_struct,
    ) -> Result<bool> {
        let process = self.process(pid)?;
        // A vfork child's hooks and area are its parent's, which runs on after it.
        let hooked = process.hooks.is_some() && !process.shares_parent_memory;
        if registers.rdi & MCL_CURRENT == 0 || !hooked {
            return Ok(false);
        }
        let others: Vec<i32> = self
            .threads
            .of(pid)
            .into_iter()
            .filter(|&other| other != tid)
            .collect();
        let mut stopped = self.stop_threads(&others, &Deadline::after(STOP_TIMEOUT));
        let outcome = self.take_hooks_out(pid, tid, registers, &mut stopped);
        for other in stopped {
            let _ = self.resume(other);
        }
        outcome
    }

    fn take_hooks_out(
        &mut self,
        pid: i32,
        tid: i32,
        registers: &user_regs_struct,
        stopped: &mut Vec<i32>,
    ) -> Result<bool> {
        let process = self
            .processes
            .get_mut(&pid)
            .ok_or(Error::ProcessGone(pid))?;
        let hooks = process.hooks.take().expect("checked by the caller");
        process.hooks_taken_out = Some(LOCKED_REASON.to_string());
        let area_mib = hooks.area_bytes >> 20;
        // Off first: a thread inside a hook passes its next calls through.
        switch_hooks_off(self.drain.as_ref(), process.memory.as_mut(), hooks.area);
        probe_with_int3_instead(process, hooks.clone(), LOCKED_REASON);
        self.send_mpi_calls_home(pid, &hooks.mpi_return_sites);
        let left = self.threads_leave_hook_code(pid, tid, stopped, &hooks.pages);
        // What the hooks recorded goes before the int3 probes' first event.
        self.flush_hooks(pid);
        if left {
            let unmapped = self.with_injector(pid, tid, |injector| {
                for &(base, length) in &hooks.pages {
                    injector.unmap(base, length)?;
                }
                injector.unmap(hooks.area, hooks.area_bytes)
            });
            match unmapped {
                Ok(()) => {
                    self.warn(
                        pid,
                        format!("it locks all its memory (mlockall): memsup took its hooks out first, so that their ring area ({area_mib} MiB reserved, most of it never touched) is neither locked with it nor weighed against its RLIMIT_MEMLOCK; its allocator calls stop it at int3 breakpoints from then on, a stop each"),
                    );
                }
                Err(Error::ProcessGone(gone)) => return Err(Error::ProcessGone(gone)),
                Err(error) => self.warn(
                    pid,
                    format!("it locks all its memory (mlockall), and memsup could not unmap its hook area ({error}): the hooks are off and its allocator calls stop it at int3 breakpoints, but the area's {area_mib} MiB are locked with the program's memory"),
                ),
            }
            restart_system_call(tid, registers)?;
            return Ok(true);
        }
        self.warn(
            pid,
            format!("it locks all its memory (mlockall) while a thread may still be inside memsup's hook code: the hooks are off and its allocator calls stop it at int3 breakpoints, but their ring area stays mapped and its {area_mib} MiB are locked with the program's memory"),
        );
        Ok(false)
    }

    /// Whether every thread of `pid` is out of the hook code in `pages`, after turns of
    /// running for up to `LEAVE_TIME` in all. All but `tid` run: those memsup stopped
    /// (`stopped`, the threads it stopped last when it returns) and those whose stop waited
    /// for the event loop, served here first (a mapping call of an allocator a hook called).
    fn threads_leave_hook_code(
        &mut self,
        pid: i32,
        tid: i32,
        stopped: &mut Vec<i32>,
        pages: &[(u64, u64)],
    ) -> bool {
        let started = Instant::now();
        let mut turn = FIRST_TURN;
        loop {
            let all = self.threads.of(pid);
            if !self.may_be_inside(pid, &all, pages) {
                return true;
            }
            if started.elapsed() >= LEAVE_TIME {
                return false;
            }
            self.serve_waiting_stops(pid, tid);
            for &other in stopped.iter() {
                let _ = self.resume(other);
            }
            std::thread::sleep(turn);
            turn = (turn * 2).min(LONGEST_TURN);
            let others: Vec<i32> = self
                .threads
                .of(pid)
                .into_iter()
                .filter(|&other| other != tid)
                .collect();
            *stopped = self.stop_threads(&others, &Deadline::after(STOP_TIMEOUT));
        }
    }

    /// Handles the stops of `pid`'s threads but `tid` that wait for the event loop.
    fn serve_waiting_stops(&mut self, pid: i32, tid: i32) {
        let waiting: Vec<Stop> = self.deferred.iter().copied().collect();
        let (theirs, others): (Vec<Stop>, Vec<Stop>) = waiting.into_iter().partition(|stop| {
            stop.tid() != tid && self.threads.process_of(stop.tid()) == Some(pid)
        });
        self.deferred = others.into();
        for stop in theirs {
            self.handle_or_recover(stop);
        }
    }
}

/// Sends thread `tid`, stopped by a remote call at its exit, back over the `syscall` it was
/// stopped at (`registers`, from its seccomp stop) with the call's number, so that the call
/// runs as the program made it.
fn restart_system_call(tid: i32, registers: &user_regs_struct) -> Result<()> {
    let mut again = *registers;
    again.rip = registers.rip - 2;
    again.rax = registers.orig_rax;
    // From user mode: no restart logic of the kernel's applies on the way back.
    again.orig_rax = u64::MAX;
    regs::set_registers(tid, &again)
}
