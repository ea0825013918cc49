//! fixtures/code_patcher.c: a program overwrites the first byte of libc's shmdt while memsup
//! is attached (as runtime code patchers such as UCX do to the mapping functions memsup probes
//! in attach mode). At detach memsup must leave that byte alone, count a foreign patch, and
//! restore every other byte of code. The patcher finds memsup's int3 there, or the first
//! byte of the hook engine's jump: either way it is a foreign patch over memsup's.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Output, Stdio};
use std::thread;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::engine::suite_engine_is_hooks;
use crate::common::live_process::{
    assert_code_unchanged_except, executable_mappings, read_byte, tracer_pid, wait_until,
};
use crate::common::report::report_json;
use crate::common::run::{clean_command, memsup_binary, wait_with_timeout};
use crate::common::*;

const INT3: u8 = 0xcc;
/// The first byte of the hook engine's `jmp rel32` over an entry.
const JUMP: u8 = 0xe9;
const RET: u8 = 0xc3;
/// Generous: the machine may be shared and busy.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The fixture running natively, and the address of shmdt its announcement gave.
struct Patcher {
    program: Running,
    shmdt_address: u64,
}

fn start_patcher(fixture: &Path) -> Patcher {
    let start = Start {
        extra_lines: 1,
        ..Start::default()
    };
    let program = start_announced(fixture, "code_patcher", start);
    let address_line = &program.extra[0];
    let shmdt_address = address_line
        .strip_prefix("code_patcher: shmdt at 0x")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("unexpected line {address_line:?}"));
    Patcher {
        program,
        shmdt_address,
    }
}

fn send_usr1(pid: u32) {
    kill(Pid::from_raw(pid as i32), Signal::SIGUSR1).expect("sending SIGUSR1");
}

fn patched_line(byte: u8) -> String {
    format!("code_patcher: patched, entry byte was {byte:#04x}")
}

/// Sends the second SIGUSR1 and checks the last line, the exit status and an empty stderr.
fn finish(patcher: Patcher) {
    send_usr1(patcher.program.pid);
    let rest = patcher.program.finish_cleanly();
    assert_eq!(rest, format!("code_patcher: entry byte now {RET:#04x}\n"));
}

/// Without memsup: the patcher finds the original byte and leaves 0xc3. Returns the original.
fn native_entry_byte(fixture: &Path) -> u8 {
    let patcher = start_patcher(fixture);
    let original = read_byte(patcher.program.pid, patcher.shmdt_address);
    assert_ne!(original, INT3, "shmdt natively starts with an int3");
    send_usr1(patcher.program.pid);
    let patched = patcher.program.next_line("the patched line");
    assert_eq!(patched, patched_line(original));
    assert_eq!(read_byte(patcher.program.pid, patcher.shmdt_address), RET);
    finish(patcher);
    original
}

/// `memsup attach -o PROFILE --duration 2 PID` in the background.
fn start_attach(profile: &Path, pid: u32) -> thread::JoinHandle<Output> {
    let pid_argument = pid.to_string();
    let child = clean_command(memsup_binary())
        .args([
            OsStr::new("attach"),
            OsStr::new("-o"),
            profile.as_os_str(),
            OsStr::new("--duration"),
            OsStr::new("2"),
            OsStr::new(&pid_argument),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting memsup attach");
    thread::spawn(move || wait_with_timeout(child, "memsup attach"))
}

#[test]
fn a_foreign_patch_over_a_probe_is_left_alone_at_detach() {
    for_each_variant("code_patcher", |_, fixture| {
        let original = native_entry_byte(fixture);

        let patcher = start_patcher(fixture);
        let (pid, address) = (patcher.program.pid, patcher.shmdt_address);
        let code_before = executable_mappings(pid);
        let snapshot_byte = code_before
            .iter()
            .find(|((start, end, _), _)| (*start..*end).contains(&address))
            .map(|((start, _, _), bytes)| bytes[(address - start) as usize])
            .unwrap_or_else(|| panic!("shmdt at {address:#x} is in no executable mapping"));
        assert_eq!(snapshot_byte, original, "shmdt's first byte before attach");

        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("attach.msup");
        let memsup = start_attach(&profile, pid);
        wait_until("memsup traces the fixture", TIMEOUT, || {
            tracer_pid(pid) != 0
        });
        // The engine the suite runs under puts its own byte there: a hook's jump, or an int3.
        let (probe_byte, implementation) = if suite_engine_is_hooks() {
            (JUMP, "hook")
        } else {
            (INT3, "int3")
        };
        wait_until("memsup's int3 or hook is on shmdt", TIMEOUT, || {
            read_byte(pid, address) == probe_byte
        });
        send_usr1(pid);
        // The patcher saw memsup's byte, as a real patcher would.
        let patched = patcher.program.next_line("the patched line");
        assert_eq!(patched, patched_line(probe_byte));

        let output = memsup.join().unwrap();
        let (_, memsup_lines) = split_stderr(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "memsup attach failed: {memsup_lines:?}"
        );
        assert_eq!(tracer_pid(pid), 0, "memsup detached");
        assert_eq!(
            read_byte(pid, address),
            RET,
            "memsup restored its byte over the foreign patch"
        );
        assert_code_unchanged_except(pid, &code_before, &[address]);

        let report = report_json(&profile);
        assert_profile(&report, "attach", &[pid.to_string()]);
        assert_image_count(&report, 1);
        let image = process_image(&report, &file_name(fixture), "attach");
        assert_eq!(image["pid"], pid);
        assert_exit(image, "detached", None);
        assert_eq!(number(image, "/probes/foreign_patches"), 1);
        let shmdt_site = image["probe_sites"]
            .as_array()
            .expect("probe sites")
            .iter()
            .find(|site| site["address"] == address)
            .unwrap_or_else(|| panic!("no probe site at shmdt: {:#}", image["probe_sites"]));
        let recorded = shmdt_site["implementation"].as_str().unwrap_or_default();
        assert!(recorded.starts_with(implementation), "{shmdt_site:#}");
        assert_eq!(
            number(image, "/mappings/calls/shmdt"),
            0,
            "shmdt is never called"
        );
        assert!(
            number(image, "/calls/malloc") > 0,
            "the loop allocates while attached"
        );

        finish(patcher);
    });
}
