//! Thin wrappers over the ptrace requests memsup issues, naming the failing call in errors.

use libc::user_regs_struct;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::error::{Error, Result};

pub fn get_registers(tid: i32) -> Result<user_regs_struct> {
    ptrace::getregs(Pid::from_raw(tid)).map_err(|e| Error::ptrace("PTRACE_GETREGS", tid, e))
}

pub fn set_registers(tid: i32, regs: &user_regs_struct) -> Result<()> {
    ptrace::setregs(Pid::from_raw(tid), *regs).map_err(|e| Error::ptrace("PTRACE_SETREGS", tid, e))
}

fn signal_of(signal: i32) -> Option<Signal> {
    if signal == 0 {
        None
    } else {
        Signal::try_from(signal).ok()
    }
}

/// PTRACE_CONT, delivering `signal` (0 for none).
pub fn resume(tid: i32, signal: i32) -> Result<()> {
    ptrace::cont(Pid::from_raw(tid), signal_of(signal))
        .map_err(|e| Error::ptrace("PTRACE_CONT", tid, e))
}

/// PTRACE_SYSCALL: run to the next syscall stop (used to see a seccomp-stopped call's result).
pub fn resume_to_syscall(tid: i32, signal: i32) -> Result<()> {
    ptrace::syscall(Pid::from_raw(tid), signal_of(signal))
        .map_err(|e| Error::ptrace("PTRACE_SYSCALL", tid, e))
}

/// PTRACE_LISTEN: leave a group-stopped tracee stopped but let it report SIGCONT.
pub fn listen(tid: i32) -> Result<()> {
    // SAFETY: PTRACE_LISTEN takes no pointers.
    let result = unsafe { libc::ptrace(libc::PTRACE_LISTEN, tid, 0usize, 0usize) };
    if result == -1 {
        return Err(Error::ptrace(
            "PTRACE_LISTEN",
            tid,
            nix::errno::Errno::last(),
        ));
    }
    Ok(())
}

pub fn single_step(tid: i32) -> Result<()> {
    ptrace::step(Pid::from_raw(tid), None).map_err(|e| Error::ptrace("PTRACE_SINGLESTEP", tid, e))
}

pub fn interrupt(tid: i32) -> Result<()> {
    ptrace::interrupt(Pid::from_raw(tid)).map_err(|e| Error::ptrace("PTRACE_INTERRUPT", tid, e))
}

/// PTRACE_DETACH, delivering `signal` (0 for none).
pub fn detach(tid: i32, signal: i32) -> Result<()> {
    ptrace::detach(Pid::from_raw(tid), signal_of(signal))
        .map_err(|e| Error::ptrace("PTRACE_DETACH", tid, e))
}

pub fn event_message(tid: i32) -> Result<u64> {
    ptrace::getevent(Pid::from_raw(tid))
        .map(|v| v as u64)
        .map_err(|e| Error::ptrace("PTRACE_GETEVENTMSG", tid, e))
}

/// The options every memsup tracee gets; run mode adds seccomp and exit-kill.
pub fn trace_options(run_mode: bool) -> ptrace::Options {
    use ptrace::Options;
    let mut options = Options::PTRACE_O_TRACESYSGOOD
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        // The vforking thread stops before it runs on: its vfork child's calls end there.
        | Options::PTRACE_O_TRACEVFORKDONE
        | Options::PTRACE_O_TRACEEXEC
        // The exit stop comes before the address space is released: its last smaps snapshot.
        | Options::PTRACE_O_TRACEEXIT;
    if run_mode {
        options |= Options::PTRACE_O_TRACESECCOMP | Options::PTRACE_O_EXITKILL;
    }
    options
}

pub fn seize(tid: i32, options: ptrace::Options) -> Result<()> {
    ptrace::seize(Pid::from_raw(tid), options).map_err(|e| Error::ptrace("PTRACE_SEIZE", tid, e))
}
