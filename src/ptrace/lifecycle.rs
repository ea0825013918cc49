//! Threads and processes coming and going: clone, fork, vfork, exec, exit.

use crate::error::Result;
use crate::events::EventKind;
use crate::proc::status::{read_cmdline, read_status};
use crate::ptrace::regs;
use crate::ptrace::state::{Process, Thread};
use crate::ptrace::stop::{hand_back, wait_for_thread_until, Deadline, Event, Stop, STOP_TIMEOUT};
use crate::ptrace::thread_stack::clone_stack_top;
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{ExitKind, SnapshotReason, StartCause};

impl Tracer<'_> {
    pub(crate) fn on_new_child(&mut self, tid: i32, event: Event) -> Result<()> {
        let child = self.register_child(tid, event)?;
        let hooked = self
            .processes
            .get(&child)
            .is_some_and(|p| p.hooks.is_some());
        if event == Event::Fork && hooked && self.hold_first_stop(child) {
            self.rearm_fork_child(child);
        }
        if event == Event::Vfork && hooked {
            self.tag_vfork_child(tid, child);
        }
        // The child first: a parent killed meanwhile must not leave it stopped.
        if self.early_threads.remove(&child) {
            let _ = self.resume(child);
        }
        // Reaped already (killed on its own before this event): its end is handled now, as
        // if it came next. Unless the number has a process again, which is not this one.
        if let Some(end) = self.ended_early.remove(&child) {
            if !std::path::Path::new(&format!("/proc/{child}")).exists() {
                self.deferred.push_front(end);
            }
        }
        self.resume(tid)
    }

    /// Waits for a new child's first stop, unless it came already; it stays held (in
    /// `early_threads`) for `on_new_child` to resume. False if it ended instead.
    fn hold_first_stop(&mut self, child: i32) -> bool {
        if self.early_threads.contains(&child) {
            return true;
        }
        let deadline = Deadline::after(STOP_TIMEOUT);
        loop {
            let Ok(status) = wait_for_thread_until(child, &deadline) else {
                return false;
            };
            match Stop::from_wait_status(status) {
                Some(Stop::Event {
                    event: Event::Stop, ..
                }) => {
                    self.early_threads.insert(child);
                    return true;
                }
                Some(end @ (Stop::Exited { .. } | Stop::Killed { .. })) => {
                    hand_back(end);
                    return false;
                }
                Some(stop) => {
                    if let Stop::Signal { signal, .. } = stop {
                        if let Some(thread) = self.threads.get_mut(&child) {
                            thread.pending_signals.push(signal);
                        }
                    }
                    if regs::resume(child, 0).is_err() {
                        return false;
                    }
                }
                None => {}
            }
        }
    }

    /// Records the thread or process that `tid`'s clone, fork or vfork event announces.
    pub(crate) fn register_child(&mut self, tid: i32, event: Event) -> Result<i32> {
        let child = self.tracee.event_message(tid)? as i32;
        let parent_pid = self.thread(tid)?.pid;
        // A clone without CLONE_THREAD makes a process too; the kernel's Tgid tells.
        let is_thread = event == Event::Clone
            && read_status(child)
                .map(|s| s.tgid == parent_pid)
                .unwrap_or(true);
        if is_thread {
            self.threads.start(child, Thread::new(parent_pid));
            self.send(parent_pid, child, EventKind::ThreadStart);
            let registers = self.tracee.registers(tid).ok();
            if let Some(registers) = &registers {
                self.name_new_thread(parent_pid, child, registers);
            }
            let memory = &self.process(parent_pid)?.memory;
            if let Some(address) = registers.and_then(|r| clone_stack_top(&r, memory)) {
                self.send(parent_pid, child, EventKind::ThreadStack { address });
            }
        } else {
            let memory = self.tracee.open_memory(child);
            let mut process = Process::forked_from(self.process(parent_pid)?, child, memory);
            process.shares_parent_memory = event == Event::Vfork;
            self.processes.start(process);
            let mut thread = Thread::new(child);
            // The child's stack is a copy of the forking thread's, hijacked slots included.
            thread.shadow = self.thread(tid)?.shadow.fork_copy();
            self.threads.start(child, thread);
            let cause = if event == Event::Vfork {
                StartCause::Vfork
            } else {
                StartCause::Fork
            };
            self.send(
                child,
                child,
                EventKind::ProcessStart {
                    parent_pid: Some(parent_pid as u32),
                    cause,
                },
            );
            self.inherit_launcher_role(parent_pid, child);
            self.residency.forked(parent_pid, child);
            // The child has the parent's scratch page at the same address.
            if let Some(scratch) = &self.process(child)?.scratch {
                let address = scratch.base;
                self.send(child, child, EventKind::ScratchPage { address });
            }
            if event != Event::Vfork {
                self.snapshot_at_start(child, SnapshotReason::Fork);
            }
        }
        Ok(child)
    }

    pub(crate) fn on_exec(&mut self, pid: i32) -> Result<()> {
        // Before any event of the exec is sent: samples read until now are the old image's.
        self.residency.exec_begins(pid);
        self.finish_image(pid);
        if let Some(process) = self.processes.get(&pid) {
            let counters = process.counters;
            self.send(pid, pid, EventKind::ImageCounters { counters });
        }
        // Every other thread is gone; the execing thread now has the leader's id.
        self.threads.keep_only_leader(pid);
        let pending_signals = self
            .threads
            .end(pid)
            .map(|t| t.pending_signals)
            .unwrap_or_default();
        let mut thread = Thread::new(pid);
        thread.pending_signals = pending_signals;
        self.threads.start(pid, thread);
        let memory = self.tracee.open_memory(pid);
        match self.processes.get_mut(&pid) {
            Some(process) => process.reset_for_exec(memory),
            None => {
                let wrappers = self.mode == crate::ptrace::tracer::Mode::Attach;
                let process = Process::new(pid, wrappers, self.step_over_policy, memory);
                self.processes.start(process);
            }
        }
        self.record_exec(pid);
        self.snapshot_at_start(pid, SnapshotReason::Exec);
        self.setup_image(pid)?;
        self.resume(pid)
    }

    /// Records which program the process now runs, and its role in an MPI job.
    pub(crate) fn record_exec(&mut self, pid: i32) {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let argv = read_cmdline(pid).unwrap_or_default();
        self.send(
            pid,
            pid,
            EventKind::Exec {
                exe: exe.clone(),
                argv,
            },
        );
        self.residency.program_is(pid, &exe);
        self.record_role(pid, &exe);
    }

    pub(crate) fn on_thread_gone(&mut self, tid: i32, how: ExitKind) -> Result<()> {
        let Some(mut thread) = self.threads.end(tid) else {
            return Ok(());
        };
        let pending = thread.shadow.take_all();
        self.report_abandoned(thread.pid, tid, &pending);
        if let Some(process) = self.processes.get_mut(&thread.pid) {
            process.exiting_threads.remove(&tid);
        }
        if tid != thread.pid {
            self.flush_hooks(thread.pid);
            self.forget_thread_stack(thread.pid, tid);
            self.send(thread.pid, tid, EventKind::ThreadExit);
            return Ok(());
        }
        self.finish_image(tid);
        self.threads.end_all_of(tid);
        if let Some(process) = self.processes.end(tid) {
            let counters = process.counters;
            self.send(
                tid,
                tid,
                EventKind::ProcessExit {
                    status: how,
                    counters,
                },
            );
        }
        if tid == self.root_pid {
            self.root_exit = Some(how);
        }
        Ok(())
    }
}
