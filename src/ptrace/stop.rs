//! Every wait status decoded once into a typed `Stop`, and the waits for one thread's stop.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::error::Error;
use crate::failure::lock;
use crate::ptrace::signals;

/// ptrace event numbers (PTRACE_EVENT_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Fork,
    Vfork,
    Clone,
    Exec,
    VforkDone,
    Exit,
    Seccomp,
    /// PTRACE_EVENT_STOP: group-stop, PTRACE_INTERRUPT, or a new tracee's first stop.
    Stop,
    Other(i32),
}

impl Event {
    fn from_raw(event: i32) -> Event {
        match event {
            libc::PTRACE_EVENT_FORK => Event::Fork,
            libc::PTRACE_EVENT_VFORK => Event::Vfork,
            libc::PTRACE_EVENT_CLONE => Event::Clone,
            libc::PTRACE_EVENT_EXEC => Event::Exec,
            libc::PTRACE_EVENT_VFORK_DONE => Event::VforkDone,
            libc::PTRACE_EVENT_EXIT => Event::Exit,
            libc::PTRACE_EVENT_SECCOMP => Event::Seccomp,
            libc::PTRACE_EVENT_STOP => Event::Stop,
            other => Event::Other(other),
        }
    }
}

/// What a thread reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The thread exited with this code (for a leader: the process's exit status).
    Exited { tid: i32, code: i32 },
    /// The thread was killed by a signal.
    Killed { tid: i32, signal: i32 },
    /// A ptrace event stop; `signal` is the stop signal (SIGTRAP, or the group-stop signal).
    Event { tid: i32, event: Event, signal: i32 },
    /// A syscall-entry or syscall-exit stop (PTRACE_O_TRACESYSGOOD).
    Syscall { tid: i32 },
    /// A signal-delivery-stop, including SIGTRAP from an int3.
    Signal { tid: i32, signal: i32 },
}

impl Stop {
    pub fn from_wait_status(status: WaitStatus) -> Option<Stop> {
        let signal_number = |s: Signal| s as i32;
        match status {
            WaitStatus::Exited(pid, code) => Some(Stop::Exited {
                tid: pid.as_raw(),
                code,
            }),
            WaitStatus::Signaled(pid, signal, _) => Some(Stop::Killed {
                tid: pid.as_raw(),
                signal: signal_number(signal),
            }),
            WaitStatus::PtraceEvent(pid, signal, event) => Some(Stop::Event {
                tid: pid.as_raw(),
                event: Event::from_raw(event),
                signal: signal_number(signal),
            }),
            WaitStatus::PtraceSyscall(pid) => Some(Stop::Syscall { tid: pid.as_raw() }),
            WaitStatus::Stopped(pid, signal) => Some(Stop::Signal {
                tid: pid.as_raw(),
                signal: signal_number(signal),
            }),
            WaitStatus::Continued(_) | WaitStatus::StillAlive => None,
        }
    }

    pub fn tid(&self) -> i32 {
        match *self {
            Stop::Exited { tid, .. }
            | Stop::Killed { tid, .. }
            | Stop::Event { tid, .. }
            | Stop::Syscall { tid }
            | Stop::Signal { tid, .. } => tid,
        }
    }
}

