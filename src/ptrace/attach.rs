//! `memsup attach`: seize every thread of a running process (repeating until a pass finds no
//! new one; TRACECLONE catches threads born meanwhile), interrupt them, probe, resume.

use std::collections::HashSet;
use std::time::Duration;

use nix::errno::Errno;

use crate::census;
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::proc::maps::read_maps;
use crate::proc::status::{is_kernel_thread, read_status, read_tasks};
use crate::ptrace::inject::choose_live_injector;
use crate::ptrace::regs;
use crate::ptrace::state::Thread;
use crate::ptrace::stop::{
    wait_for_thread_until, Deadline, Event, Stop, WaitFailure, GROUP_STOP_SIGNALS, STOP_TIMEOUT,
};
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{SnapshotReason, StartCause};

/// Refuses early, with the reason, when `pid` cannot be attached to. PID 1 is not refused
/// here: whether init may be traced is the kernel's decision (in a container it often is).
pub fn check_attachable(pid: i32) -> Result<i32> {
    let status = read_status(pid).map_err(|_| Error::NoSuchProcess(pid))?;
    // A TID of memsup has memsup's Tgid too; the kernel would answer EPERM.
    if status.tgid == std::process::id() as i32 {
        return Err(Error::OwnProcess { pid });
    }
    if is_kernel_thread(pid).unwrap_or(false) {
        return Err(Error::KernelThread {
            pid,
            name: status.name,
        });
    }
    if status.tracer_pid != 0 {
        let tracer_name = read_status(status.tracer_pid)
            .map(|s| s.name)
            .unwrap_or_else(|_| "?".into());
        return Err(Error::AlreadyTraced {
            pid,
            tracer: status.tracer_pid,
            tracer_name,
        });
    }
    Ok(status.tgid)
}

/// A thread joined by attach, stopped.
pub(crate) struct JoinedThread {
    pub tid: i32,
    /// Signals that arrived before the interrupt stop, to deliver when it resumes.
    pub signals: Vec<i32>,
    /// The process was stopped by job control: it must stay stopped (PTRACE_LISTEN).
    pub group_stopped: bool,
}

/// Seizes and interrupts every thread of `pid` and waits until each is stopped. Threads
/// and processes created meanwhile (auto-attached through the trace options) are joined or,
/// for new processes, let go: no probe is planted yet, so there is nothing to undo in them.
/// On failure (or when memsup is asked to end) every thread seized so far is let go.
pub(crate) fn seize_all_threads(pid: i32) -> Result<Vec<JoinedThread>> {
    let deadline = Deadline::after(STOP_TIMEOUT).interruptible();
    let mut seized = HashSet::new();
    let mut joined = Vec::new();
    let outcome = seize_and_stop(pid, &deadline, &mut seized, &mut joined);
    if let Err(error) = outcome {
        release(&seized, joined);
        return Err(match error {
            Error::AttachInterrupted(_) => Error::AttachInterrupted(pid),
            other => other,
        });
    }
    Ok(joined)
}

/// Seizes every thread of `pid` into `seized`, then waits for their stops into `joined`.
fn seize_and_stop(
    pid: i32,
    deadline: &Deadline,
    seized: &mut HashSet<i32>,
    joined: &mut Vec<JoinedThread>,
) -> Result<()> {
    let options = regs::trace_options(false);
    let our_pid = std::process::id() as i32;
    let mut exited = HashSet::new();
    loop {
        let tasks = read_tasks(pid).map_err(|_| Error::NoSuchProcess(pid))?;
        let new: Vec<i32> = tasks
            .into_iter()
            .filter(|t| !seized.contains(t) && !exited.contains(t))
            .collect();
        if new.is_empty() {
            break;
        }
        for tid in new {
            // An exited thread (a main thread ended by pthread_exit) cannot be seized.
            if crate::ptrace::detach::thread_is_zombie(pid, tid) {
                exited.insert(tid);
                continue;
            }
            match regs::seize(tid, options) {
                Ok(()) => {
                    end_first_seized_for_test(pid);
                    let _ = regs::interrupt(tid);
                }
                Err(Error::ProcessGone(_)) => continue,
                // Born during this loop and already ours through PTRACE_O_TRACECLONE: it
                // reports its own first stop.
                Err(Error::Ptrace {
                    source: Errno::EPERM,
                    ..
                }) if tracer_of(pid, tid) == our_pid => {}
                // The kernel refuses to seize a thread that is exiting: it is gone an
                // instant later (a short-lived worker), and is not one to wait for.
                Err(Error::Ptrace {
                    source: Errno::EPERM,
                    ..
                }) if ends_soon(pid, tid) => {
                    exited.insert(tid);
                    continue;
                }
                Err(Error::Ptrace {
                    source: Errno::EPERM,
                    ..
                }) if seized.is_empty() => {
                    return Err(match check_attachable(pid) {
                        Err(error) => error,
                        Ok(_) => Error::PermissionDenied { pid },
                    });
                }
                Err(error) => return Err(error),
            }
            seized.insert(tid);
        }
    }
    // Every thread has exited: the process is a zombie waiting for its parent.
    if seized.is_empty() {
        return Err(Error::NoSuchProcess(pid));
    }
    // The leader last: when the process ends meanwhile, the kernel reports the leader's exit
    // only once every other thread's is collected.
    let mut waiting: Vec<i32> = seized.iter().copied().collect();
    waiting.sort_unstable_by_key(|&tid| tid != pid);
    while let Some(tid) = waiting.pop() {
        let mut children = Vec::new();
        if let Some(thread) = wait_for_interrupt(tid, deadline, &mut children)? {
            joined.push(thread);
        }
        for child in children.into_iter().filter(|child| seized.insert(*child)) {
            if read_status(child).map(|s| s.tgid == pid).unwrap_or(false) {
                waiting.push(child);
            } else {
                let _ = wait_for_interrupt(child, deadline, &mut Vec::new());
                let _ = regs::detach(child, 0);
            }
        }
    }
    Ok(())
}

