//! The event loop: one blocking waitpid(__WALL) for every supervised thread, each stop decoded
//! once and dispatched. Only this thread issues ptrace requests (`Tracer` is `!Send`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag};

use crate::breakpoints::table::StepOverPolicy;
use crate::error::{Error, Result};
use crate::events::{EventKind, EventSink, Residency};
use crate::failure::{test_fault, TestFault};
use crate::hooks::drain::{Drain, RingFull};
use crate::module::ModuleStore;
use crate::ptrace::capture::StackMode;
use crate::ptrace::mpi::MpiNames;
use crate::ptrace::signals;
use crate::ptrace::state::{Process, Thread};
use crate::ptrace::stop::{take_handed_back, Event, Stop, GROUP_STOP_SIGNALS};
use crate::ptrace::supervised::{Processes, Threads};
use crate::ptrace::tracee::{Ptrace, Tracee};
use crate::ptrace::wake_watch::WakeWatch;
use crate::trace::format::{Engine, ExitKind, SnapshotReason};

/// What memsup does when the user interrupts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// memsup launched the program: the program gets its own signals; memsup records on.
    Run,
    /// memsup joined running processes: Ctrl-C or --duration detaches, leaving them running.
    Attach,
}

pub struct Tracer<'a> {
    /// Registers, resumption and memory of the supervised threads.
    pub(super) tracee: Box<dyn Tracee>,
    pub(super) mode: Mode,
    /// Supervised processes and threads: read as maps, changed by lifecycle steps only.
    pub(super) processes: Processes,
    pub(super) threads: Threads,
    /// Threads whose first stop arrived before the event that created them.
    pub(super) early_threads: HashSet<i32>,
    /// Stops collected while stopping the world, handled before waiting again.
    pub(super) deferred: VecDeque<Stop>,
    /// The end of a thread or process reaped before its creator's clone/fork event came,
    /// replayed once that event registers it (`on_new_child`).
    pub(super) ended_early: HashMap<i32, Stop>,
    pub(super) sink: &'a EventSink,
    /// Snapshots asked of the residency sampler, or taken at an exit stop.
    pub(super) residency: &'a dyn Residency,
    /// The recording's module files, shared with the interpret stage's unwinders and symboliser.
    pub(super) modules: Arc<ModuleStore>,
    pub(super) root_pid: i32,
    pub(super) root_exit: Option<ExitKind>,
    pub(super) step_over_policy: StepOverPolicy,
    pub(super) stack_mode: StackMode,
    /// Attach mode: every requested process has been joined (later scans see new modules).
    attached: bool,
    /// Messages for the user, printed by the caller (one line each).
    pub(super) warnings: Vec<String>,
    /// Time spent taking snapshots a stopped process other than the launched one waits for
    /// (fork, exec, exit).
    pub(super) waiting_snapshot_ns: u64,
    /// The stop being handled: if memsup fails half-way, the detach settles it.
    pub(super) in_hand: Option<Stop>,
    /// Threads that did not stop in time for the last stop of every thread.
    pub(super) unresponsive: Vec<i32>,
    /// At detach: threads held at a ptrace event or syscall stop, still inside a system call
    /// that will complete on resume (a fork writes the child's id into rax): never used to
    /// run a remote call.
    pub(super) inside_event: HashSet<i32>,
    /// Threads single-stepped out of bytes a hook's jump overwrites whose step did not end in
    /// time: their step's trap, when it comes, is memsup's.
    pub(super) late_steps: HashSet<i32>,
    /// Threads joined by an attach still in progress: stopped, their stop already collected,
    /// so a detach after a failed attach must not wait for another.
    pub(super) joining: HashSet<i32>,
    /// What records allocator calls; the hook engine's drain when it is hooks.
    pub(super) engine: Engine,
    pub(super) drain: Option<Drain>,
    /// Unwind tables compiled for the hooks' stack walker, by module file.
    pub(super) hook_tables: crate::ptrace::hook_stacks::HookTables,
    /// The MPI function names probed so far, numbered.
    pub(super) mpi_names: MpiNames,
    /// Test-only failure to inject (`MEMSUP_TEST_FAULT`), attach mode only.
    test_fault: Option<TestFault>,
    _not_send: PhantomData<*const ()>,
}

