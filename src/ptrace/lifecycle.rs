//! Threads and processes coming and going: clone, fork, vfork, exec, exit.

use crate::error::Result;
use crate::proc::status::{read_cmdline, read_status};
use crate::ptrace::state::{Process, Thread};
use crate::ptrace::stop::Event;
use crate::ptrace::thread_stack::clone_stack_top;
use crate::ptrace::tracer::Tracer;
use crate::trace::format::{ExitKind, Record, SnapshotReason, StartCause};

impl Tracer<'_> {
    pub(crate) fn on_new_child(&mut self, tid: i32, event: Event) -> Result<()> {
        let child = self.register_child(tid, event)?;
        // The child first: a parent killed meanwhile must not leave it stopped.
        if self.early_threads.remove(&child) {
            let _ = self.resume(child);
        }
        self.resume(tid)
    }

    /// Records the thread or process that `tid`'s clone, fork or vfork event announces.
    pub(crate) fn register_child(&mut self, tid: i32, event: Event) -> Result<i32> {
        let child = self.tracee.event_message(tid)? as i32;
        let parent_pid = self.thread(tid)?.pid;
        let time_ns = self.sink.now_ns();
        // A clone without CLONE_THREAD makes a process too; the kernel's Tgid tells.
        let is_thread = event == Event::Clone
            && read_status(child)
                .map(|s| s.tgid == parent_pid)
                .unwrap_or(true);
        if is_thread {
            self.threads.insert(child, Thread::new(parent_pid));
            self.sink.send(Record::ThreadStart {
                time_ns,
                pid: parent_pid as u32,
                tid: child as u32,
            });
            let registers = self.tracee.registers(tid).ok();
            let memory = &self.process(parent_pid)?.memory;
            if let Some(address) = registers.and_then(|r| clone_stack_top(&r, memory)) {
                self.sink.send(Record::ThreadStack {
                    time_ns,
                    pid: parent_pid as u32,
                    tid: child as u32,
                    address,
                });
            }
        } else {
            let memory = self.tracee.open_memory(child);
            let mut process = Process::forked_from(self.process(parent_pid)?, child, memory);
            process.shares_parent_memory = event == Event::Vfork;
            self.processes.insert(child, process);
            let mut thread = Thread::new(child);
            // The child's stack is a copy of the forking thread's, hijacked slots included.
            thread.shadow = self.thread(tid)?.shadow.fork_copy();
            self.threads.insert(child, thread);
            let cause = if event == Event::Vfork {
                StartCause::Vfork
            } else {
                StartCause::Fork
            };
            self.sink.send(Record::ProcessStart {
                time_ns,
                pid: child as u32,
                parent_pid: Some(parent_pid as u32),
                cause,
            });
            // The child has the parent's scratch page at the same address.
            if let Some(scratch) = &self.process(child)?.scratch {
                self.sink.send(Record::ScratchPage {
                    time_ns,
                    pid: child as u32,
                    address: scratch.base,
                });
            }
        }
        Ok(child)
    }

    pub(crate) fn on_exec(&mut self, pid: i32) -> Result<()> {
        if let Some(process) = self.processes.get(&pid) {
            self.sink.send(Record::ImageCounters {
                pid: pid as u32,
                counters: process.counters,
            });
        }
        // Every other thread is gone; the execing thread now has the leader's id.
        self.threads
            .retain(|tid, thread| thread.pid != pid || *tid == pid);
        let pending_signals = self
            .threads
            .remove(&pid)
            .map(|t| t.pending_signals)
            .unwrap_or_default();
        let mut thread = Thread::new(pid);
        thread.pending_signals = pending_signals;
        self.threads.insert(pid, thread);
        let memory = self.tracee.open_memory(pid);
        match self.processes.get_mut(&pid) {
            Some(process) => process.reset_for_exec(memory),
            None => {
                let wrappers = self.mode == crate::ptrace::tracer::Mode::Attach;
                let process = Process::new(pid, wrappers, self.step_over_policy, memory);
                self.processes.insert(pid, process);
            }
        }
        self.record_exec(pid);
        // The new program's first snapshot (a launch or an attach has its start snapshot).
        self.sink.watched().request(pid, SnapshotReason::Exec);
        self.setup_image(pid)?;
        self.resume(pid)
    }

    /// Records which program the process now runs.
    pub(crate) fn record_exec(&mut self, pid: i32) {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let argv = read_cmdline(pid).unwrap_or_default();
        self.sink.send(Record::Exec {
            time_ns: self.sink.now_ns(),
            pid: pid as u32,
            exe,
            argv,
        });
    }

    pub(crate) fn on_thread_gone(&mut self, tid: i32, how: ExitKind) -> Result<()> {
        let Some(mut thread) = self.threads.remove(&tid) else {
            return Ok(());
        };
        let pending = thread.shadow.take_all();
        self.report_abandoned(thread.pid, tid, &pending);
        if let Some(process) = self.processes.get_mut(&thread.pid) {
            process.exiting_threads.remove(&tid);
        }
        let time_ns = self.sink.now_ns();
        if tid != thread.pid {
            self.sink.send(Record::ThreadExit {
                time_ns,
                pid: thread.pid as u32,
                tid: tid as u32,
            });
            return Ok(());
        }
        self.threads.retain(|_, t| t.pid != tid);
        if let Some(process) = self.processes.remove(&tid) {
            self.sink.send(Record::ProcessExit {
                time_ns,
                pid: tid as u32,
                status: how,
                counters: process.counters,
            });
        }
        if tid == self.root_pid {
            self.root_exit = Some(how);
        }
        Ok(())
    }
}