/// Stop signals whose group-stop must be kept with PTRACE_LISTEN so job control works.
pub const GROUP_STOP_SIGNALS: [i32; 4] =
    [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// Waits for the next stop of thread `tid`, retrying when one of memsup's own signals
/// interrupts the wait (their handlers do not restart system calls, on purpose: the main
/// loop's waitpid must notice them; these inner waits must not give up).
pub fn wait_for_thread(tid: i32) -> nix::Result<WaitStatus> {
    loop {
        match waitpid(Pid::from_raw(tid), Some(WaitPidFlag::__WALL)) {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// How long attach and detach wait for any one thread to stop. A thread that was told to
/// stop does so within microseconds; one that does not (a thread the kernel never stops for
/// us) must not keep memsup, and with it the traced program, waiting forever.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest pause between two polls of a bounded wait.
const LONGEST_POLL_PAUSE: Duration = Duration::from_millis(5);
/// How long an interruptible wait must have lasted before memsup's being asked to end gives it
/// up: a stop that comes sooner (the usual case) completes the join, so the outcome does not
/// depend on whether the signal came a moment before or after the stop; a stuck join ends.
const INTERRUPT_GRACE: Duration = Duration::from_secs(1);

/// When a bounded wait gives up.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    /// The wait allowed, for messages.
    allowed: Duration,
    /// Also give up when memsup is asked to end (attach: stop attaching and detach).
    interruptible: bool,
}

impl Deadline {
    pub fn after(duration: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + duration,
            allowed: duration,
            interruptible: false,
        }
    }

    /// The same deadline, also ended by a signal that ends memsup's recording.
    pub fn interruptible(self) -> Deadline {
        Deadline {
            interruptible: true,
            ..self
        }
    }
}

/// Why a bounded wait returned without a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFailure {
    /// waitpid failed (ECHILD: the thread is gone or not ours).
    Failed(Errno),
    /// The deadline passed.
    TimedOut,
    /// memsup received a signal that ends the recording.
    Interrupted,
}

impl WaitFailure {
    /// The error for a wait of thread `tid` that failed while memsup was `during` something.
    pub fn into_error(self, tid: i32, deadline: &Deadline, during: &'static str) -> Error {
        match self {
            WaitFailure::Failed(errno) => Error::ptrace("waitpid", tid, errno),
            WaitFailure::TimedOut => Error::ThreadDidNotStop {
                tid,
                seconds: deadline.allowed.as_secs(),
                during,
            },
            WaitFailure::Interrupted => Error::AttachInterrupted(tid),
        }
    }
}

/// Ends of threads reaped by a wait outside the event loop that did not record them (a
/// thread killed during a remote system call): the loop takes them back, so the process
/// still ends with its real status.
static HANDED_BACK: Mutex<Vec<Stop>> = Mutex::new(Vec::new());

pub fn hand_back(stop: Stop) {
    lock(&HANDED_BACK).push(stop);
}

/// The stops handed back since the last call, oldest first.
pub fn take_handed_back() -> Vec<Stop> {
    std::mem::take(&mut *lock(&HANDED_BACK))
}

/// As `wait_for_thread`, but gives up at `deadline`: polls with WNOHANG and short sleeps
/// (never used by the main loop, only by attach, detach and remote calls).
pub fn wait_for_thread_until(tid: i32, deadline: &Deadline) -> Result<WaitStatus, WaitFailure> {
    let flags = WaitPidFlag::__WALL | WaitPidFlag::WNOHANG;
    let mut pause = Duration::from_micros(10);
    let started = Instant::now();
    loop {
        match waitpid(Pid::from_raw(tid), Some(flags)) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
            Ok(status) => return Ok(status),
            Err(errno) => return Err(WaitFailure::Failed(errno)),
        }
        let now = Instant::now();
        if deadline.interruptible && now >= started + INTERRUPT_GRACE && signals::ending_requested()
        {
            return Err(WaitFailure::Interrupted);
        }
        if now >= deadline.at {
            return Err(WaitFailure::TimedOut);
        }
        std::thread::sleep(pause.min(deadline.at - now));
        pause = (pause * 2).min(LONGEST_POLL_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_handed_back_reach_the_event_loop_once_in_order() {
        let killed = Stop::Killed { tid: 41, signal: 9 };
        let exited = Stop::Exited { tid: 42, code: 3 };
        hand_back(killed);
        hand_back(exited);
        assert_eq!(take_handed_back(), [killed, exited]);
        assert_eq!(take_handed_back(), []);
    }

    /// A child of this test process that waits to be killed.
    fn paused_child() -> Pid {
        // SAFETY: the child only calls async-signal-safe functions before it is killed.
        match unsafe { libc::fork() } {
            0 => loop {
                unsafe { libc::pause() };
            },
            -1 => panic!("fork failed: {}", Errno::last()),
            pid => Pid::from_raw(pid),
        }
    }

    #[test]
    fn a_bounded_wait_gives_up_at_its_deadline_and_still_sees_a_later_stop() {
        let child = paused_child();
        let deadline = Deadline::after(Duration::from_millis(30));
        assert_eq!(
            wait_for_thread_until(child.as_raw(), &deadline),
            Err(WaitFailure::TimedOut)
        );
        assert!(Instant::now() >= deadline.at);
        nix::sys::signal::kill(child, Signal::SIGKILL).unwrap();
        let later = Deadline::after(Duration::from_secs(10));
        assert_eq!(
            wait_for_thread_until(child.as_raw(), &later),
            Ok(WaitStatus::Signaled(child, Signal::SIGKILL, false))
        );
        assert_eq!(
            wait_for_thread_until(child.as_raw(), &later),
            Err(WaitFailure::Failed(Errno::ECHILD))
        );
    }
}
