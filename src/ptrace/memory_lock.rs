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
use crate::proc::limits::read_locked_memory_soft_limit;
use crate::proc::status::read_status;
use crate::ptrace::hooks::{probe_with_int3_instead, shares_memory, switch_hooks_off};
use crate::ptrace::regs;
use crate::ptrace::stop::{Deadline, Event, Stop, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;

/// `mlockall`'s flags: lock what is mapped now, what is mapped later, pages as they fault.
const MCL_CURRENT: u64 = 1;
const MCL_FUTURE: u64 = 2;
const MCL_ONFAULT: u64 = 4;
/// The capability that lifts `RLIMIT_MEMLOCK`.
const CAP_IPC_LOCK: u64 = 1 << 14;
const PAGE: u64 = 4096;
/// Rounds of forks and clones served before the hooks go (each stops the threads again).
const BIRTH_ROUNDS: usize = 8;

/// Why an image's entries stop at int3 from the lock on.
const LOCKED_REASON: &str =
    "the program locked all its memory (mlockall), and memsup took its hooks out first";

/// How long the other threads may run, in all, to leave the hook code.
const LEAVE_TIME: Duration = Duration::from_millis(500);
/// Their first turn (an allocator call returns in microseconds), doubled up to the longest.
const FIRST_TURN: Duration = Duration::from_millis(1);
const LONGEST_TURN: Duration = Duration::from_millis(50);

impl Tracer<'_> {
    /// Thread `tid` of `pid` is stopped at the entry of `mlockall` (`registers`): when the
    /// call will lock what is mapped now in a hooked image, the hooks go first. Returns
    /// whether the call was made to start again (the thread then stops at it once more, with
    /// no hooks left).
    pub(crate) fn before_memory_lock(
        &mut self,
        pid: i32,
        tid: i32,
        registers: &user_regs_struct,
    ) -> Result<bool> {
        let process = self.process(pid)?;
        // A vfork child's hooks and area are its parent's, which runs on after it.
        let Some(hooks) = process
            .hooks
            .as_ref()
            .filter(|_| !process.shares_parent_memory)
        else {
            return Ok(false);
        };
        let pages: u64 = hooks.pages.iter().map(|&(_, length)| length).sum();
        let scratch = process.scratch.as_ref().map_or(0, |_| PAGE);
        let memsups = hooks.area_bytes + pages + scratch;
        if !locks_what_is_mapped(pid, tid, registers.rdi as u32, memsups) {
            return Ok(false);
        }
        let mut stopped = self.stop_threads(&self.others(pid, tid), &Deadline::after(STOP_TIMEOUT));
        self.serve_pending_births(pid, tid, &mut stopped);
        let outcome = self.take_hooks_out(pid, tid, registers, &mut stopped);
        for other in stopped {
            let _ = self.resume(other);
        }
        outcome
    }

    /// The threads of `pid` but `tid`.
    fn others(&self, pid: i32, tid: i32) -> Vec<i32> {
        self.threads
            .of(pid)
            .into_iter()
            .filter(|&other| other != tid)
            .collect()
    }

    /// Forks and clones of `pid` already reported are served while the hooks are still on,
    /// so that a fork child gets rings of its own as at any fork (its entries still jump
    /// into hooks); the threads they let go on are stopped again. A vfork is not: its
    /// parent would wait for the child and not stop, and the child shares the memory, so the
    /// area stays (`vfork_child_shares`).
    fn serve_pending_births(&mut self, pid: i32, tid: i32, stopped: &mut Vec<i32>) {
        let birth = |stop: &Stop| {
            matches!(
                stop,
                Stop::Event {
                    event: Event::Fork | Event::Clone,
                    ..
                }
            )
        };
        for _ in 0..BIRTH_ROUNDS {
            if !self.serve_waiting_stops(pid, tid, stopped, birth) {
                return;
            }
            let others: Vec<i32> = self
                .others(pid, tid)
                .into_iter()
                .filter(|other| !stopped.contains(other))
                .collect();
            stopped.extend(self.stop_threads(&others, &Deadline::after(STOP_TIMEOUT)));
        }
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
        // A vfork child shares the memory and is no thread of `pid`: it may be in the code.
        let left = !self.vfork_child_shares(pid)
            && self.threads_leave_hook_code(pid, tid, stopped, &hooks.pages);
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
            // A stop the event loop has not seen may hold a thread inside (a mapping call of
            // an allocator a hook called). An mlockall waits: it would lock the area.
            self.serve_waiting_stops(pid, tid, stopped, |stop| !is_memory_lock(stop));
            for &other in stopped.iter() {
                let _ = self.resume(other);
            }
            std::thread::sleep(turn);
            turn = (turn * 2).min(LONGEST_TURN);
            *stopped = self.stop_threads(&self.others(pid, tid), &Deadline::after(STOP_TIMEOUT));
        }
    }

    /// Handles the stops of `pid`'s threads but `tid` that wait for the event loop and that
    /// `serve` picks; whether there were any. Meanwhile `tid` and `stopped` count as stopped
    /// (joining), so that nothing the handling does interrupts them again.
    fn serve_waiting_stops(
        &mut self,
        pid: i32,
        tid: i32,
        stopped: &[i32],
        serve: impl Fn(&Stop) -> bool,
    ) -> bool {
        let waiting: Vec<Stop> = self.deferred.iter().copied().collect();
        let (theirs, others): (Vec<Stop>, Vec<Stop>) = waiting.into_iter().partition(|stop| {
            stop.tid() != tid && self.threads.process_of(stop.tid()) == Some(pid) && serve(stop)
        });
        if theirs.is_empty() {
            return false;
        }
        self.deferred = others.into();
        let held: Vec<i32> = std::iter::once(tid)
            .chain(stopped.iter().copied())
            .filter(|thread| !self.joining.contains(thread))
            .collect();
        self.joining.extend(held.iter().copied());
        for stop in theirs {
            self.handle_or_recover(stop);
        }
        for thread in held {
            self.joining.remove(&thread);
        }
        true
    }

    /// Whether a vfork child of `pid` still runs in its memory.
    fn vfork_child_shares(&self, pid: i32) -> bool {
        self.processes.iter().any(|(&child, process)| {
            child != pid && process.shares_parent_memory && shares_memory(pid, child)
        })
    }
}