/// The `join-exit` test fault: the first process seized is killed before its interrupt,
/// and reaped by the wait for that stop, as one whose program ended at that moment.
fn end_first_seized_for_test(pid: i32) {
    static ENDED_ONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if crate::failure::test_fault() == Some(crate::failure::TestFault::JoinExit)
        && !ENDED_ONE.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// How long a thread the kernel refused to seize is watched for its end.
const EXIT_GRACE: Duration = Duration::from_millis(100);

/// Whether thread `tid`, refused with EPERM, ends within `EXIT_GRACE` (its /proc entry gone
/// or a zombie): an exiting thread, not a permission problem.
fn ends_soon(pid: i32, tid: i32) -> bool {
    let deadline = std::time::Instant::now() + EXIT_GRACE;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"));
        let state = stat
            .ok()
            .and_then(|text| crate::proc::task::parse_stat_state(&text));
        if matches!(state, None | Some('Z' | 'X')) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Lets go of threads seized by a failed attach; nothing was planted in them yet. A thread
/// that does not stop in time to be detached is released by the kernel when memsup exits.
fn release(seized: &HashSet<i32>, joined: Vec<JoinedThread>) {
    let mut stopped = HashSet::new();
    for thread in joined {
        stopped.insert(thread.tid);
        // From an interrupt stop PTRACE_DETACH would drop a signal: each is sent again.
        let _ = regs::detach(thread.tid, 0);
        for signal in thread.signals {
            // SAFETY: tgkill has no memory effects.
            unsafe { libc::syscall(libc::SYS_tgkill, read_tgid(thread.tid), thread.tid, signal) };
        }
    }
    let deadline = Deadline::after(RELEASE_TIMEOUT);
    for &tid in seized.iter().filter(|tid| !stopped.contains(tid)) {
        // Detaching needs the thread stopped; the interrupt sent to it stops it.
        if regs::detach(tid, 0).is_err() && wait_for_thread_until(tid, &deadline).is_ok() {
            let _ = regs::detach(tid, 0);
        }
    }
}

/// Lets go of stopped threads in which nothing was planted: each is detached and the
/// signals it received meanwhile are sent again; a thread stopped by job control stays
/// stopped (the kernel puts a detached thread of a stopped group back in its group-stop).
pub(crate) fn let_go(joined: Vec<JoinedThread>) {
    let seized = joined.iter().map(|thread| thread.tid).collect();
    release(&seized, joined);
}

/// How long a failed attach waits for each seized thread's stop to let it go.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

fn read_tgid(tid: i32) -> i32 {
    read_status(tid).map_or(tid, |status| status.tgid)
}

fn tracer_of(pid: i32, tid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
        .map(|text| crate::proc::status::parse_status(&text).tracer_pid)
        .unwrap_or(0)
}

/// Waits for a freshly seized thread's interrupt stop (or a new thread's first stop). None
/// if it exited meanwhile. Threads and processes it creates first are added to `children`.
fn wait_for_interrupt(
    tid: i32,
    deadline: &Deadline,
    children: &mut Vec<i32>,
) -> Result<Option<JoinedThread>> {
    let mut signals = Vec::new();
    loop {
        let status = match wait_for_thread_until(tid, deadline) {
            Ok(status) => status,
            Err(WaitFailure::Failed(Errno::ECHILD)) => return Ok(None),
            Err(failure) => return Err(failure.into_error(tid, deadline, "attaching")),
        };
        match Stop::from_wait_status(status) {
            Some(Stop::Event {
                event: Event::Stop,
                signal,
                ..
            }) => {
                return Ok(Some(JoinedThread {
                    tid,
                    signals,
                    group_stopped: GROUP_STOP_SIGNALS.contains(&signal),
                }));
            }
            Some(Stop::Event {
                event: Event::Clone | Event::Fork | Event::Vfork,
                ..
            }) => {
                // Killed at this stop: the next wait reports its end.
                if let Ok(child) = regs::event_message(tid) {
                    children.push(child as i32);
                }
                resume_and_interrupt(tid)?;
            }
            Some(Stop::Event { .. }) | Some(Stop::Syscall { .. }) => resume_and_interrupt(tid)?,
            Some(Stop::Signal { signal, .. }) => {
                signals.push(signal);
                resume_and_interrupt(tid)?;
            }
            Some(Stop::Exited { .. }) | Some(Stop::Killed { .. }) => return Ok(None),
            None => {}
        }
    }
}

/// Resumes a thread stopped on its way to the interrupt stop, and interrupts it again: the
/// kernel drops a pending PTRACE_INTERRUPT at any other stop (`ptrace_stop` clears
/// JOBCTL_TRAP_STOP), so without it a thread that stopped at a clone event first (a thread
/// that keeps creating threads) would never reach its interrupt stop.
fn resume_and_interrupt(tid: i32) -> Result<()> {
    match regs::resume(tid, 0) {
        // Killed at its stop: the next wait reports its end.
        Ok(()) | Err(Error::ProcessGone(_)) => {}
        Err(error) => return Err(error),
    }
    // A thread resumed from its exit event is gone before it can be interrupted: the next
    // wait reports its end.
    let _ = regs::interrupt(tid);
    Ok(())
}

impl Tracer<'_> {
    /// Joins process `pid` (a thread-group id), probes it and lets it run on.
    pub fn attach(&mut self, pid: i32) -> Result<()> {
        // Its threads are ours already: seizing them again would wait for stops that never come.
        if self.processes.contains_key(&pid) {
            return Ok(());
        }
        // Where glibc's malloc is and its symbols: files read before the stop, not during it.
        let allocator = read_maps(pid)
            .map_err(|error| error.to_string())
            .and_then(|maps| census::locate(pid, &maps, &self.modules));
        let threads = seize_all_threads(pid)?;
        // Every thread ended between its seizure and its stop (a program that was about to
        // exit, or that ran on at once): nothing of it is left to join.
        if threads.is_empty() {
            return Err(Error::EndedWhileJoining(pid));
        }
        let process = self.new_process(pid, true);
        self.processes.start(process);
        for joined in &threads {
            let mut thread = Thread::new(pid);
            thread.pending_signals = joined.signals.clone();
            self.threads.start(joined.tid, thread);
            self.joining.insert(joined.tid);
        }
        self.send(
            pid,
            pid,
            EventKind::ProcessStart {
                parent_pid: None,
                cause: StartCause::Attach,
            },
        );
        self.record_exec(pid);
        // Threads that were running before: where their stacks are.
        for joined in threads.iter().filter(|joined| joined.tid != pid) {
            if let Ok(registers) = regs::get_registers(joined.tid) {
                let address = registers.rsp;
                self.send(pid, joined.tid, EventKind::ThreadStack { address });
            }
        }
        // Any stopped thread can map the page, even when every one sits in a system call.
        let tids: Vec<i32> = threads.iter().map(|joined| joined.tid).collect();
        let injector = choose_live_injector(&tids, None).unwrap_or(pid);
        if crate::failure::test_fault() == Some(crate::failure::TestFault::AttachError) {
            return Err(Error::Internal(
                "test fault: joining fails with every thread stopped".into(),
            ));
        }
        let maps = read_maps(pid).map_err(|e| Error::io(format!("/proc/{pid}/maps"), e))?;
        self.census_at_attach(pid, &maps, &allocator, &tids);
        let anchor = maps
            .iter()
            .find(|m| m.executable && m.path.as_deref().is_some_and(|p| p.contains("libc.so")))
            .or_else(|| maps.iter().find(|m| m.executable))
            .map_or(0, |m| m.start);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.memory.use_thread(injector);
        }
        self.create_scratch(pid, injector, anchor)?;
        self.remove_leftovers(pid, &tids, injector);
        self.scan_modules(pid, Some(injector))?;
        // The sampler's, not a stop longer: taken once its thread stacks and modules are
        // recorded, so that the snapshot finds them.
        self.residency.request(pid, SnapshotReason::Start);
        for joined in threads {
            self.joining.remove(&joined.tid);
            if !joined.group_stopped {
                let _ = self.resume(joined.tid);
            } else if self.listen(joined.tid).is_err() {
                // Not in its group-stop any more (it ran the scratch page's mmap): stop it
                // again the way job control did.
                let _ = regs::resume(joined.tid, libc::SIGSTOP);
            }
        }
        Ok(())
    }
}
