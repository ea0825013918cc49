//! Stack copies at malloc's entry in a real program, for the differential test: the program
//! runs traced to its ELF entry (where its libraries are mapped), then with an int3 at
//! libc's `malloc`; at every `every`-th call, in any of its threads, the registers and the
//! whole stack mapping above rsp are copied, with the modules mapped at that moment, as
//! the hook would see them.

use std::io::IoSliceMut;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sys::ptrace;
use nix::sys::signal::{kill, Signal};
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::module::loaded::{of_process, LoadedModule};
use crate::module::ModuleStore;
use crate::proc::auxv::read_auxv_value;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::unwind::StackSnapshot;

const AT_ENTRY: u64 = 9;
const INT3: u8 = 0xcc;

/// Kills and reaps the traced program however the test ends.
struct Child(Pid);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGKILL);
        let _ = waitpid(self.0, None);
    }
}

/// How a traced run went.
#[derive(Debug, Default)]
pub struct Run {
    pub malloc_calls: u64,
    pub exit_status: Option<i32>,
}

/// Puts a one-byte int3 at `address`, returning the word it replaced.
fn insert_int3(pid: Pid, address: u64) -> u64 {
    let word = ptrace::read(pid, address as ptrace::AddressType).unwrap() as u64;
    let patched = (word & !0xff) | u64::from(INT3);
    ptrace::write(pid, address as ptrace::AddressType, patched as i64).unwrap();
    word
}

fn restore(pid: Pid, address: u64, word: u64) {
    ptrace::write(pid, address as ptrace::AddressType, word as i64).unwrap();
}

/// Continues `pid` until a stop at an int3 (rip one past it) or exit; other signals are
/// delivered to the program. Returns rip - 1 at the int3, or None at exit.
fn run_to_trap(pid: Pid, run: &mut Run) -> Option<u64> {
    let mut deliver = None;
    loop {
        ptrace::cont(pid, deliver).unwrap();
        match waitpid(pid, None).unwrap() {
            WaitStatus::Exited(_, status) => {
                run.exit_status = Some(status);
                return None;
            }
            WaitStatus::Signaled(_, signal, _) => panic!("the program died of {signal}"),
            WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                return Some(ptrace::getregs(pid).unwrap().rip - 1);
            }
            WaitStatus::Stopped(_, signal) => deliver = Some(signal),
            other => panic!("unexpected stop {other:?}"),
        }
    }
}

/// Executes the instruction at `address` (where an int3 is) with its own bytes `word`,
/// then puts the int3 back. A signal arriving meanwhile is delivered: its handler runs
/// first, and the instruction traps again when it returns.
fn step_over(pid: Pid, address: u64, word: u64) {
    restore(pid, address, word);
    let mut deliver = None;
    loop {
        ptrace::step(pid, deliver).unwrap();
        match waitpid(pid, Some(WaitPidFlag::__WALL)).unwrap() {
            WaitStatus::Stopped(_, Signal::SIGTRAP) => break,
            WaitStatus::Stopped(_, signal) => deliver = Some(signal),
            other => panic!("unexpected stop {other:?} stepping"),
        }
    }
    insert_int3(pid, address);
}

/// The address of `malloc` in the libc `modules` map.
fn malloc_address(store: &ModuleStore, modules: &[LoadedModule]) -> u64 {
    let libc = modules
        .iter()
        .find(|module| module.path.contains("/libc.so"))
        .expect("the program maps libc");
    let file = store.get(&libc.path).unwrap();
    let elf = file.elf().unwrap();
    let malloc = elf.find_functions(&["malloc"]);
    malloc.first().expect("libc exports malloc").address + libc.load_bias(elf)
}

