//! Remote unwind of a C program compiled at test time: it stops itself with raise(SIGSTOP)
//! inside a known chain that passes through libc's qsort; the test copies its registers and
//! stack with ptrace and process_vm_readv, then walks the copy with the files on disk.

use std::io::IoSliceMut;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::sys::ptrace;
use nix::sys::signal::{kill, Signal};
use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use super::tests::{assert_chain, frame_names, unwinder_for_process};
use super::*;
use crate::proc::maps::{mapping_containing, read_maps};
use crate::symbols::elf::ElfFile;

/// main → level_01..06 → qsort → compare → level_07..12 → innermost → raise(SIGSTOP).
/// Each call is followed by a write, so that none becomes a tail jump.
const FIXTURE: &str = r#"
#include <signal.h>
#include <stdlib.h>
#define STEP(name, next) __attribute__((noinline, noclone)) void name(void) { next(); sink++; }
volatile int sink;
__attribute__((noinline, noclone)) void innermost(void) { raise(SIGSTOP); sink++; }
STEP(level_12, innermost) STEP(level_11, level_12) STEP(level_10, level_11)
STEP(level_09, level_10) STEP(level_08, level_09) STEP(level_07, level_08)
static int descended;
__attribute__((noinline, noclone)) int compare(const void *left, const void *right) {
    if (!descended) { descended = 1; level_07(); }
    sink++;
    return *(const int *)left - *(const int *)right;
}
__attribute__((noinline, noclone)) void level_06(void) {
    int values[8] = {5, 3, 7, 1, 8, 2, 6, 4};
    qsort(values, 8, sizeof values[0], compare);
    sink += values[0];
}
STEP(level_05, level_06) STEP(level_04, level_05) STEP(level_03, level_04)
STEP(level_02, level_03) STEP(level_01, level_02)
int main(void) { level_01(); return sink == 0; }
"#;

const INNER: [&str; 8] = [
    "innermost",
    "level_12",
    "level_11",
    "level_10",
    "level_09",
    "level_08",
    "level_07",
    "compare",
];
const OUTER: [&str; 7] = [
    "level_06", "level_05", "level_04", "level_03", "level_02", "level_01", "main",
];

/// Kills and reaps the fixture however the test ends.
struct Child(Pid);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGKILL);
        let _ = waitpid(self.0, None);
    }
}

fn compile(directory: &Path, flags: &[&str]) -> String {
    let source = directory.join("chain.c");
    std::fs::write(&source, FIXTURE).unwrap();
    let program = directory.join("chain");
    let status = Command::new("gcc")
        .args(["-O2", "-g0", "-o"])
        .arg(&program)
        .arg(&source)
        .args(flags)
        .status()
        .unwrap();
    assert!(status.success(), "gcc {flags:?} failed");
    program.to_str().unwrap().to_string()
}

/// Runs `program` traced until it stops itself, and copies its registers and stack.
fn run_to_stop(program: &str) -> (Child, StackSnapshot) {
    let mut command = Command::new(program);
    // SAFETY: one system call between fork and exec.
    unsafe {
        command.pre_exec(|| ptrace::traceme().map_err(std::io::Error::from));
    }
    let child = Child(Pid::from_raw(command.spawn().unwrap().id() as i32));
    // The exec stop, then raise(SIGSTOP)'s signal-delivery stop.
    assert!(matches!(
        waitpid(child.0, None).unwrap(),
        WaitStatus::Stopped(_, Signal::SIGTRAP)
    ));
    ptrace::cont(child.0, None).unwrap();
    assert_eq!(
        waitpid(child.0, None).unwrap(),
        WaitStatus::Stopped(child.0, Signal::SIGSTOP)
    );
    let registers = ptrace::getregs(child.0).unwrap();
    let maps = read_maps(child.0.as_raw()).unwrap();
    let stack_end = mapping_containing(&maps, registers.rsp).unwrap().end;
    let mut stack = vec![0u8; (stack_end - registers.rsp).min(64 * 1024) as usize];
    let remote = RemoteIoVec {
        base: registers.rsp as usize,
        len: stack.len(),
    };
    let read = process_vm_readv(child.0, &mut [IoSliceMut::new(&mut stack)], &[remote]).unwrap();
    stack.truncate(read);
    let snapshot = StackSnapshot {
        ip: registers.rip,
        at_function_entry: false,
        sp: registers.rsp,
        bp: registers.rbp,
        stack,
    };
    (child, snapshot)
}

fn check_fixture(flags: &[&str]) {
    let directory = tempfile::tempdir().unwrap();
    let program = compile(directory.path(), flags);
    let (child, snapshot) = run_to_stop(&program);
    let unwinder = unwinder_for_process(child.0.as_raw());
    let stack = unwinder.unwind(&snapshot, &mut |_| None);
    drop(child);

    let elf = ElfFile::open(&program).unwrap();
    let bias = unwinder
        .modules
        .iter()
        .find(|module| module.path == program)
        .unwrap()
        .bias;
    let names = frame_names(&stack.frames, &elf, bias);
    assert_chain(&names, &INNER);
    let compare_at = names
        .iter()
        .position(|name| name.as_deref() == Some("compare"))
        .unwrap();
    let level_06_at = names
        .iter()
        .position(|name| name.as_deref() == Some("level_06"))
        .unwrap();
    assert_chain(&names, &OUTER);
    // Between the comparator and its caller: qsort's own frames, from libc.so (dynamic) or
    // from the program itself (static).
    let qsort_frames = &stack.frames[compare_at + 1..level_06_at];
    assert!(!qsort_frames.is_empty(), "{names:#?}");
    for &frame in qsort_frames {
        let (module, _) = unwinder.module_at(frame).unwrap();
        assert!(module.contains("libc.so") || module == program, "{module}");
    }
    // The walk ends at _start, whose CFI marks the outermost frame.
    assert!(!stack.truncated, "{names:#?}");
}

#[test]
fn unwinds_c_fixture_without_frame_pointers() {
    check_fixture(&["-fomit-frame-pointer"]);
}

#[test]
fn unwinds_c_fixture_with_frame_pointers() {
    check_fixture(&["-fno-omit-frame-pointer"]);
}

#[test]
fn unwinds_static_c_fixture_without_frame_pointers() {
    check_fixture(&["-fomit-frame-pointer", "-static"]);
}

#[test]
fn unwinds_static_c_fixture_with_frame_pointers() {
    check_fixture(&["-fno-omit-frame-pointer", "-static"]);
}

/// No CFI for the program's own functions: their frames are walked with frame pointers,
/// libc's with CFI.
#[test]
fn unwinds_c_fixture_without_cfi_by_frame_pointers() {
    check_fixture(&[
        "-fno-omit-frame-pointer",
        "-fno-asynchronous-unwind-tables",
        "-fno-unwind-tables",
    ]);
}
