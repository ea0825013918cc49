//! fixtures/mid_prologue.c: `memsup attach` meets a thread that stands after the first
//! instruction of `malloc`, inside the bytes the hook's jump overwrites. The test puts it
//! there itself (an int3 at malloc, then single steps under its own ptrace). Stopped there
//! (SIGSTOP), the thread is stepped out before the jump is written and malloc is hooked; in a
//! signal handler that interrupted it there, it would go back into the jump, so malloc keeps
//! an int3 probe. Either way the program runs its 100 calls intact and memsup records the 99
//! that begin after the attach. Without the check, the thread ran the jump's tail: SIGILL,
//! SIGSEGV or SIGTRAP.

use std::time::Duration;

use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_window::AttachWindow;
use crate::common::interactive::send_signal;
use crate::common::live_process::{process_state, read_byte, wait_until};
use crate::common::report::{processes, report_json};
use crate::common::*;

const NAME: &str = "mid_prologue";
const END_BRANCH: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
/// A hook's jump: its first instruction after any `endbr64` covers at least these bytes.
const JUMP_BYTES: u64 = 5;

/// How the worker is held inside malloc's first bytes while memsup attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Stopped there by job control.
    Stopped,
    /// In a SIGUSR1 handler that interrupted it there.
    InHandler,
}

/// The fixture, with its worker stepped to one instruction into malloc and held there.
/// Returns the program, malloc's address and malloc's first bytes as they were.
fn hold_worker_inside_malloc(fixture: &std::path::Path, held: Held) -> (Running, u64, Vec<u8>) {
    let start = Start {
        piped_stdin: true,
        extra_lines: 2,
        ..Start::default()
    };
    let mut program = start_announced(fixture, NAME, start);
    let field = |index: usize, label: &str| -> u64 {
        program.extra[index]
            .strip_prefix(&format!("{NAME}: {label} "))
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("the {label} line: {:?}", program.extra[index]))
    };
    let malloc = field(0, "malloc");
    let worker = Pid::from_raw(field(1, "worker") as i32);
    let original: Vec<u8> = (0..16)
        .map(|i| read_byte(program.pid, malloc + i))
        .collect();
    ptrace::seize(worker, ptrace::Options::empty()).expect("seizing the worker");
    ptrace::interrupt(worker).expect("interrupting the worker");
    wait_for_stop(worker);
    let word = ptrace::read(worker, malloc as _).expect("reading malloc") as u64;
    let with_int3 = (word & !0xff) | 0xcc;
    ptrace::write(worker, malloc as _, with_int3 as _).expect("planting an int3");
    ptrace::cont(worker, None).expect("resuming the worker");
    program.write_stdin(b"go\n");
    wait_for_stop(worker);
    // The original word back.
    ptrace::write(worker, malloc as _, word as _).expect("removing the int3");
    let mut registers = ptrace::getregs(worker).expect("the worker's registers");
    assert_eq!(
        registers.rip,
        malloc + 1,
        "the worker stopped at malloc's int3"
    );
    registers.rip = malloc;
    ptrace::setregs(worker, registers).expect("rewinding the worker");
    let patch_start = malloc
        + if original.starts_with(&END_BRANCH) {
            END_BRANCH.len() as u64
        } else {
            0
        };
    while ptrace::getregs(worker).expect("the worker's registers").rip <= patch_start {
        ptrace::step(worker, None).expect("stepping the worker");
        wait_for_stop(worker);
    }
    let rip = ptrace::getregs(worker).expect("the worker's registers").rip;
    assert!(
        rip - patch_start < JUMP_BYTES,
        "malloc's first instruction is {} bytes: no thread can stand inside its jump",
        rip - patch_start
    );
    let signal = match held {
        Held::Stopped => Signal::SIGSTOP,
        Held::InHandler => Signal::SIGUSR1,
    };
    ptrace::detach(worker, signal).expect("letting the worker go");
    if held == Held::Stopped {
        wait_until("the program stops", Duration::from_secs(10), || {
            process_state(program.pid) == "T"
        });
    }
    (program, malloc, original)
}

/// Waits for the next stop of `tid`, which must be a stop, not its end.
fn wait_for_stop(tid: Pid) {
    match waitpid(tid, Some(WaitPidFlag::__WALL)).expect("waiting for the worker") {
        WaitStatus::Stopped(..) | WaitStatus::PtraceEvent(..) => {}
        other => panic!("the worker did not stop: {other:?}"),
    }
}

