//! fixtures/map_dlopen.c attached to under each engine: libc's mapping wrappers and the
//! dynamic linker's rendezvous are hooks under `--engine hooks` (no int3 left for them), the
//! mapping calls and a dlopen'd library's allocations are recorded as the int3 engine
//! records them, and a target whose memsup is killed runs on unchanged.

use std::time::Duration;

use serde_json::Value;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_window::AttachWindow;
use crate::common::interactive::send_signal;
use crate::common::report::processes;
use crate::common::*;

const ROUNDS: u32 = 2;
/// fixtures/map_dlopen.c: 4 + 7 per round.
const DONE: &str = "map_dlopen: done, 2 rounds, sum 22\n";

fn start(library: &str) -> Running {
    let fixture = fixture("map_dlopen", Variant::Dynamic);
    let args = [library];
    let start = Start {
        args: &args,
        ..Start::default()
    };
    start_announced(&fixture, "map_dlopen", start)
}

fn run_rounds(program: &Running) {
    for round in 1..=ROUNDS {
        send_signal(program.pid, libc::SIGUSR1);
        assert_eq!(
            program.next_line("a round"),
            format!("map_dlopen: round {round}")
        );
    }
}

/// Attaches with `engine`, runs the rounds, detaches, and returns the program's image.
fn recorded_by(engine: &str, library: &str) -> Value {
    let program = start(library);
    let window = AttachWindow::open(&[program.pid], &["--engine", engine, "--stacks", "caller"]);
    run_rounds(&program);
    let (_, report) = window.close();
    send_signal(program.pid, libc::SIGUSR2);
    assert_eq!(program.finish_cleanly(), DONE);
    let images = processes(&report);
    assert_eq!(images.len(), 1, "{report}");
    images[0].clone()
}

/// Two rounds of fixtures/map_dlopen.c's mapping calls: per round an mmap of 12 KiB, an
/// mremap and a munmap of 20 KiB, and nothing else.
pub(crate) fn assert_two_rounds_of_mappings(image: &Value) {
    let calls = |call: &str| number(image, &format!("/mappings/calls/{call}"));
    let per_call: Vec<u64> = ["mmap", "munmap", "mremap", "brk", "shmat", "shmdt"]
        .into_iter()
        .map(calls)
        .collect();
    assert_eq!(per_call, [2, 2, 2, 0, 0, 0], "mapping calls");
    assert_eq!(number(image, "/mappings/mmap_bytes"), 2 * 12288);
    assert_eq!(number(image, "/mappings/munmap_bytes"), 2 * 20480);
}

/// Blocks allocated by the dlopen'd library's own allocator (`arena_round`).
pub(crate) fn arena_blocks(image: &Value) -> u64 {
    image["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .filter(|site| site.to_string().contains("arena_round"))
        .map(|site| number(site, "/allocations"))
        .sum()
}

/// The probe sites of `image` that are int3 probes.
fn int3_sites(image: &Value) -> Vec<String> {
    image["probe_sites"]
        .as_array()
        .expect("probe sites")
        .iter()
        .filter(|site| site["implementation"] != "hook")
        .map(|site| format!("{} {}", site["function"], site["implementation"]))
        .collect()
}

pub(crate) fn library_path() -> String {
    let library = shared_object("dlopen_arena");
    library.to_str().expect("a UTF-8 fixtures path").to_string()
}

#[test]
fn attached_mappings_and_a_dlopened_allocator_are_hooked_and_match_int3() {
    let library = library_path();
    let int3 = recorded_by("int3", &library);
    let hooks = recorded_by("hooks", &library);
    assert_eq!(hooks["engine"], "hooks", "{hooks}");
    for image in [&int3, &hooks] {
        showing_on_failure(&format_args!("image: {image}"), || {
            assert_two_rounds_of_mappings(image);
        });
    }
    for pointer in [
        "/mappings",
        "/calls",
        "/allocations",
        "/bytes_allocated",
        "/frees",
        "/null_frees",
        "/unknown_frees",
        "/peak_live_bytes",
        "/live_bytes_at_exit",
    ] {
        assert_eq!(
            hooks.pointer(pointer),
            int3.pointer(pointer),
            "{pointer}: hooks {hooks}\nint3 {int3}"
        );
    }
    // The arena's own allocator, in the library loaded and unloaded each round.
    assert_eq!(arena_blocks(&hooks), 2 * ROUNDS as u64, "{hooks}");
    assert_eq!(int3_sites(&hooks), Vec::<String>::new(), "{hooks}");
}

#[test]
fn a_target_runs_on_unchanged_after_its_memsup_is_killed() {
    let library = library_path();
    let program = start(&library);
    let window = AttachWindow::open(&[program.pid], &["--engine", "hooks"]);
    // Let the attach plant its hooks, then kill memsup with them in place.
    std::thread::sleep(Duration::from_millis(300));
    send_signal(window.memsup_pid(), libc::SIGKILL);
    // A signal that reaches the program while its tracer is dying can be lost (seen with
    // SIGUSR1 about once in four tries): the rounds are asked for once memsup is gone.
    crate::common::live_process::wait_until("memsup is gone", Duration::from_secs(10), || {
        crate::common::live_process::tracer_pid(program.pid) == 0
    });
    run_rounds(&program);
    send_signal(program.pid, libc::SIGUSR2);
    assert_eq!(program.finish_cleanly(), DONE);
    drop(window);
}
