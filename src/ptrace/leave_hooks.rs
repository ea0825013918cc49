//! Detach under the hook engine: a thread stopped inside the hook code (inside an allocator
//! call a hook made, or in a hook's wait) must leave it before the code is unmapped. With the
//! hooks switched off, the entries restored and every int3 gone, the process runs in turns,
//! stopped again after each, until no thread may be inside or the threads have had
//! `RUN_TIME` to leave. The turns are short at first (an allocator call returns in
//! microseconds), then longer: on a loaded machine a resumed thread may wait several
//! milliseconds for a CPU, and a bound by time, not by a count of turns, gives it that.
//!
//! During a turn the process runs as it would untraced: a signal is delivered at its
//! signal-delivery stop as soon as it is seen, with its own siginfo (a fault handled by the
//! program sees its fault once). A clone or fork joins the new thread or process, stopped,
//! and the turns go on (a forked process is detached after it, its copies of the hook code
//! removed the same way). A thread at its exit event is let go to its end and the turns go
//! on for the others: it never runs the program's code again, so it is not in the hook
//! code, and a process whose threads all exit takes the code with it. Whatever else stops a
//! thread (a job-control stop, a vfork, an exec, a thread that does not stop in time) ends
//! the turns with the thread settled as at the detach's own stop.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use crate::ptrace::detach::{thread_is_zombie, trap_kind, Trap};
use crate::ptrace::inside::InsideCheck;
use crate::ptrace::regs;
use crate::ptrace::stop::{Deadline, Event, Stop, GROUP_STOP_SIGNALS, STOP_TIMEOUT};
use crate::ptrace::tracer::Tracer;

/// How long the threads may run, over all turns, before the code is given up as still in
/// use (left mapped, switched off).
const RUN_TIME: Duration = Duration::from_millis(500);
/// The first turn: an allocator call returns in microseconds.
const FIRST_TURN: Duration = Duration::from_millis(2);
/// Each turn runs twice as long as the one before, up to this: a thread waiting for a CPU
/// gets one, and the checks between turns (an unwind of every thread) stay few.
const LONGEST_TURN: Duration = Duration::from_millis(50);

/// Signals a faulting instruction raises: they come again when it runs again.
const FAULTS: [i32; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

/// How often a turn looks for signals to deliver.
const POLL: Duration = Duration::from_micros(100);

/// A thread's state after a stop during the turns.
enum TurnStop {
    /// Given its signal, running again.
    Running,
    /// Stopped; `go_on` is false when the turns must end.
    Stopped { go_on: bool },
}

/// Where the hook code stands once the threads had their turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookCode {
    /// No thread can be in it: it may be unmapped.
    Unused,
    /// A thread may still be in it (or could not be run): it stays mapped.
    MaybeInUse,
    /// The process exec'd or ended during a turn: the code went with its image.
    ImageGone,
}

