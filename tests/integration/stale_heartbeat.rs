//! memsup stopped for over a second while the program it attached to with hooks fills its
//! rings: the hooks take memsup for dead and pass calls through. Once memsup runs again, its
//! heartbeat switches them back on. The program runs on unchanged; the calls made during the
//! pause are missing, those after it are recorded exactly, and the profile says so.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_window::{AttachWindow, EVENT_TIMEOUT};
use crate::common::interactive::send_signal;
use crate::common::live_process::{hook_mappings, thread_states, wait_until, HOOK_AREA};
use crate::common::report::processes;
use crate::common::*;
use memsup::hooks::layout::header;

const NAME: &str = "round_blocks";
/// Records per ring: full after a few calls while memsup is stopped.
const RING_RECORDS: &str = "16";
/// The same, as a number, and the most rings an area has (`hooks::drain`'s MAX_RINGS).
const RECORDS_PER_RING: u64 = 16;
const MOST_RINGS: u64 = 8;
/// fixtures/round_blocks.c: blocks per round, and their sizes in rounds 1 and 2.
const ROUND_BLOCKS: u64 = 200;
const FIRST_SIZE: u64 = 1001;
const SECOND_SIZE: u64 = 2001;
const DONE: &str = "round_blocks: done, 2 rounds, sum 1200\n";

fn start() -> Running {
    let fixture = fixture(NAME, Variant::Dynamic);
    let start = Start {
        piped_stdin: true,
        ..Start::default()
    };
    start_announced(&fixture, NAME, start)
}

fn run_round(program: &mut Running, round: u32) {
    program.write_stdin(b"\n");
    assert_eq!(
        program.next_line("a round"),
        format!("{NAME}: round {round}")
    );
}

/// Sends SIGCONT to a process when dropped.
struct Resumed(u32);

impl Drop for Resumed {
    fn drop(&mut self) {
        send_signal(self.0, libc::SIGCONT);
    }
}

/// Whether the hooks in `pid` record: the `ENABLED` word of its hook area.
fn hooks_enabled(pid: u32) -> bool {
    let areas = hook_mappings(pid);
    let area = areas
        .iter()
        .find(|line| line.contains(HOOK_AREA))
        .unwrap_or_else(|| panic!("no hook area in {areas:?}"));
    let start = area.split('-').next().expect("a range");
    let start = u64::from_str_radix(start, 16).expect("a hexadecimal address");
    let memory = File::open(format!("/proc/{pid}/mem")).expect("opening the process's memory");
    let mut word = [0; 4];
    memory
        .read_exact_at(&mut word, start + header::ENABLED)
        .expect("reading the hooks' switch");
    u32::from_le_bytes(word) != 0
}

#[test]
fn hooks_that_took_a_stopped_memsup_for_dead_are_switched_back_on_and_say_what_they_missed() {
    let mut native = start();
    run_round(&mut native, 1);
    run_round(&mut native, 2);
    assert_eq!(native.finish_cleanly(), DONE);

    let mut program = start();
    let options = ["--engine", "hooks"];
    let env = [("MEMSUP_TEST_RING_RECORDS", RING_RECORDS)];
    let window = AttachWindow::open_with_env(&[program.pid], &options, &env);
    // Delivered once memsup resumed the program, its hooks in place.
    send_signal(program.pid, libc::SIGUSR1);
    assert_eq!(
        program.next_line("the signal"),
        format!("{NAME}: signalled")
    );
    assert!(hooks_enabled(program.pid), "hooks recording once attached");
    let memsup = window.memsup_pid();
    send_signal(memsup, libc::SIGSTOP);
    // Declared after the window, so dropped before it: a failure while memsup is stopped
    // lets it run again for the window's detach.
    let stopped = Resumed(memsup);
    wait_until("memsup stopped", EVENT_TIMEOUT, || {
        thread_states(memsup).iter().all(|state| state == "T")
    });
    // Its rings fill; a second later the hooks take memsup for dead.
    run_round(&mut program, 1);
    assert!(!hooks_enabled(program.pid), "hooks switched off");
    drop(stopped);
    wait_until("hooks switched back on", EVENT_TIMEOUT, || {
        hooks_enabled(program.pid)
    });
    run_round(&mut program, 2);
    let (output, report) = window.close();
    assert_eq!(program.finish_cleanly(), DONE);

    let image = &processes(&report)[0];
    // Round 2 whole; of round 1, what its rings held before one filled (they were empty:
    // the program had made no call since the attach): a ring's worth at least, less the
    // records of the first malloc's two brk calls (the break asked, then moved), and no
    // more than every ring's.
    let allocations = number(image, "/allocations");
    let recorded_first = allocations.saturating_sub(ROUND_BLOCKS);
    assert!(
        (RECORDS_PER_RING - 2..=RECORDS_PER_RING * MOST_RINGS).contains(&recorded_first),
        "{recorded_first} of round 1's {ROUND_BLOCKS} calls recorded"
    );
    assert_eq!(
        number(image, "/bytes_allocated"),
        recorded_first * FIRST_SIZE + ROUND_BLOCKS * SECOND_SIZE
    );
    assert_eq!(
        number(image, "/live_bytes_at_exit"),
        recorded_first * FIRST_SIZE + ROUND_BLOCKS * SECOND_SIZE
    );
    let warning = "its hooks found memsup's heartbeat over a second old once";
    let warnings = image["warnings"].to_string();
    assert!(warnings.contains(warning), "{warnings}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(warning), "{stderr}");
    // Every record read is a call counted: the mallocs and the brk calls they made.
    assert_eq!(
        number(image, "/hooks/records"),
        allocations + number(image, "/mappings/calls/brk")
    );
    // The one call that waited for room, and found the heartbeat stale, dropped its record;
    // the later ones passed through uncounted.
    assert_eq!(number(image, "/hooks/dropped"), 1);
}