/// Attaches with hooks, waits until malloc is probed, lets the worker go on, and lets the
/// program finish under memsup. Returns the image.
fn attach_and_finish(mut program: Running, held: Held, malloc: u64, original: &[u8]) -> Value {
    let pid = program.pid;
    let window = AttachWindow::open(&[pid], &["-q", "--engine", "hooks"]);
    wait_until("malloc is probed", Duration::from_secs(60), || {
        (0..original.len() as u64).any(|i| read_byte(pid, malloc + i) != original[i as usize])
    });
    match held {
        // Until memsup has put the process back in its group-stop, a SIGCONT may come too
        // early and be undone: sent until the program runs.
        Held::Stopped => wait_until("the program runs on", Duration::from_secs(60), || {
            send_signal(pid, libc::SIGCONT);
            std::thread::sleep(Duration::from_millis(20));
            !matches!(process_state(pid).as_str(), "T" | "t")
        }),
        Held::InHandler => program.write_stdin(b"release\n"),
    }
    let rest = program.finish_cleanly();
    assert_eq!(rest, format!("{NAME}: 100 blocks, every block intact\n"));
    let (_, directory) = window.end(false);
    let report = report_json(&directory.path().join("attach.msup"));
    processes(&report)[0].clone()
}

fn malloc_site(image: &Value) -> String {
    image["probe_sites"]
        .as_array()
        .and_then(|sites| sites.iter().find(|site| site["function"] == "malloc"))
        .and_then(|site| site["implementation"].as_str())
        .unwrap_or_else(|| panic!("no malloc probe site: {:#}", image["probe_sites"]))
        .to_string()
}

/// The calls after the attach: the worker's malloc in progress is not seen; its free is of a
/// block from before the attach that the heap census did not find (it did not exist yet).
/// The other unknown free is the worker's thread cache, freed at its exit.
fn assert_calls(image: &Value) {
    assert_eq!(number(image, "/calls/malloc"), 99, "{image:#}");
    // Those 99 blocks of 4000 bytes, each freed.
    let class = image["size_histogram"]
        .as_array()
        .and_then(|classes| classes.iter().find(|class| class["min_bytes"] == 2048))
        .unwrap_or_else(|| panic!("no 2-4 KiB class: {:#}", image["size_histogram"]));
    assert_eq!(
        (&class["allocations"], &class["bytes"], &class["live"]),
        (&json!(99), &json!(396_000), &json!(0)),
        "{class}"
    );
    assert_eq!(number(image, "/unknown_frees"), 2, "{image:#}");
    let sources = "/unknown_free_sources";
    assert_eq!(number(image, &format!("{sources}/before_attach")), 1);
    assert_eq!(
        number(image, &format!("{sources}/before_attach_in_census")),
        0
    );
    assert_eq!(number(image, &format!("{sources}/thread_exit")), 1);
}

/// glibc's malloc starts with one-byte pushes; musl's is a jump, which no thread stands in.
fn glibc_variants(check: impl Fn(&std::path::Path)) {
    for_each_variant(NAME, |variant, fixture| {
        if variant != Variant::Musl {
            check(fixture);
        }
    });
}

#[test]
fn a_thread_stopped_inside_the_bytes_of_a_hook_jump_is_stepped_out_first() {
    glibc_variants(|fixture| {
        let (program, malloc, original) = hold_worker_inside_malloc(fixture, Held::Stopped);
        let image = attach_and_finish(program, Held::Stopped, malloc, &original);
        assert_eq!(malloc_site(&image), "hook");
        assert_calls(&image);
    });
}

#[test]
fn a_handler_that_would_return_inside_the_bytes_of_a_hook_jump_keeps_an_int3() {
    glibc_variants(|fixture| {
        let (program, malloc, original) = hold_worker_inside_malloc(fixture, Held::InHandler);
        let image = attach_and_finish(program, Held::InHandler, malloc, &original);
        let site = malloc_site(&image);
        assert!(
            site.starts_with("int3, ")
                && site.ends_with("goes back inside the bytes its jump would overwrite)"),
            "{site}"
        );
        assert_calls(&image);
    });
}