impl<'a> Tracer<'a> {
    pub fn new(
        mode: Mode,
        root_pid: i32,
        sink: &'a EventSink,
        residency: &'a dyn Residency,
        modules: Arc<ModuleStore>,
    ) -> Tracer<'a> {
        Tracer::with_tracee(mode, root_pid, sink, residency, modules, Box::new(Ptrace))
    }

    /// A tracer acting through `tracee` (a fake one in tests).
    pub(crate) fn with_tracee(
        mode: Mode,
        root_pid: i32,
        sink: &'a EventSink,
        residency: &'a dyn Residency,
        modules: Arc<ModuleStore>,
        tracee: Box<dyn Tracee>,
    ) -> Tracer<'a> {
        Tracer {
            tracee,
            mode,
            processes: Processes::default(),
            threads: Threads::default(),
            early_threads: HashSet::new(),
            deferred: VecDeque::new(),
            ended_early: HashMap::new(),
            sink,
            residency,
            modules,
            root_pid,
            root_exit: None,
            step_over_policy: StepOverPolicy::Auto,
            stack_mode: StackMode::Full,
            attached: false,
            warnings: Vec::new(),
            waiting_snapshot_ns: 0,
            in_hand: None,
            unresponsive: Vec::new(),
            inside_event: HashSet::new(),
            late_steps: HashSet::new(),
            joining: HashSet::new(),
            engine: Engine::Int3,
            hook_tables: Default::default(),
            drain: None,
            mpi_names: MpiNames::default(),
            test_fault: test_fault().filter(|_| mode == Mode::Attach),
            _not_send: PhantomData,
        }
    }

    /// Forces a step-over mechanism for every probe planted from now on.
    pub fn set_step_over_policy(&mut self, policy: StepOverPolicy) {
        self.step_over_policy = policy;
    }

    /// Whole call stacks (the default) or the calling address only.
    pub fn set_stack_mode(&mut self, mode: StackMode) {
        self.stack_mode = mode;
    }

    /// Records allocator calls with `engine` (after `set_stack_mode`: hooks keep the caller,
    /// or mark stacks truncated).
    pub fn set_engine(&mut self, engine: Engine, ring_full: RingFull) {
        self.engine = engine;
        self.drain = (engine == Engine::Hooks).then(|| {
            let caller_only = self.stack_mode == StackMode::Caller;
            let drain = Drain::start(self.sink.clone(), caller_only, ring_full);
            drain.set_waker(signals::wake_tracer);
            self.residency.before_snapshots(drain.flusher());
            drain
        });
    }

    /// Attach mode: every requested process has been joined; modules found from now on are
    /// new to the program.
    pub fn mark_attached(&mut self) {
        self.attached = true;
    }

    /// The supervised processes' pids, in increasing order.
    pub fn supervised_pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self.processes.keys().copied().collect();
        pids.sort_unstable();
        pids
    }

    pub(super) fn is_attached(&self) -> bool {
        self.attached
    }

    /// How the first process ended (None if memsup detached from it).
    pub fn root_exit(&self) -> Option<ExitKind> {
        self.root_exit
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    pub(crate) fn warn(&mut self, pid: i32, message: String) {
        self.send(
            pid,
            pid,
            EventKind::Warning {
                message: message.clone(),
            },
        );
        self.warnings.push(message);
    }

    /// Sends an event of process `pid`, seen on its thread `tid`.
    pub(crate) fn send(&self, pid: i32, tid: i32, kind: EventKind) {
        self.sink.send(pid as u32, tid as u32, kind);
    }

    /// Runs until every supervised process is gone or memsup detached.
    pub fn run(&mut self) -> Result<()> {
        // A signal taken between the check below and waitpid still ends the wait.
        let _wake_watch = WakeWatch::start();
        while !self.processes.is_empty() {
            if let Some(signal) = signals::take_pending() {
                if self.on_memsup_signal(signal)? {
                    return Ok(());
                }
                continue;
            }
            self.serve_rendezvous_requests();
            if self.deferred.is_empty() {
                self.deferred.extend(take_handed_back());
            }
            let stop = match self.deferred.pop_front() {
                Some(stop) => stop,
                None => match waitpid(None, Some(WaitPidFlag::__WALL)) {
                    Ok(status) => match Stop::from_wait_status(status) {
                        Some(stop) => stop,
                        None => continue,
                    },
                    Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => break,
                    Err(errno) => return Err(Error::ptrace("waitpid", -1, errno)),
                },
            };
            self.in_hand = Some(stop);
            self.handle_or_recover(stop);
            self.in_hand = None;
            if let Some(fault) = self.test_fault {
                inject(fault)?;
            }
        }
        Ok(())
    }

    /// Returns true when memsup detached and recording is over.
    fn on_memsup_signal(&mut self, signal: i32) -> Result<bool> {
        match (self.mode, signal) {
            (Mode::Attach, libc::SIGINT | libc::SIGTERM | libc::SIGHUP | libc::SIGALRM) => {
                self.detach_all()?;
                Ok(true)
            }
            // Run mode: the terminal already sent SIGINT/SIGQUIT to the program too; a
            // SIGTERM or SIGHUP aimed at memsup is passed on to the program.
            (Mode::Run, libc::SIGTERM | libc::SIGHUP) => {
                // To the launched process while it lives, else to those still supervised;
                // never to a PID that was reaped and may belong to someone else now.
                let targets: Vec<i32> = if self.root_exit.is_none() {
                    vec![self.root_pid]
                } else {
                    self.processes.keys().copied().collect()
                };
                for pid in targets {
                    // SAFETY: kill has no memory effects.
                    unsafe { libc::kill(pid, signal) };
                }
                Ok(false)
            }
            // Another memsup thread failed: leave the processes as they were.
            (Mode::Attach, libc::SIGUSR2) if signals::failure_reported() => {
                self.detach_all()?;
                Ok(true)
            }
            // A smaps snapshot of every process, on the user's demand.
            (_, libc::SIGUSR1) => {
                self.residency.request_all(SnapshotReason::Signal);
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// Handles a stop; on failure the thread is resumed anyway so it is never left hanging.
    pub(super) fn handle_or_recover(&mut self, stop: Stop) {
        let tid = stop.tid();
        match self.handle(stop) {
            Ok(()) => {}
            // Maybe another thread or process is gone, maybe this one: try to resume it.
            Err(Error::ProcessGone(_)) => {
                if !matches!(stop, Stop::Exited { .. } | Stop::Killed { .. }) {
                    let _ = self.tracee.resume(tid, 0);
                }
            }
            Err(error) => {
                let pid = self.threads.process_of(tid).unwrap_or(tid);
                self.warn(pid, format!("thread {tid}: {error}"));
                if !matches!(stop, Stop::Exited { .. } | Stop::Killed { .. }) {
                    let _ = self.tracee.resume(tid, 0);
                }
            }
        }
    }

    pub(super) fn handle(&mut self, stop: Stop) -> Result<()> {
        let tid = stop.tid();
        let Some(pid) = self.threads.process_of(tid) else {
            self.before_its_creator(stop);
            return Ok(());
        };
        if let Some(process) = self.processes.get_mut(&pid) {
            process.counters.stops += 1;
            process.memory.use_thread(tid);
        }
        match stop {
            Stop::Exited { code, .. } => self.on_thread_gone(tid, ExitKind::Code(code)),
            Stop::Killed { signal, .. } => self.on_thread_gone(tid, ExitKind::Signal(signal)),
            Stop::Event { event, signal, .. } => self.on_event(tid, event, signal),
            Stop::Syscall { .. } => self.on_syscall_exit(tid),
            Stop::Signal { signal, .. } if signal == libc::SIGTRAP => self.on_trap(tid),
            Stop::Signal { signal, .. } => self.tracee.resume(tid, signal),
        }
    }

    /// A stop of a thread or process whose creator's clone/fork event has not been seen yet.
    fn before_its_creator(&mut self, stop: Stop) {
        let tid = stop.tid();
        match stop {
            Stop::Exited { .. } | Stop::Killed { .. } => {
                self.early_threads.remove(&tid);
                self.ended_early.insert(tid, stop);
            }
            // Killed (with its whole process) before its creator reported it: its creator may
            // never report it now, and held here it would keep the process from ever ending.
            // It runs none of the program's code any more, so it goes on at once.
            Stop::Event {
                event: Event::Exit, ..
            } => {
                self.early_threads.remove(&tid);
                let _ = self.tracee.resume(tid, 0);
            }
            // Held stopped until the event comes (`on_new_child`). An end kept for this
            // number belonged to an earlier thread or process.
            _ => {
                self.ended_early.remove(&tid);
                self.early_threads.insert(tid);
            }
        }
    }

    fn on_event(&mut self, tid: i32, event: Event, signal: i32) -> Result<()> {
        match event {
            Event::Clone | Event::Fork | Event::Vfork => self.on_new_child(tid, event),
            Event::Exec => self.on_exec(tid),
            Event::Seccomp => self.on_seccomp(tid),
            Event::Stop if GROUP_STOP_SIGNALS.contains(&signal) => self.listen(tid),
            Event::Exit => {
                self.snapshot_at_exit(tid);
                self.resume(tid)
            }
            Event::VforkDone => {
                // The parent runs on: its vfork child's calls are over.
                if let Ok(child) = self.tracee.event_message(tid) {
                    self.untag_vfork_child(child as i32);
                }
                self.resume(tid)
            }
            Event::Stop | Event::Other(_) => self.resume(tid),
        }
    }

    /// Resumes a thread and sends again (tgkill) the signals held back while memsup ran code
    /// in it. A signal given to PTRACE_CONT is delivered only from a signal-delivery stop; at
    /// an event stop (fork, exec, exit, interrupt) or a system call stop, where memsup often
    /// resumes, the kernel drops it silently: a SIGUSR2 sent during an attach was lost at the
    /// program's next fork. Sent again, each comes back as a signal stop of its own and is
    /// passed on there.
    pub(super) fn resume(&mut self, tid: i32) -> Result<()> {
        let Some(thread) = self.threads.get_mut(&tid) else {
            return self.tracee.resume(tid, 0);
        };
        let held = std::mem::take(&mut thread.pending_signals);
        thread.job_stopped = false;
        let pid = thread.pid;
        self.tracee.resume(tid, 0)?;
        for signal in held {
            self.tracee.signal_thread(pid, tid, signal);
        }
        Ok(())
    }

    /// Leaves a group-stopped thread in its stop, to report SIGCONT.
    pub(super) fn listen(&mut self, tid: i32) -> Result<()> {
        if let Some(thread) = self.threads.get_mut(&tid) {
            thread.job_stopped = true;
        }
        self.tracee.listen(tid)
    }

    pub(super) fn process(&self, pid: i32) -> Result<&Process> {
        self.processes.get(&pid).ok_or(Error::ProcessGone(pid))
    }

    pub(super) fn process_mut(&mut self, pid: i32) -> Result<&mut Process> {
        self.processes.get_mut(&pid).ok_or(Error::ProcessGone(pid))
    }

    pub(super) fn thread(&self, tid: i32) -> Result<&Thread> {
        self.threads.get(&tid).ok_or_else(|| unknown_thread(tid))
    }

    pub(super) fn thread_mut(&mut self, tid: i32) -> Result<&mut Thread> {
        self.threads
            .get_mut(&tid)
            .ok_or_else(|| unknown_thread(tid))
    }

    /// A thread and its process, both to change at once.
    pub(super) fn thread_and_process_mut(
        &mut self,
        tid: i32,
    ) -> Result<(&mut Thread, &mut Process)> {
        let thread = self
            .threads
            .get_mut(&tid)
            .ok_or_else(|| unknown_thread(tid))?;
        let pid = thread.pid;
        let process = self
            .processes
            .get_mut(&pid)
            .ok_or(Error::ProcessGone(pid))?;
        Ok((thread, process))
    }

    /// A process memsup starts supervising (its memory is the tracee's).
    pub(super) fn new_process(&mut self, pid: i32, probe_mapping_wrappers: bool) -> Process {
        let memory = self.tracee.open_memory(pid);
        Process::new(pid, probe_mapping_wrappers, self.step_over_policy, memory)
    }
}

fn unknown_thread(tid: i32) -> Error {
    Error::Internal(format!("thread {tid} is not supervised"))
}

/// Fails the way the tests asked, once a stop has been handled.
fn inject(fault: TestFault) -> Result<()> {
    match fault {
        TestFault::TracerPanic => panic!("test fault: the tracer fails after handling a stop"),
        TestFault::TracerError => Err(Error::Internal(
            "test fault: the event loop fails after handling a stop".into(),
        )),
        TestFault::WriterPanic
        | TestFault::AttachError
        | TestFault::JoinExit
        | TestFault::SnapshotExit
        | TestFault::SnapshotHold => Ok(()),
    }
}
