//! Components: who holds the memory of a process, requested against resident (RSS) and
//! proportional (PSS), from the fixtures' known layouts. Sizes the kernel decides (pages of
//! the program and its libraries) are bounded; what the fixtures allocate is exact.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::interactive::{only_child, run_until_ready, send_signal};
use crate::common::live_process::wait_until;
use crate::common::report::{report_json_with, resident_at};
use crate::common::run::{assert_same_behaviour, clean_command, memsup_binary};
use crate::common::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// Bound on the wait for a snapshot asked for by SIGUSR1 to reach the profile.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

/// The component `name` of an image's `components` list.
fn component<'a>(image: &'a Value, name: &str) -> &'a Value {
    image["components"]
        .as_array()
        .unwrap_or_else(|| panic!("no components list in {image:#}"))
        .iter()
        .find(|component| component["name"] == name)
        .unwrap_or_else(|| panic!("no component {name} in {:#}", image["components"]))
}

fn names(image: &Value) -> Vec<String> {
    image["components"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| c["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Why each of an image's snapshots was taken, in time order.
fn snapshot_reasons(image: &Value) -> Vec<&str> {
    image["snapshots"]
        .as_array()
        .unwrap_or_else(|| panic!("no snapshots list in {image:#}"))
        .iter()
        .filter_map(|snapshot| snapshot["reason"].as_str())
        .collect()
}

/// Sends SIGUSR1 to memsup and waits until the snapshot it asks for is in the profile
/// (blocks are flushed at least every 100 ms; the reader takes the whole blocks so far).
fn take_signal_snapshot(memsup: u32, profile: &Path) {
    use memsup::trace::format::{Record, SnapshotReason};
    send_signal(memsup, libc::SIGUSR1);
    let has_signal_snapshot = || {
        memsup::trace::reader::read_profile(profile).is_ok_and(|partial| {
            partial.records.iter().any(|record| {
                matches!(
                    record,
                    Record::SmapsSnapshot {
                        reason: SnapshotReason::Signal,
                        ..
                    }
                )
            })
        })
    };
    let deadline = std::time::Instant::now() + SNAPSHOT_WAIT;
    while !has_signal_snapshot() {
        assert!(
            std::time::Instant::now() < deadline,
            "no signal snapshot in {} after {SNAPSHOT_WAIT:?}",
            profile.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_within(what: &str, value: u64, low: u64, high: u64) {
    assert!(
        (low..=high).contains(&value),
        "{what}: {value} not within [{low}, {high}]"
    );
}

/// Runs `fixture` natively and under memsup (with `options`), acting at its "ready" line
/// through `at_ready(process under test, memsup's pid and profile if any)`; checks both behave
/// the same and returns the JSON report (with `report_options`).
fn record_interactive(
    fixture: &Path,
    options: &[&str],
    report_options: &[&str],
    at_ready: impl Fn(u32, Option<(u32, &Path)>),
) -> (Value, tempfile::TempDir) {
    let native = run_until_ready(clean_command(fixture), |child| at_ready(child.id(), None));
    let directory = tempfile::tempdir().unwrap();
    let profile = directory.path().join("run.msup");
    let mut command = clean_command(memsup_binary());
    command.arg("run").arg("-o").arg(&profile).args(options);
    command.arg("--").arg(fixture);
    let supervised = run_until_ready(command, |memsup| {
        at_ready(only_child(memsup.id()), Some((memsup.id(), &profile)))
    });
    assert_same_behaviour(&supervised, &native);
    (report_json_with(&profile, report_options), directory)
}

#[test]
fn requested_memory_far_above_resident_memory() {
    for_each_variant("untouched_malloc", |variant, program| {
        let recording = record(program, &[], None);
        let image = process_image(&recording.report, &file_name(program), "launch");
        let app = component(image, "app");
        let what = format!("untouched_malloc {variant:?}");
        assert_eq!(number(app, "/peak_requested_bytes"), 256 * MIB, "{what}");
        // 64 MiB written, the chunk header's page, and the program's own pages (all of the C
        // library too when static).
        let rss = number(app, "/peak_rss_bytes");
        assert_within(&what, rss, 64 * MIB + 4 * KIB, 64 * MIB + 3 * MIB);
        assert!(number(app, "/peak_pss_bytes") <= rss, "{what}");
    });
}

#[test]
fn snapshots_follow_the_smaps_interval() {
    let program = fixture("residency", Variant::Dynamic);
    let recording = record_with_options(&["--smaps-interval", "100"], &program, &[], None);
    let profile = memsup::trace::reader::read_profile(&recording.profile).unwrap();
    assert!(profile
        .header
        .options
        .contains(&"smaps-interval=100ms".to_string()));
    let image = process_image(&recording.report, &file_name(&program), "launch");
    let reasons = snapshot_reasons(image);
    // About 560 ms of run time (longer on a loaded machine): one interval snapshot per
    // 100 ms of it at most, and at least one (a pending interval request gives way to a
    // high's); the start one comes first, and the exit one is there too.
    let intervals = reasons
        .iter()
        .filter(|&&reason| reason == "interval")
        .count() as u64;
    let most = number(image, "/duration_ns") / 100_000_000 + 1;
    assert!((1..=most).contains(&intervals), "{reasons:?}");
    assert_eq!(reasons.first(), Some(&"start"), "{reasons:?}");
    assert!(reasons.contains(&"exit"), "{reasons:?}");
    // Each snapshot records what it cost.
    for snapshot in image["snapshots"].as_array().unwrap() {
        assert!(number(snapshot, "/cost_ns") > 0, "{snapshot}");
        assert!(number(snapshot, "/mappings") > 5, "{snapshot}");
    }
}

#[test]
fn fragmentation_keeps_freed_memory_resident_and_is_reported() {
    for variant in [Variant::Dynamic, Variant::Static] {
        let program = fixture("fragmentation", variant);
        let recording = record(&program, &[], None);
        let image = process_image(&recording.report, &file_name(&program), "launch");
        let what = format!("fragmentation {variant:?}");
        let app = component(image, "app");
        assert_eq!(
            number(app, "/peak_requested_bytes"),
            160_000_000,
            "{what}: {image:#}"
        );
        // At exit 80,000,000 bytes are live in 40,000 written chunks of 4016 bytes (4000 and
        // glibc's 16-byte header, rounded to 16): the freed chunks (80,320,000) and the live
        // ones' headers (320,000) are the allocator's, plus the few pages around them (the
        // tcache, the chunk in front of the first one, the top's header).
        let overhead = component(image, "overhead");
        assert_within(
            &what,
            number(overhead, "/peak_rss_bytes"),
            80_640_000,
            80_640_000 + 64 * KIB,
        );
        let warnings: Vec<&str> = image["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .filter(|warning| warning.starts_with("fragmentation:"))
            .collect();
        assert_eq!(warnings.len(), 1, "{what}: {:#}", image["warnings"]);
        assert!(
            warnings[0].contains("from 152.6 MiB to 76.3 MiB"),
            "{what}: {}",
            warnings[0]
        );
    }
}

#[test]
fn a_shared_library_holds_what_it_allocates() {
    if !require_tool("cc") {
        return;
    }
    let library = shared_object("component_lib");
    let program = fixture("component_main", Variant::Dynamic);
    let library_arg = library.to_str().unwrap();
    let recording = record(&program, &[library_arg], None);
    let image = process_image(&recording.report, &file_name(&program), "launch");
    let library_component = component(image, "component_lib.so");
    assert_eq!(
        number(library_component, "/peak_requested_bytes"),
        8 * MIB,
        "{image:#}"
    );
    // The 32 blocks written whole, and the library's own file pages.
    assert_within(
        "component_lib.so RSS",
        number(library_component, "/peak_rss_bytes"),
        8 * MIB,
        8 * MIB + 64 * KIB,
    );
    let app = component(image, "app");
    assert_eq!(number(app, "/peak_requested_bytes"), 4 * MIB);
    assert_within(
        "app RSS",
        number(app, "/peak_rss_bytes"),
        4 * MIB,
        4 * MIB + 64 * KIB,
    );
}

#[test]
fn thread_stacks_are_the_stacks_component() {
    for_each_variant("thread_stacks", |variant, program| {
        let (report, _directory) = record_interactive(program, &[], &[], |_, memsup| {
            if let Some((memsup, profile)) = memsup {
                take_signal_snapshot(memsup, profile);
            }
        });
        let image = process_image(&report, &file_name(program), "launch");
        let what = format!("thread_stacks {variant:?}: {:?}", names(image));
        let signal_snapshots = snapshot_reasons(image)
            .iter()
            .filter(|&&reason| reason == "signal")
            .count();
        assert_eq!(signal_snapshots, 1, "{what}");
        let stacks = component(image, "stacks");
        // 8 x 1 MiB written by the threads, their frames and the main thread's stack.
        assert_within(&what, number(stacks, "/peak_rss_bytes"), 8 * MIB, 9 * MIB);
        assert_eq!(number(stacks, "/peak_requested_bytes"), 0, "{what}");
    });
}

#[test]
fn pages_mapped_by_two_processes_count_half_in_each_pss() {
    for_each_variant("shared_file", |variant, program| {
        let directory = tempfile::tempdir().unwrap();
        let data = directory.path().join("memsup-shared.dat");
        let data_arg = data.to_str().unwrap();
        let recording = record_with_options(&[], program, &[data_arg], None);
        let report = report_json_with(&recording.profile, &["--component", "shared=memsup-shared"]);
        let what = format!("shared_file {variant:?}");
        let parent = process_image(&report, &file_name(program), "launch");
        let child = process_image(&report, &file_name(program), "fork");
        // The child read every page while the parent mapped them: each page is shared by
        // two processes, so the child's PSS of the file is half its RSS, within a few pages.
        let in_child = component(child, "shared");
        assert_eq!(number(in_child, "/peak_rss_bytes"), 8 * MIB, "{what}");
        assert_within(
            &what,
            number(in_child, "/peak_pss_bytes"),
            4 * MIB - 16 * KIB,
            4 * MIB + 16 * KIB,
        );
        // At the parent's exit the child is gone: the parent's pages are its own again.
        let in_parent = component(parent, "shared");
        assert_eq!(number(in_parent, "/peak_rss_bytes"), 8 * MIB, "{what}");
        assert_within(
            &what,
            number(in_parent, "/peak_pss_bytes"),
            8 * MIB - 16 * KIB,
            8 * MIB,
        );
    });
}

#[test]
fn an_attached_program_has_its_thread_stacks_and_unknown_earlier_memory() {
    for_each_variant("thread_stacks", |variant, program| {
        let native = run_until_ready(clean_command(program), |_| {});
        let directory = tempfile::tempdir().unwrap();
        let profile = directory.path().join("attach.msup");
        let attached = run_until_ready(clean_command(program), |child| {
            let output = run_memsup(
                [
                    OsStr::new("attach"),
                    OsStr::new("-q"),
                    OsStr::new("--duration"),
                    OsStr::new("1"),
                    OsStr::new("-o"),
                    profile.as_os_str(),
                    OsStr::new(&child.id().to_string()),
                ],
                None,
            );
            assert!(output.status.success(), "{output:?}");
        });
        assert_same_behaviour(&attached, &native);
        let report = report_json_with(&profile, &[]);
        let image = process_image(&report, &file_name(program), "attach");
        let what = format!("thread_stacks attached {variant:?}: {:?}", names(image));
        // The threads were made before the attach: their stacks are known by their stack
        // pointers, not by the calls that mapped them.
        let stacks = component(image, "stacks");
        assert_within(&what, number(stacks, "/peak_rss_bytes"), 8 * MIB, 9 * MIB);
        let reasons = snapshot_reasons(image);
        assert_eq!(reasons.first(), Some(&"start"), "{what}: {reasons:?}");
        // Earlier blocks were never seen: allocator overhead is only what the census at the
        // attach found glibc holding free (bins, caches, tops).
        let census = &image["heap_census"];
        let residency = &census["residency"];
        // musl's heap is not read: nothing is overhead then.
        let held_free: u64 = match census["walked"] == true {
            true => ["free", "cache", "top"]
                .iter()
                .map(|part| residency[part].as_u64().unwrap())
                .sum(),
            false => 0,
        };
        let overhead = match image["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "overhead")
        {
            Some(overhead) => overhead["peak_rss_bytes"].as_u64().unwrap(),
            None => 0,
        };
        assert!(
            overhead <= held_free,
            "{what}: overhead {overhead}, census {residency}"
        );
    });
}

/// Residency of the mappings of /proc/PID/smaps, read by the test itself.
struct OwnSmaps {
    total_rss: u64,
    /// memsup's pages: anonymous executable ones (the scratch page, the hook engine's code
    /// pages) and the hook engine's ring area.
    memsup_rss: u64,
    /// By the mapping's path ("" for anonymous memory).
    by_path: Vec<(String, u64, u64)>,
}

fn read_own_smaps(pid: u32) -> OwnSmaps {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut by_path: Vec<(String, u64, u64)> = Vec::new();
    let mut memsup = Vec::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            let path = line
                .split_whitespace()
                .nth(5)
                .unwrap_or_default()
                .to_string();
            let (start, end) = first.split_once('-').unwrap();
            let length =
                u64::from_str_radix(end, 16).unwrap() - u64::from_str_radix(start, 16).unwrap();
            let executable = line
                .split_whitespace()
                .nth(1)
                .is_some_and(|p| p.contains('x'));
            memsup.push((path.is_empty() && executable) || path.starts_with("/memfd:memsup-hooks"));
            by_path.push((path, length, 0));
        } else if let Some(value) = line.strip_prefix("Rss:") {
            let kib: u64 = value.trim().trim_end_matches(" kB").trim().parse().unwrap();
            by_path.last_mut().unwrap().2 = kib * KIB;
        }
    }
    OwnSmaps {
        total_rss: by_path.iter().map(|(_, _, rss)| rss).sum(),
        memsup_rss: by_path
            .iter()
            .zip(&memsup)
            .filter(|(_, &is_memsup)| is_memsup)
            .map(|((_, _, rss), _)| rss)
            .sum(),
        by_path,
    }
}

#[test]
fn component_totals_match_smaps_read_while_the_program_is_stopped() {
    for variant in [Variant::Dynamic, Variant::Static] {
        let program = fixture("smaps_crosscheck", variant);
        let own = std::sync::Mutex::new(None);
        let (report, _directory) = record_interactive(&program, &[], &[], |pid, memsup| {
            send_signal(pid, libc::SIGSTOP);
            wait_until("the program is stopped", Duration::from_secs(10), || {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                let state = stat.rsplit(')').next().unwrap().split_whitespace().next();
                matches!(state, Some("T") | Some("t"))
            });
            if let Some((memsup, profile)) = memsup {
                *own.lock().unwrap() = Some(read_own_smaps(pid));
                take_signal_snapshot(memsup, profile);
            }
            send_signal(pid, libc::SIGCONT);
        });
        let own = own.into_inner().unwrap().expect("smaps read under memsup");
        let image = process_image(&report, &file_name(&program), "launch");
        let what = format!("smaps_crosscheck {variant:?}");
        let snapshot = image["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|snapshot| snapshot["reason"] == "signal")
            .unwrap_or_else(|| panic!("{what}: no signal snapshot in {:#}", image["snapshots"]));
        let time_ns = number(snapshot, "/time_ns");
        // Nothing changed between the test's read and memsup's: the totals are equal.
        assert_eq!(number(snapshot, "/rss"), own.total_rss, "{what}");
        let components = names(image);
        let sum: u64 = components
            .iter()
            .map(|name| resident_at(image, name, time_ns))
            .sum();
        assert_eq!(sum, own.total_rss, "{what}: {components:?}");
        let rss_of = |matches: &dyn Fn(&str) -> bool| -> u64 {
            own.by_path
                .iter()
                .filter(|(path, _, _)| matches(path))
                .map(|(_, _, rss)| rss)
                .sum()
        };
        let stack = rss_of(&|path| path == "[stack]");
        assert_eq!(resident_at(image, "stacks", time_ns), stack, "{what}");
        // The scratch page; with hooks also their code pages and ring area.
        assert_eq!(
            resident_at(image, "memsup", time_ns),
            own.memsup_rss,
            "{what}"
        );
        if !recorded_by_hooks(image) {
            assert_eq!(own.memsup_rss, 4 * KIB, "{what}");
        }
        // The program's file and its three 1 MiB blocks (each in a mapping of 1 MiB and a
        // page; the kernel may merge the three); the 100 small blocks' share of the heap is
        // at most their 100,000 bytes.
        let exe = program.to_str().unwrap();
        let app_files = rss_of(&|path| path == exe);
        assert_within(
            &what,
            resident_at(image, "app", time_ns),
            app_files + 3 * MIB,
            app_files + 3 * MIB + 100_000 + 3 * 4 * KIB,
        );
        if variant == Variant::Dynamic {
            let libc_files = rss_of(&|path| {
                path.contains("/libc.so") || path.contains("/ld-linux") || path.starts_with("[v")
            });
            assert_within(
                &what,
                resident_at(image, "libc", time_ns),
                libc_files,
                libc_files + 64 * KIB,
            );
        }
    }
}
