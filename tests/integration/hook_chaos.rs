//! memsup attached with hooks, killed with SIGKILL: the target runs on with its native output
//! and exit status, whenever the kill lands (during the attach and the hook placement, or in
//! the steady state), and a later attach removes what the dead memsup left. The kill moments
//! come from a seeded generator, printed with every run; `MEMSUP_CHAOS_SEED=N` replays them.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::chaos::{chaos_seed, Moments};
use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_cycle::maps;
use crate::common::attach_window::AttachWindow;
use crate::common::interactive::send_signal;
use crate::common::live_process::{
    assert_code_unchanged, executable_mappings_except, hook_mappings, tracer_pid, wait_until,
    HOOK_AREA,
};
use crate::common::report::processes;
use crate::common::run::{clean_command, memsup_binary, split_stderr};
use crate::common::*;
use crate::engine_mappings::{arena_blocks, assert_two_rounds_of_mappings, library_path};

const KILLS: u64 = 20;
/// Even kills land in the first 60 ms after memsup starts: the attach and the hook
/// placement (about 30-50 ms here); odd ones anywhere in the first 400 ms.
const PLACEMENT_MS: u64 = 60;
const MAX_KILL_MS: u64 = 400;
/// How long the target runs on after the kill before its stdin is closed, at most.
const MAX_RUN_ON_MS: u64 = 200;

