//! Chaos, bounded: fixtures/chaos_threads.c (four allocating threads, main blocked in read)
//! attached and detached 50 times at random moments, and killed at random moments while
//! `memsup run` records it (so is fixtures/thread_churn.c, which starts threads all the
//! time). The moments come from a seeded generator; the seed is printed with every run (the
//! test's captured output) and `MEMSUP_CHAOS_SEED=N` replays it.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::common::announced::{start_announced, Running, Start};
use crate::common::attach_cycle::{attach_then_interrupt, maps};
use crate::common::live_process::{
    assert_code_unchanged, executable_mappings, has_ended, is_hook_engine_mapping, wait_until,
    HOOK_AREA,
};
use crate::common::report::report_json;
use crate::common::run::{clean_command, memsup_binary, spawn_piped, wait_with_timeout};
use crate::common::*;

const CYCLES: u64 = 50;
/// The first cycles send SIGINT as soon as memsup traces the process, mid-attach.
const EARLY_CYCLES: u64 = 5;
const MAX_DETACH_DELAY_MS: u64 = 150;
const KILLS: u64 = 10;
const MAX_KILL_DELAY_MS: u64 = 300;

/// xorshift64*: small, seedable, good enough to pick moments.
pub struct Moments(u64);

impl Moments {
    pub fn new(seed: u64) -> Moments {
        Moments(seed | 1)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

/// The seed from MEMSUP_CHAOS_SEED, else from the clock; printed for replay.
pub fn chaos_seed(test: &str) -> u64 {
    let seed = std::env::var("MEMSUP_CHAOS_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: chaos seed {seed} (replay with MEMSUP_CHAOS_SEED={seed})");
    seed
}

fn seed_for(seed: u64, variant: Variant) -> u64 {
    seed ^ (variant as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The mappings a detach must leave as it found them. musl's allocator maps and unmaps its
/// small groups (anonymous rw-p) by itself as the workers churn: those lines are left out.
fn steady_maps(pid: u32, variant: Variant) -> Vec<String> {
    maps(pid)
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let anonymous_writable = fields.len() == 5 && fields[1] == "rw-p";
            !(variant == Variant::Musl && anonymous_writable)
        })
        .map(str::to_string)
        .collect()
}

/// The output after the pid line, which differs between runs.
fn after_pid(output: &str) -> String {
    output.lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn fifty_detaches_at_random_moments_leave_the_program_unchanged() {
    let seed = chaos_seed("attach/detach chaos");
    for_each_variant("chaos_threads", |variant, fixture| {
        let mut moments = Moments::new(seed_for(seed, variant));
        let (native, process) = start_chaos_threads(fixture);
        let pid = process.pid;
        let maps_before = steady_maps(pid, variant);
        let code_before = executable_mappings(pid);
        for cycle in 0..CYCLES {
            let delay = if cycle < EARLY_CYCLES {
                0
            } else {
                moments.below(MAX_DETACH_DELAY_MS + 1)
            };
            let what = format!("seed {seed}, cycle {cycle}, SIGINT {delay} ms after attach");
            attach_then_interrupt(pid, Duration::from_millis(delay), &what);
            if has_ended(pid) {
                let (_, ended) = process.finish();
                panic!("{what}: {variant:?}: the program ended: {ended:?}");
            }
            assert_code_unchanged(pid, &code_before);
            let (hook_pages, maps_now): (Vec<String>, Vec<String>) = steady_maps(pid, variant)
                .into_iter()
                .partition(|line| is_hook_engine_mapping(line));
            // A detach with a thread inside a hooked call leaves the hook engine's pages,
            // switched off, and the next attach removes them: never more than one area.
            let areas = hook_pages.iter().filter(|line| line.contains(HOOK_AREA));
            assert!(
                areas.count() <= 1,
                "{what}: hook areas left {hook_pages:#?}"
            );
            let added: Vec<&String> = maps_now
                .iter()
                .filter(|line| !maps_before.contains(line))
                .collect();
            assert!(added.is_empty(), "{what}: mappings added {added:#?}");
            assert_eq!(maps_now, maps_before, "{what}: mappings");
        }
        finish_chaos_threads(process, &native, &format!("seed {seed}"));
    });
}

/// fixtures/chaos_threads.c run natively, then started again and announced, its stdin
/// piped: its main thread reads stdin to the end, so it runs until `finish_chaos_threads`.
pub fn start_chaos_threads(fixture: &Path) -> (Output, Running) {
    let native = run_native(fixture, &[], None);
    let start = Start {
        piped_stdin: true,
        ..Start::default()
    };
    (native, start_announced(fixture, "chaos_threads", start))
}

/// Ends `process`; its output and exit status must be the `native` run's, every block
/// intact.
pub fn finish_chaos_threads(process: Running, native: &Output, what: &str) {
    let (_, finished) = process.finish();
    let output = String::from_utf8_lossy(&finished.stdout);
    let native_stdout = String::from_utf8_lossy(&native.stdout);
    assert_eq!(after_pid(&output), after_pid(&native_stdout), "{what}");
    assert_eq!(
        after_pid(&output),
        "chaos_threads: ready\nchaos_threads: 4 threads, every block intact"
    );
    assert_eq!(finished.status.code(), native.status.code(), "{what}");
    assert_eq!(finished.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&finished.stderr), "");
}

/// The PID of the child `memsup` launched, once that child runs `fixture` (after its exec).
fn launched_child(memsup: u32, fixture: &Path) -> u32 {
    let mut child = 0;
    wait_until(
        &format!("memsup {memsup} runs {}", fixture.display()),
        Duration::from_secs(30),
        || {
            child = children_of(memsup)
                .into_iter()
                .find(|pid| {
                    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == fixture)
                })
                .unwrap_or(0);
            child != 0
        },
    );
    child
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[test]
fn killing_the_target_at_random_moments_while_recording_leaves_a_readable_profile() {
    kill_at_random_moments("chaos_threads", "kill chaos", |name, check| {
        for_each_variant(name, check)
    });
}

/// fixtures/thread_churn.c starts threads all the time, so a kill often lands between a
/// thread's creation and its creator's report of it: the new thread's first stop is then
/// its exit, and the recording must still end. glibc only: the musl build allocates
/// nothing, so memsup warns that it finds no allocator.
#[test]
fn killing_a_program_that_keeps_starting_threads_ends_the_recording() {
    kill_at_random_moments("thread_churn", "thread churn kill chaos", |name, check| {
        glibc_variants_of(name, check)
    });
}

/// `KILLS` runs of fixture `name` in each variant `each_variant` gives, each killed at a
/// moment from the seed of `test`.
fn kill_at_random_moments(
    name: &str,
    test: &str,
    each_variant: impl Fn(&str, &dyn Fn(Variant, &Path)),
) {
    let seed = chaos_seed(test);
    each_variant(name, &|variant, fixture| {
        let mut moments = Moments::new(seed_for(seed, variant));
        for iteration in 0..KILLS {
            let delay = moments.below(MAX_KILL_DELAY_MS + 1);
            let what = format!("seed {seed}, kill {iteration}, SIGKILL {delay} ms after exec");
            kill_while_recording(name, fixture, Duration::from_millis(delay), &what);
        }
    });
}

fn kill_while_recording(name: &str, fixture: &Path, delay: Duration, what: &str) {
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("killed.msup");
    let mut command = clean_command(memsup_binary());
    command
        .args(["run", "-q", "-o"])
        .arg(&profile)
        .arg("--")
        .arg(fixture);
    command.stdin(Stdio::piped());
    let (mut memsup, description) = spawn_piped(command);
    // stdin stays open: the fixture runs until it is killed.
    let stdin = memsup.stdin.take();
    let target = launched_child(memsup.id(), fixture);
    let started = Instant::now();
    std::thread::sleep(delay);
    // SAFETY: kill has no memory effects; memsup has not reaped its child, so the PID is it.
    unsafe { libc::kill(target as i32, libc::SIGKILL) };
    let output = wait_with_timeout(memsup, &description);
    drop(stdin);
    let (program_stderr, memsup_lines) = split_stderr(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(137),
        "{what} ({:?} after exec): memsup ended with {:?}: {memsup_lines:?}",
        started.elapsed(),
        output.status
    );
    assert!(
        memsup_lines.is_empty(),
        "{what}: memsup wrote {memsup_lines:?}"
    );
    assert_eq!(program_stderr, "", "{what}: the program's stderr");
    // Killed at any point: what it printed is a prefix of its two first lines.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let announced = format!("{name}: pid {target}\n{name}: ready\n");
    assert!(
        announced.starts_with(&*stdout),
        "{what}: the program printed {stdout:?}"
    );
    let report = report_json(&profile);
    let image = process_image(&report, &file_name(fixture), "launch");
    assert_exit(image, "signal", Some(9));
}
