//! `memsup snapshot`: one look at a running process. Every thread is seized and interrupted;
//! its registers, a copy of its stack and /proc/PID/smaps are read while it is stopped; then
//! every thread is let go. Nothing is run in the process and nothing is written to it: no
//! scratch page, no probe. What was seen goes to the recording's sink once the process runs
//! again, so the time it is stopped is only the reads.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use libc::user_regs_struct;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::census;
use crate::error::{Error, Result};
use crate::events::{EventKind, EventSink, RawStack};
use crate::failure::TestFault;
use crate::module::loaded::loaded_modules;
use crate::module::ModuleStore;
use crate::proc::maps::{mapping_containing, read_maps, MapEntry};
use crate::proc::status::{read_cmdline, read_tasks};
use crate::proc::task::{read_task_state, TaskState};
use crate::ptrace::attach::{let_go, seize_all_threads, JoinedThread};
use crate::ptrace::capture::{read_stack_copy, StackRegisters, MAX_WINDOW};
use crate::ptrace::regs;
use crate::ptrace::roles::{is_mpi_program_module, role_at_start};
use crate::ptrace::tracee::Ptrace;
use crate::trace::format::{ExitKind, SnapshotReason, StartCause, ThreadActivity};

/// Where glibc's malloc is in the process, or why its heap will not be read.
type AllocatorFound = std::result::Result<census::Allocator, String>;

/// What a snapshot of one process found, and what it cost the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// From the first thread seized to the last one let go.
    pub stopped: Duration,
    pub threads: u32,
}

/// One thread as it was stopped.
struct StoppedThread {
    tid: i32,
    registers: user_regs_struct,
    group_stopped: bool,
    stack: RawStack,
}

/// What was read while the process was stopped.
struct Seen {
    maps: Vec<MapEntry>,
    threads: Vec<StoppedThread>,
    smaps: EventKind,
    census: EventKind,
}

/// Takes the snapshot of process `pid` (a thread-group id) and sends it to `sink` as the
/// events of a process that starts, shows its threads and memory, and is detached.
pub fn take(pid: i32, sink: &EventSink, modules: &ModuleStore) -> Result<Taken> {
    // Before the stop: once stopped, every thread reads as `t` in ptrace_stop.
    let kernel_states = kernel_states(pid);
    // Where malloc is and its symbols: files read before the stop, not during it.
    let allocator = read_maps(pid)
        .map_err(|error| error.to_string())
        .and_then(|maps| census::locate(pid, &maps, modules));
    let started = Instant::now();
    let joined = seize_all_threads(pid)?;
    match crate::failure::test_fault() {
        Some(TestFault::SnapshotExit) => kill_while_held(pid, &joined),
        // memsup killed while it holds the process: the kernel lets its threads go.
        Some(TestFault::SnapshotHold) => loop {
            std::thread::sleep(Duration::from_secs(1));
        },
        _ => {}
    }
    let seen = look(pid, &joined, &allocator);
    let_go(joined);
    let stopped = started.elapsed();
    let seen = seen?;
    let threads = seen.threads.len() as u32;
    send(pid, seen, &kernel_states, sink, modules);
    let stopped_ns = stopped.as_nanos() as u64;
    let (pid, tid) = (pid as u32, pid as u32);
    sink.send(
        pid,
        tid,
        EventKind::SnapshotStop {
            stopped_ns,
            threads,
        },
    );
    let exit = EventKind::ProcessExit {
        status: ExitKind::Detached,
        counters: Default::default(),
    };
    sink.send(pid, tid, exit);
    Ok(Taken { stopped, threads })
}

/// Test-only: kills the held process and reaps its threads (the leader last: it is reported
/// once the others are gone), so that the snapshot meets a process that exited.
fn kill_while_held(pid: i32, joined: &[JoinedThread]) {
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let mut tids: Vec<i32> = joined.iter().map(|thread| thread.tid).collect();
    tids.sort_by_key(|&tid| tid == pid);
    for tid in tids {
        let flags = Some(WaitPidFlag::__WALL);
        loop {
            match waitpid(Pid::from_raw(tid), flags) {
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => break,
                // Its exit event stop: let it finish dying.
                Ok(_) => {
                    let _ = regs::resume(tid, 0);
                }
            }
        }
    }
}

/// The kernel's view of every thread of `pid` now.
fn kernel_states(pid: i32) -> HashMap<i32, TaskState> {
    read_tasks(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|tid| Some((tid, read_task_state(pid, tid)?)))
        .collect()
}