/// The output after the pid line, which differs between runs.
fn after_pid(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    text.lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn twenty_kills_of_an_attached_memsup_leave_the_target_running_unchanged() {
    if !require_tool("gcc") {
        return;
    }
    let seed = chaos_seed("hook kill chaos");
    let mut moments = Moments::new(seed);
    let fixture = fixture("hook_chaos", Variant::Dynamic);
    let library = library_path();
    let args = [library.as_str()];
    let native = run_native(&fixture, &args, Some(b""));
    assert_eq!(
        after_pid(&native.stdout),
        "hook_chaos: ready\nhook_chaos: 5 threads, every check passed"
    );
    assert_eq!(native.status.code(), Some(0));
    for kill in 0..KILLS {
        let latest = if kill % 2 == 0 {
            PLACEMENT_MS
        } else {
            MAX_KILL_MS
        };
        let delay = moments.below(latest + 1);
        let run_on = moments.below(MAX_RUN_ON_MS + 1);
        let what = format!(
            "seed {seed}, kill {kill}: SIGKILL {delay} ms after memsup started, {run_on} ms before stdin closed"
        );
        let start = Start {
            args: &args,
            piped_stdin: true,
            ..Start::default()
        };
        let program = start_announced(&fixture, "hook_chaos", start);
        let directory = tempfile::tempdir().expect("a temporary directory");
        let mut memsup = clean_command(memsup_binary())
            .args(["attach", "-q", "--engine", "hooks", "-o"])
            .arg(directory.path().join("killed.msup"))
            .arg(program.pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting memsup");
        std::thread::sleep(Duration::from_millis(delay));
        memsup.kill().expect("SIGKILL to memsup");
        memsup.wait().expect("reaping memsup");
        std::thread::sleep(Duration::from_millis(run_on));
        let (_, output) = program.finish();
        let what = format!("{what}; the target ended with {}", output.status);
        assert_eq!(
            after_pid(&output.stdout),
            after_pid(&native.stdout),
            "{what}"
        );
        assert_eq!(output.status.code(), native.status.code(), "{what}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{what}");
    }
}

const ROUNDS: u32 = 2;
/// fixtures/map_dlopen.c: 4 + 7 per round.
fn done_line(rounds: u32) -> String {
    format!("map_dlopen: done, {rounds} rounds, sum {}\n", 11 * rounds)
}

fn start_map_dlopen(library: &str) -> Running {
    let fixture = fixture("map_dlopen", Variant::Dynamic);
    let start = Start {
        args: &[library],
        ..Start::default()
    };
    start_announced(&fixture, "map_dlopen", start)
}

fn run_round(program: &Running, round: u32) {
    send_signal(program.pid, libc::SIGUSR1);
    assert_eq!(
        program.next_line("a round"),
        format!("map_dlopen: round {round}")
    );
}

/// The warning of `image` about an earlier memsup's leftovers (empty when there is none).
fn leftover_note(image: &Value) -> String {
    image["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .find(|warning| warning.contains("an earlier memsup left"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_later_attach_removes_what_a_killed_memsup_left_and_records_exactly() {
    let library = library_path();
    let program = start_map_dlopen(&library);
    let code_before = executable_mappings_except(program.pid, Some(&library));
    let maps_before = maps(program.pid);
    let first = AttachWindow::open(&[program.pid], &["--engine", "hooks"]);
    // A round under the first memsup: its hooks are in place once the round is done.
    run_round(&program, 1);
    send_signal(first.memsup_pid(), libc::SIGKILL);
    drop(first);
    wait_until("memsup is gone", Duration::from_secs(10), || {
        tracer_pid(program.pid) == 0
    });
    let left = hook_mappings(program.pid);
    assert!(
        left.iter().any(|line| line.contains(HOOK_AREA)),
        "the killed memsup's area: {left:#?}"
    );
    // A round with nobody draining: the hooks record into their rings and pass on.
    run_round(&program, 2);
    let second = AttachWindow::open(&[program.pid], &["--engine", "hooks", "--stacks", "caller"]);
    run_round(&program, 3);
    run_round(&program, 4);
    let (output, report) = second.close();
    let images = processes(&report);
    assert_eq!(images.len(), 1, "{report}");
    let image = &images[0];
    let note = leftover_note(image);
    // The first memsup's hooks: libc's 9 allocator entries (memalign is aligned_alloc)
    // and 6 mapping wrappers, and the dynamic linker's rendezvous.
    assert!(
        note.starts_with("an earlier memsup left its code here: 16 patched entries restored"),
        "{note:?}"
    );
    // Everything it left could go: nothing about it on stderr.
    let (_, memsup_lines) = split_stderr(&output.stderr);
    assert!(
        memsup_lines
            .iter()
            .all(|line| !line.contains("earlier memsup")),
        "{memsup_lines:?}"
    );
    assert_code_unchanged(program.pid, &code_before);
    showing_on_failure(&format_args!("image: {image}"), || {
        // Rounds 3 and 4, recorded by the second memsup.
        assert_two_rounds_of_mappings(image);
        assert_eq!(arena_blocks(image), 2 * ROUNDS as u64);
    });
    assert_eq!(image["engine"], "hooks", "{image}");
    let remaining = hook_mappings(program.pid);
    let before: Vec<&str> = maps_before.lines().collect();
    let added: Vec<String> = maps(program.pid)
        .lines()
        .filter(|line| !before.contains(line))
        .map(str::to_string)
        .collect();
    // What the second detach may leave (pages a thread may still be in, said so) is the
    // only difference.
    assert!(
        added.iter().all(|line| remaining.contains(line)),
        "mappings added: {added:#?}"
    );
    send_signal(program.pid, libc::SIGUSR2);
    assert_eq!(program.finish_cleanly(), done_line(4));
}

#[test]
fn each_attach_removes_what_the_previous_detach_left_switched_off() {
    let library = library_path();
    let fixture = fixture("hook_chaos", Variant::Dynamic);
    let start = Start {
        args: &[&library],
        piped_stdin: true,
        ..Start::default()
    };
    let program = start_announced(&fixture, "hook_chaos", start);
    let code_before = executable_mappings_except(program.pid, Some(&library));
    let areas = |pid: u32| -> Vec<String> {
        maps(pid)
            .lines()
            .filter(|line| line.contains(HOOK_AREA))
            .map(str::to_string)
            .collect()
    };
    let mut areas_left = 0;
    for cycle in 0..3 {
        let left = areas(program.pid);
        let window = AttachWindow::open(&[program.pid], &["--engine", "hooks"]);
        wait_until("the hooks are placed", Duration::from_secs(30), || {
            let now = areas(program.pid);
            !now.is_empty() && now != left
        });
        std::thread::sleep(Duration::from_millis(100));
        let (_, report) = window.close();
        assert_code_unchanged(program.pid, &code_before);
        let note = leftover_note(&processes(&report)[0]);
        // What the previous detach left switched off is found and removed (its threads
        // are elsewhere by now) or said to stay.
        assert_eq!(!note.is_empty(), areas_left > 0, "cycle {cycle}: {note:?}");
        areas_left = areas(program.pid).len();
        assert!(areas_left <= 1, "cycle {cycle}: {areas_left} areas left");
    }
    let (_, output) = program.finish();
    assert_eq!(
        after_pid(&output.stdout),
        "hook_chaos: ready\nhook_chaos: 5 threads, every check passed"
    );
    assert_eq!(output.status.code(), Some(0));
}
