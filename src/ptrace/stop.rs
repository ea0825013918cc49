//! Every wait status decoded once into a typed `Stop`.

use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;

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
pub fn wait_for_thread(tid: i32) -> nix::Result<nix::sys::wait::WaitStatus> {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    loop {
        match waitpid(nix::unistd::Pid::from_raw(tid), Some(WaitPidFlag::__WALL)) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => return other,
        }
    }
}