impl Tracer<'_> {
    /// Whether a thread of `pid` (stopped) may still be inside `pages`, after turns of
    /// running for up to `RUN_TIME` in all, and the processes forked meanwhile (joined,
    /// stopped). A process left in its group-stop by job control is not run, nor one with a
    /// thread stopped in the middle of an event (a clone, an exec) or not stopped.
    pub(crate) fn leave_hook_code(
        &mut self,
        pid: i32,
        pages: &[(u64, u64)],
    ) -> (HookCode, Vec<i32>) {
        let processes_before: HashSet<i32> = self.processes.keys().copied().collect();
        let mut outcome = HookCode::MaybeInUse;
        let mut ran = Duration::ZERO;
        let mut turn = FIRST_TURN;
        loop {
            // An exec makes the process anew, without its scratch page.
            if !self.image_stays(pid) {
                outcome = HookCode::ImageGone;
                break;
            }
            let tids = self.threads.of(pid);
            // A thread still running (not stopped in time) has no registers to read: it
            // counts as maybe inside.
            if !self.may_be_inside(pid, &tids, pages) {
                outcome = HookCode::Unused;
                break;
            }
            if ran >= RUN_TIME || tids.iter().any(|&tid| self.held(tid)) {
                break;
            }
            let length = turn.min(RUN_TIME - ran);
            if !self.run_one_turn(pid, &tids, length) {
                break;
            }
            ran += length;
            turn = (turn * 2).min(LONGEST_TURN);
        }
        if !self.image_stays(pid) {
            outcome = HookCode::ImageGone;
        } else if outcome == HookCode::MaybeInUse
            && !self.may_be_inside(pid, &self.threads.of(pid), pages)
        {
            // The turns ended early, but every thread had left by then.
            outcome = HookCode::Unused;
        }
        let forked: Vec<i32> = self
            .processes
            .keys()
            .copied()
            .filter(|child| !processes_before.contains(child))
            .collect();
        (outcome, forked)
    }

    /// Points `pid`'s memory at one of `tids` that has not reached its exit: the thread it
    /// went through may have ended during the turns, and every read through it would fail.
    fn read_through_a_live_thread(&mut self, pid: i32, tids: &[i32]) {
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        let live = tids
            .iter()
            .find(|&&tid| !process.exiting_threads.contains(&tid) && !thread_is_zombie(pid, tid));
        if let Some(&live) = live {
            process.memory.use_thread(live);
        }
    }

    /// Whether thread `tid`'s SIGTRAP is memsup's (`Trap`); an int3's is rewound.
    fn our_trap(&self, tid: i32) -> bool {
        let Some(process) = self
            .threads
            .process_of(tid)
            .and_then(|pid| self.processes.get(&pid))
        else {
            return false;
        };
        let Ok(mut registers) = regs::get_registers(tid) else {
            return false;
        };
        let address = registers.rip.wrapping_sub(1);
        match trap_kind(tid, &process.memory, address) {
            Trap::Int3Gone => {
                registers.rip = address;
                regs::set_registers(tid, &registers).is_ok()
            }
            Trap::Step => true,
            Trap::Program => false,
        }
    }

    /// Whether `pid` still has the image the hooks were in, with a thread that will run its
    /// code again: not exec'd (an exec makes the process anew, without its scratch page),
    /// and not every thread at its exit.
    fn image_stays(&self, pid: i32) -> bool {
        let Some(process) = self.processes.get(&pid) else {
            return false;
        };
        let tids = self.threads.of(pid);
        process.scratch.is_some()
            && tids
                .iter()
                .any(|tid| !process.exiting_threads.contains(tid))
    }

    /// Whether thread `tid` must not be run: stopped by job control, in the middle of an
    /// event, or not stopped at all.
    fn held(&self, tid: i32) -> bool {
        self.inside_event.contains(&tid)
            || self.unresponsive.contains(&tid)
            || self
                .threads
                .get(&tid)
                .is_some_and(|thread| thread.job_stopped)
    }

    /// Runs `tids` for one turn of `length` and stops them again; false when a thread
    /// reported something that ends the turns. Signals are delivered as they come, during the
    /// turn too: a timer signal pending at each resume would otherwise stop the thread before
    /// it ran any code, turn after turn.
    fn run_one_turn(&mut self, pid: i32, tids: &[i32], length: Duration) -> bool {
        let exiting = self.processes.get(&pid).map(|p| &p.exiting_threads);
        // A zombie thread (a main thread ended by pthread_exit) never stops again; one let go
        // at its exit event is ending.
        let mut running: Vec<i32> = tids
            .iter()
            .copied()
            .filter(|&tid| !thread_is_zombie(pid, tid))
            .filter(|tid| !exiting.is_some_and(|exiting| exiting.contains(tid)))
            .collect();
        for &tid in &running {
            if let Some(thread) = self.threads.get_mut(&tid) {
                // A fault held at the detach's stop comes again, with its own siginfo, when
                // the instruction runs again: sent after the detach too, it would be seen
                // twice. Other held signals are sent again after the detach.
                thread
                    .pending_signals
                    .retain(|signal| !FAULTS.contains(signal));
            }
            let _ = regs::resume(tid, 0);
        }
        let mut go_on = self.poll_stops(pid, &mut running, Instant::now() + length, false);
        running.retain(|&tid| regs::interrupt(tid).is_ok());
        go_on &= self.poll_stops(pid, &mut running, Instant::now() + STOP_TIMEOUT, true);
        if !running.is_empty() {
            self.unresponsive.extend(running);
            return false;
        }
        go_on
    }

    /// Serves the stops of `running` until `until` or until none runs: each thread that
    /// stops for good leaves the list. With `interrupting`, a thread given its signal is
    /// interrupted again (any stop drops a pending interrupt). Threads that end as zombies
    /// or are gone leave the list too. False when a stop ends the turns.
    fn poll_stops(
        &mut self,
        pid: i32,
        running: &mut Vec<i32>,
        until: Instant,
        interrupting: bool,
    ) -> bool {
        let deadline = Deadline::after(STOP_TIMEOUT);
        let mut go_on = true;
        while !running.is_empty() && Instant::now() < until {
            let mut index = 0;
            while index < running.len() {
                let tid = running[index];
                let flags = WaitPidFlag::__WALL | WaitPidFlag::WNOHANG;
                let stop = match waitpid(Pid::from_raw(tid), Some(flags)) {
                    Ok(status) => Stop::from_wait_status(status),
                    Err(_) => {
                        running.swap_remove(index);
                        continue;
                    }
                };
                let still_running = match stop.map(|stop| self.on_turn_stop(tid, stop, &deadline)) {
                    None => !thread_is_zombie(pid, tid),
                    Some(TurnStop::Running) => !interrupting || regs::interrupt(tid).is_ok(),
                    Some(TurnStop::Stopped { go_on: more }) => {
                        go_on &= more;
                        false
                    }
                };
                if still_running {
                    index += 1;
                } else {
                    running.swap_remove(index);
                }
            }
            std::thread::sleep(POLL);
        }
        go_on
    }

    /// What a stop of `tid` during the turns means: a signal is delivered and the thread
    /// runs on; our interrupt, or a clone or fork (the new thread or process joined,
    /// stopped; the creating thread goes on from its event stop at the next turn), leave it
    /// stopped and the turns go on; a thread at its exit event is let go and the turns go on
    /// for the others; anything else is settled for the detach and ends them (a vfork's
    /// parent, for one, could not stop again until its child runs).
    fn on_turn_stop(&mut self, tid: i32, stop: Stop, deadline: &Deadline) -> TurnStop {
        match stop {
            Stop::Event {
                event: Event::Stop,
                signal,
                ..
            } if signal == libc::SIGTRAP => TurnStop::Stopped { go_on: true },
            // A trap of an int3 of memsup's taken out after the thread hit it is not the
            // program's: rewound, the thread runs what is there now.
            Stop::Signal { signal, .. } if signal == libc::SIGTRAP && self.our_trap(tid) => {
                if regs::resume(tid, 0).is_err() {
                    return TurnStop::Stopped { go_on: true };
                }
                TurnStop::Running
            }
            Stop::Signal { signal, .. } if !GROUP_STOP_SIGNALS.contains(&signal) => {
                if regs::resume(tid, signal).is_err() {
                    return TurnStop::Stopped { go_on: true };
                }
                TurnStop::Running
            }
            Stop::Exited { .. } | Stop::Killed { .. } => {
                let _ = self.settle_for_detach(stop, deadline);
                TurnStop::Stopped { go_on: true }
            }
            // An exiting thread goes on to its end and is not run again. A thread that ends
            // alone (a helper that returned) leaves the others their turns; when the process
            // ends, the others reach their exit too (or end, reaped by the polls) and the
            // next turn finds the image gone.
            Stop::Event {
                event: Event::Exit, ..
            } => {
                let pid = self.threads.get(&tid).map(|thread| thread.pid);
                if let Some(process) = pid.and_then(|pid| self.processes.get_mut(&pid)) {
                    process.exiting_threads.insert(tid);
                }
                let _ = regs::resume(tid, 0);
                TurnStop::Stopped { go_on: true }
            }
            Stop::Event {
                event: Event::Clone | Event::Fork,
                ..
            } => {
                let _ = self.settle_for_detach(stop, deadline);
                self.inside_event.remove(&tid);
                TurnStop::Stopped { go_on: true }
            }
            other => {
                let _ = self.settle_for_detach(other, deadline);
                self.inside_event.insert(tid);
                TurnStop::Stopped { go_on: false }
            }
        }
    }

    /// Whether a stopped thread of `pid` runs in `pages` or has a frame returning into them;
    /// a thread whose registers cannot be read, and is no zombie, may be.
    pub(crate) fn may_be_inside(&mut self, pid: i32, tids: &[i32], pages: &[(u64, u64)]) -> bool {
        self.read_through_a_live_thread(pid, tids);
        let Some(process) = self.processes.get(&pid) else {
            return false;
        };
        let check = InsideCheck::for_process(pid, &self.modules);
        let exiting = &process.exiting_threads;
        tids.iter()
            .filter(|tid| !exiting.contains(tid))
            .any(|&tid| {
                let gone = thread_is_zombie(pid, tid)
                    || !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists();
                let unreadable = regs::get_registers(tid).is_err() && !gone;
                unreadable || check.may_be_inside(tid, &process.memory, pages)
            })
    }
}

/// A stop job control caused: a stop signal at its delivery, or the group-stop it starts.
pub(crate) fn is_job_control_stop(stop: &Stop) -> bool {
    match *stop {
        Stop::Signal { signal, .. } => GROUP_STOP_SIGNALS.contains(&signal),
        Stop::Event {
            event: Event::Stop,
            signal,
            ..
        } => GROUP_STOP_SIGNALS.contains(&signal),
        _ => false,
    }
}