/// Registers and stacks of the stopped threads, the mappings and smaps. A process whose
/// threads all vanish meanwhile exited during the snapshot.
fn look(pid: i32, joined: &[JoinedThread], allocator: &AllocatorFound) -> Result<Seen> {
    let exited = || Error::ProcessExited(pid);
    // Through a live thread: a main thread ended by pthread_exit shows no mappings.
    let reader = joined.first().ok_or_else(exited)?.tid;
    let maps = read_maps(reader).map_err(|_| exited())?;
    let mut tracee = Ptrace;
    let mut threads = Vec::new();
    for thread in joined {
        let registers = match regs::get_registers(thread.tid) {
            Ok(registers) => registers,
            // Killed while stopped: it is no longer one of the process's threads.
            Err(Error::ProcessGone(_)) => continue,
            Err(error) => return Err(error),
        };
        let start = StackRegisters {
            ip: registers.rip,
            sp: registers.rsp,
            bp: registers.rbp,
            at_function_entry: false,
        };
        let copy = mapping_containing(&maps, registers.rsp).and_then(|mapping| {
            let range = mapping.start..mapping.end;
            read_stack_copy(&mut tracee, thread.tid, start, &range, MAX_WINDOW)
        });
        let stack = match copy {
            Some(copy) => RawStack::Copy(Box::new(copy)),
            None => RawStack::Uncopied(registers.rip),
        };
        threads.push(StoppedThread {
            tid: thread.tid,
            registers,
            group_stopped: thread.group_stopped,
            stack,
        });
    }
    if threads.is_empty() {
        return Err(exited());
    }
    threads.sort_by_key(|thread| thread.tid);
    let mut buffer = Vec::new();
    let smaps = crate::sampler::snapshot::take(pid, SnapshotReason::Start, &mut buffer)
        .ok_or_else(exited)?;
    let pointers: Vec<census::ThreadPointer> = threads
        .iter()
        .map(|thread| census::ThreadPointer {
            tid: thread.tid,
            fs_base: thread.registers.fs_base,
        })
        .collect();
    let stack_pointers: Vec<u64> = threads.iter().map(|thread| thread.registers.rsp).collect();
    let census = census::take(pid, &maps, allocator, &pointers, &stack_pointers);
    Ok(Seen {
        maps,
        threads,
        smaps,
        census: EventKind::HeapCensus(census),
    })
}

/// The snapshot as events: the process, its program and modules, where each thread's stack
/// is, each thread's state and stack, then its memory.
fn send(
    pid: i32,
    seen: Seen,
    kernel_states: &HashMap<i32, TaskState>,
    sink: &EventSink,
    modules: &ModuleStore,
) {
    let process = pid as u32;
    let start = EventKind::ProcessStart {
        parent_pid: None,
        cause: StartCause::Attach,
    };
    sink.send(process, process, start);
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_default();
    let argv = read_cmdline(pid).unwrap_or_default();
    let role = role_at_start(pid, &exe);
    sink.send(process, process, EventKind::Exec { exe, argv });
    if let Some(role) = role.clone() {
        sink.send(process, process, EventKind::ProcessRole(role));
    }
    let mut is_mpi_program = false;
    for module in loaded_modules(&seen.maps) {
        let found = modules.of_process(pid, &module.path, module.inode);
        let bias = found.and_then(|found| {
            let elf = found.file.elf()?;
            is_mpi_program |= is_mpi_program_module(&module.path, elf);
            Ok(module.load_bias(elf))
        });
        let kind = match bias {
            Ok(bias) => EventKind::Module {
                path: module.path.clone(),
                inode: module.inode,
                start: module.start,
                end: module.end,
                bias,
            },
            // Its frames stay unnamed; the rest of the snapshot does not depend on it.
            Err(error) => EventKind::Warning {
                message: format!(
                    "{}: cannot be read, its frames stay unnamed: {error}",
                    module.path
                ),
            },
        };
        sink.send(process, process, kind);
    }
    if role.is_none() && is_mpi_program {
        let singleton = crate::platform::mpi_roles::singleton();
        sink.send(process, process, EventKind::ProcessRole(singleton));
    }
    for thread in seen.threads.iter().filter(|thread| thread.tid != pid) {
        let address = thread.registers.rsp;
        sink.send(
            process,
            thread.tid as u32,
            EventKind::ThreadStack { address },
        );
    }
    for thread in seen.threads {
        let kernel = kernel_states.get(&thread.tid);
        let kernel_state = kernel.map_or('?', |state| state.state);
        let state = EventKind::ThreadState {
            activity: activity(&thread.registers, thread.group_stopped, kernel_state),
            kernel_state,
            wchan: kernel.map(|state| state.wchan.clone()).unwrap_or_default(),
            stack: thread.stack,
        };
        sink.send(process, thread.tid as u32, state);
    }
    sink.send(process, process, seen.smaps);
    sink.send(process, process, seen.census);
}

/// What a thread was doing, from its registers at the stop: a thread stopped inside a
/// system call keeps the call's number in orig_rax (the kernel restarts the call when it
/// resumes); in user code orig_rax is -1.
pub fn activity(
    registers: &user_regs_struct,
    group_stopped: bool,
    kernel_state: char,
) -> ThreadActivity {
    if group_stopped || kernel_state == 'T' {
        return ThreadActivity::Stopped;
    }
    match i32::try_from(registers.orig_rax as i64) {
        Ok(number) if number >= 0 => ThreadActivity::SystemCall(number as u32),
        _ => ThreadActivity::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registers(orig_rax: u64) -> user_regs_struct {
        // SAFETY: user_regs_struct is plain integers; all zeroes is a valid value.
        let mut registers: user_regs_struct = unsafe { std::mem::zeroed() };
        registers.orig_rax = orig_rax;
        registers
    }

    #[test]
    fn activity_comes_from_orig_rax_unless_job_control_stopped_the_thread() {
        assert_eq!(
            activity(&registers(0), false, 'S'),
            ThreadActivity::SystemCall(0)
        );
        assert_eq!(
            activity(&registers(230), false, 'S'),
            ThreadActivity::SystemCall(230)
        );
        assert_eq!(
            activity(&registers(u64::MAX), false, 'R'),
            ThreadActivity::Running
        );
        assert_eq!(activity(&registers(0), true, 'S'), ThreadActivity::Stopped);
        assert_eq!(
            activity(&registers(u64::MAX), false, 'T'),
            ThreadActivity::Stopped
        );
    }
}
