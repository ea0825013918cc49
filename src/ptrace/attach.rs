//! `memsup attach`: seize every thread of a running process (repeating until a pass finds no
//! new one; TRACECLONE catches threads born meanwhile), interrupt them, probe, resume.

use std::collections::HashSet;

use nix::errno::Errno;

use crate::error::{Error, Result};
use crate::proc::maps::read_maps;
use crate::proc::status::{read_status, read_tasks};
use crate::ptrace::regs;
use crate::ptrace::state::{Process, Thread};
use crate::ptrace::stop::{wait_for_thread, Stop};
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{Record, StartCause};

/// Refuses early, with the reason, when `pid` cannot be attached to.
pub fn check_attachable(pid: i32) -> Result<i32> {
    let status = read_status(pid).map_err(|_| Error::NoSuchProcess(pid))?;
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

/// Seizes and interrupts every thread; returns them with any signal that arrived first.
fn seize_all_threads(pid: i32) -> Result<Vec<(i32, Vec<i32>)>> {
    let options = regs::trace_options(false);
    let mut seized = HashSet::new();
    loop {
        let tasks = read_tasks(pid).map_err(|_| Error::NoSuchProcess(pid))?;
        let new: Vec<i32> = tasks.into_iter().filter(|t| !seized.contains(t)).collect();
        if new.is_empty() {
            break;
        }
        for tid in new {
            // An exited thread (a main thread ended by pthread_exit) cannot be seized.
            if crate::ptrace::detach::thread_is_zombie(pid, tid) {
                seized.insert(tid);
                continue;
            }
            match regs::seize(tid, options) {
                Ok(()) => {}
                Err(Error::ProcessGone(_)) => continue,
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
            let _ = regs::interrupt(tid);
            seized.insert(tid);
        }
    }
    let mut threads = Vec::new();
    for tid in seized
        .into_iter()
        .filter(|&tid| !crate::ptrace::detach::thread_is_zombie(pid, tid))
    {
        if let Some(signals) = wait_for_interrupt(tid)? {
            threads.push((tid, signals));
        }
    }
    Ok(threads)
}

/// Waits for a freshly seized thread's interrupt stop. None if it exited meanwhile.
fn wait_for_interrupt(tid: i32) -> Result<Option<Vec<i32>>> {
    let mut signals = Vec::new();
    loop {
        let status = match wait_for_thread(tid) {
            Ok(status) => status,
            Err(Errno::ECHILD) => return Ok(None),
            Err(errno) => return Err(Error::ptrace("waitpid", tid, errno)),
        };
        match Stop::from_wait_status(status) {
            Some(Stop::Event { .. }) => return Ok(Some(signals)),
            Some(Stop::Signal { signal, .. }) => {
                signals.push(signal);
                regs::resume(tid, 0)?;
            }
            Some(Stop::Syscall { .. }) => regs::resume(tid, 0)?,
            Some(Stop::Exited { .. }) | Some(Stop::Killed { .. }) => return Ok(None),
            None => {}
        }
    }
}

impl Tracer<'_> {
    /// Joins process `pid` (a thread-group id), probes it and lets it run on.
    pub fn attach(&mut self, pid: i32) -> Result<()> {
        let threads = seize_all_threads(pid)?;
        self.processes
            .insert(pid, Process::new(pid, true, self.step_over_policy));
        for (tid, signals) in &threads {
            let mut thread = Thread::new(pid);
            thread.pending_signals = signals.clone();
            self.threads.insert(*tid, thread);
        }
        self.sink.send(Record::ProcessStart {
            time_ns: self.sink.now_ns(),
            pid: pid as u32,
            parent_pid: None,
            cause: StartCause::Attach,
        });
        self.record_exec(pid);
        let injector = threads
            .iter()
            .map(|(tid, _)| *tid)
            .find(|tid| {
                regs::get_registers(*tid)
                    .map(|r| r.orig_rax == u64::MAX)
                    .unwrap_or(false)
            })
            .unwrap_or(pid);
        let maps = read_maps(pid).map_err(|e| Error::io(format!("/proc/{pid}/maps"), e))?;
        let anchor = maps
            .iter()
            .find(|m| m.executable && m.path.as_deref().is_some_and(|p| p.contains("libc.so")))
            .or_else(|| maps.iter().find(|m| m.executable))
            .map_or(0, |m| m.start);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.memory.use_thread(injector);
        }
        self.create_scratch(pid, injector, anchor)?;
        self.scan_modules(pid)?;
        for (tid, _) in threads {
            let _ = self.resume(tid);
        }
        Ok(())
    }
}