/// Whether a stop is a thread's seccomp stop at `mlockall`.
fn is_memory_lock(stop: &Stop) -> bool {
    matches!(
        stop,
        Stop::Event {
            event: Event::Seccomp,
            ..
        }
    ) && regs::get_registers(stop.tid())
        .is_ok_and(|registers| registers.orig_rax == libc::SYS_mlockall as u64)
}

/// Whether `mlockall(flags)` by thread `tid` of `pid` would lock what is mapped now were
/// memsup's `memsups` bytes not mapped in it. A call that fails anyway keeps the hooks.
fn locks_what_is_mapped(pid: i32, tid: i32, flags: u32, memsups: u64) -> bool {
    let limit = read_locked_memory_soft_limit(pid).unwrap_or(None);
    // Capabilities are the calling thread's (its ID leads to its own status).
    let status = read_status(tid).unwrap_or_default();
    let address_space = status.vm_size.saturating_sub(memsups);
    will_lock(flags, limit, status.effective_capabilities, address_space)
}

/// The kernel's checks of `mlockall` before it locks anything: `EINVAL` for unknown flags
/// or `MCL_ONFAULT` alone; without `CAP_IPC_LOCK`, `EPERM` for a zero limit and, with
/// `MCL_CURRENT`, `ENOMEM` for an address space (`address_space` bytes) over the limit
/// (`limit` None is unlimited).
fn will_lock(flags: u32, limit: Option<u64>, capabilities: u64, address_space: u64) -> bool {
    let flags = u64::from(flags);
    let valid = flags & !(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0
        && flags & (MCL_CURRENT | MCL_FUTURE) != 0;
    let privileged = capabilities & CAP_IPC_LOCK != 0;
    let within = |limit: u64| limit > 0 && address_space / PAGE <= limit / PAGE;
    valid && flags & MCL_CURRENT != 0 && (privileged || limit.map_or(true, within))
}

/// Sends thread `tid`, stopped by a remote call at its exit, back over the `syscall` it was
/// stopped at (`registers`, from its seccomp stop) with the call's number, so that the call
/// runs as the program made it.
fn restart_system_call(tid: i32, registers: &user_regs_struct) -> Result<()> {
    regs::set_registers(tid, &made_again(registers))
}

/// The registers that make the system call stopped at (`registers`, at its seccomp stop)
/// again: back over its 2-byte `syscall`, its number in rax, and orig_rax -1, so that the
/// return to user mode applies no restart logic of the kernel's.
fn made_again(registers: &user_regs_struct) -> user_regs_struct {
    let mut again = *registers;
    again.rip = registers.rip - 2;
    again.rax = registers.orig_rax;
    again.orig_rax = u64::MAX;
    again
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_made_again_from_its_syscall_instruction_with_its_arguments() {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut stopped: user_regs_struct = unsafe { std::mem::zeroed() };
        stopped.rip = 0x7f00_0000_1236;
        stopped.orig_rax = libc::SYS_mlockall as u64;
        stopped.rax = -(libc::ENOSYS as i64) as u64;
        stopped.rdi = 3;
        stopped.rsp = 0x7ffe_0000_0000;
        let again = made_again(&stopped);
        assert_eq!(again.rip, 0x7f00_0000_1234);
        assert_eq!(again.rax, libc::SYS_mlockall as u64);
        assert_eq!(again.orig_rax, u64::MAX);
        assert_eq!((again.rdi, again.rsp), (3, 0x7ffe_0000_0000));
    }

    #[test]
    fn only_a_call_that_will_lock_what_is_mapped_takes_the_hooks_out() {
        let all = (MCL_CURRENT | MCL_FUTURE) as u32;
        let (current, future, onfault) =
            (MCL_CURRENT as u32, MCL_FUTURE as u32, MCL_ONFAULT as u32);
        let small = 3 << 20;
        assert!(will_lock(all, Some(8 << 20), 0, small));
        assert!(will_lock(current | onfault, None, 0, small));
        // Nothing mapped now is locked.
        assert!(!will_lock(future, None, 0, small));
        // EINVAL: an unknown flag, or MCL_ONFAULT alone.
        assert!(!will_lock(all | 8, None, 0, small));
        assert!(!will_lock(onfault, None, 0, small));
        // EPERM: a zero limit, unless CAP_IPC_LOCK lifts it.
        assert!(!will_lock(all, Some(0), 0, small));
        assert!(will_lock(all, Some(0), CAP_IPC_LOCK, small));
        // ENOMEM: an address space over the limit, counted in pages, unless CAP_IPC_LOCK.
        assert!(will_lock(all, Some(8 << 20), 0, 8 << 20));
        assert!(will_lock(all, Some((8 << 20) + 4095), 0, (8 << 20) + 4095));
        assert!(!will_lock(all, Some(8 << 20), 0, (8 << 20) + 4096));
        assert!(will_lock(all, Some(8 << 20), CAP_IPC_LOCK, 1 << 30));
        // MCL_FUTURE alone weighs nothing.
        assert!(!will_lock(future, Some(8 << 20), 0, 1 << 30));
    }
}