/// Copies the registers and the stack from rsp to the end of its mapping.
fn snapshot(pid: Pid) -> StackSnapshot {
    let registers = ptrace::getregs(pid).unwrap();
    let maps = read_maps(pid.as_raw()).unwrap();
    let end = mapping_containing(&maps, registers.rsp).unwrap().end;
    let mut stack = vec![0u8; (end - registers.rsp) as usize];
    let remote = RemoteIoVec {
        base: registers.rsp as usize,
        len: stack.len(),
    };
    let read = process_vm_readv(pid, &mut [IoSliceMut::new(&mut stack)], &[remote]).unwrap();
    stack.truncate(read);
    StackSnapshot {
        ip: registers.rip,
        at_function_entry: true,
        sp: registers.rsp,
        bp: registers.rbp,
        stack,
    }
}

/// Runs `command` traced; at every `every`-th malloc calls `visit` with the stack copy,
/// the modules mapped then, and whether a thread other than the main one called (the
/// thread is stopped meanwhile).
pub fn capture_mallocs(
    mut command: Command,
    store: &ModuleStore,
    every: u64,
    visit: &mut dyn FnMut(&StackSnapshot, &[LoadedModule], bool),
) -> Run {
    // Its own process group: waiting for any of its threads (-pgid) must not reap the
    // children of other tests running in this process.
    command.process_group(0);
    // SAFETY: one system call between fork and exec.
    unsafe {
        command.pre_exec(|| ptrace::traceme().map_err(std::io::Error::from));
    }
    let child = Child(Pid::from_raw(command.spawn().unwrap().id() as i32));
    let pid = child.0;
    assert!(matches!(
        waitpid(pid, None).unwrap(),
        WaitStatus::Stopped(_, Signal::SIGTRAP)
    ));
    ptrace::setoptions(
        pid,
        ptrace::Options::PTRACE_O_EXITKILL | ptrace::Options::PTRACE_O_TRACECLONE,
    )
    .unwrap();
    let mut run = Run::default();

    // To the program's entry: the dynamic linker has mapped libc by then.
    let entry = read_auxv_value(pid.as_raw(), AT_ENTRY).unwrap().unwrap();
    let entry_word = insert_int3(pid, entry);
    assert_eq!(run_to_trap(pid, &mut run), Some(entry));
    restore(pid, entry, entry_word);
    let mut registers = ptrace::getregs(pid).unwrap();
    registers.rip = entry;
    ptrace::setregs(pid, registers).unwrap();

    let modules = of_process(pid.as_raw()).unwrap();
    let malloc = malloc_address(store, &modules);
    let malloc_word = insert_int3(pid, malloc);
    // Every thread stops on its own; the one that stopped is resumed before the next wait.
    let mut resume = Some((pid, None));
    loop {
        if let Some((thread, signal)) = resume.take() {
            // A thread may have exited meanwhile (the process is ending).
            let _ = ptrace::cont(thread, signal);
        }
        let any_thread = Pid::from_raw(-pid.as_raw());
        match waitpid(any_thread, Some(WaitPidFlag::__WALL)).unwrap() {
            WaitStatus::Exited(thread, status) if thread == pid => {
                run.exit_status = Some(status);
                return run;
            }
            WaitStatus::Signaled(thread, signal, _) if thread == pid => {
                panic!("the program died of {signal}")
            }
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {}
            WaitStatus::PtraceEvent(thread, ..) => resume = Some((thread, None)),
            WaitStatus::Stopped(thread, Signal::SIGTRAP) => {
                let mut registers = ptrace::getregs(thread).unwrap();
                assert_eq!(
                    registers.rip - 1,
                    malloc,
                    "an int3 the test did not put there"
                );
                registers.rip = malloc;
                ptrace::setregs(thread, registers).unwrap();
                run.malloc_calls += 1;
                if run.malloc_calls % every == 0 {
                    // dlopen maps modules as the program runs.
                    let modules = of_process(pid.as_raw()).unwrap();
                    visit(&snapshot(thread), &modules, thread != pid);
                }
                step_over(thread, malloc, malloc_word);
                resume = Some((thread, None));
            }
            // A new thread's first stop.
            WaitStatus::Stopped(thread, Signal::SIGSTOP) => resume = Some((thread, None)),
            WaitStatus::Stopped(thread, signal) => resume = Some((thread, Some(signal))),
            other => panic!("unexpected stop {other:?}"),
        }
    }
}
