//! Snapshots at the moments that matter: fixtures/spikes.c's 30 ms spikes, and its 64 MiB
//! block that lives 50 ms, are snapshotted while they last, with their delay recorded;
//! every image of a fork, of a vfork+exec child and of a compiler run has a snapshot from
//! its start, and one snapshotted at its start has one at its exit, past the budget of the
//! snapshots processes wait for.

use serde_json::Value;

use crate::common::report::processes;
use crate::common::tools::find_tool;
use crate::common::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const PAGE: u64 = 4 * KIB;

fn component<'a>(image: &'a Value, name: &str) -> &'a Value {
    image["components"]
        .as_array()
        .and_then(|list| list.iter().find(|component| component["name"] == name))
        .unwrap_or_else(|| panic!("no component {name} in {:#}", image["components"]))
}

fn snapshots(image: &Value) -> &Vec<Value> {
    image["snapshots"]
        .as_array()
        .unwrap_or_else(|| panic!("no snapshots list in {image:#}"))
}

/// The RSS of component `name` at the snapshot of time `time_ns`.
fn resident_at(image: &Value, name: &str, time_ns: u64) -> u64 {
    component(image, name)["resident_timeline"]
        .as_array()
        .and_then(|points| points.iter().find(|point| point[0] == time_ns))
        .and_then(|point| point[1].as_u64())
        .unwrap_or_else(|| panic!("no {name} point at {time_ns}"))
}

#[test]
fn a_30ms_spike_is_snapshotted_while_it_lasts() {
    spikes_are_snapshotted_while_they_last(&[], "held 4 MiB, 3 spikes of 8 MiB\n", 8 * MIB);
}

#[test]
fn a_64_mib_block_that_lives_50_ms_is_snapshotted_while_it_lasts() {
    let args = ["64", "1", "50"];
    spikes_are_snapshotted_while_they_last(&args, "held 4 MiB, 1 spike of 64 MiB\n", 64 * MIB);
}

/// `fixtures/spikes.c` run with `args`, its spikes `spike` bytes over its 4 MiB block: the
/// peak is snapshotted while it lasts, with every live block resident.
fn spikes_are_snapshotted_while_they_last(args: &[&str], prints: &str, spike: u64) {
    let top = 4 * MIB + spike;
    for_each_variant("spikes", |variant, program| {
        let recording = record(program, args, None);
        assert_eq!(String::from_utf8_lossy(&recording.native.stdout), prints);
        assert_eq!(recording.native.status.code(), Some(0));
        let image = launched_image(&recording.report, program, args);
        let what = format!("spikes {args:?} {variant:?}");
        showing_on_failure(&image["snapshots"], || {
            let app = component(image, "app");
            assert_eq!(number(app, "/peak_requested_bytes"), top, "{what}");
            // The image's peak: app's spike over its block, and static glibc's blocks from
            // before main.
            let peak = number(image, "/peak_live_bytes");
            let startup = match variant {
                Variant::Static => GlibcStaticStartup::of(program).bytes,
                _ => 0,
            };
            assert_eq!(peak, top + startup, "{what}");
            // The snapshot the split at the peak comes from: taken for a high (of requested
            // bytes, or of RSS when the first was taken while the block was still being
            // written), it still shows the spike (taken before its free), with every live
            // block resident in the allocator's arenas.
            let live_resident = |snapshot: &Value| {
                number(snapshot, "/arena_rss") - number(snapshot, "/arena_overhead_rss")
            };
            let snapshot = snapshots(image)
                .iter()
                .filter(|snapshot| snapshot["high"]["held"] == true)
                .max_by_key(|snapshot| live_resident(snapshot))
                .expect("a snapshot for a high");
            assert_eq!(number(snapshot, "/requested"), peak, "{what}");
            assert_eq!(number(snapshot, "/arena_requested"), peak, "{what}");
            assert_eq!(live_resident(snapshot), peak, "{what}");
            // Its recorded delay runs from the allocation that made the peak, or from the
            // status sample that saw the RSS high after it (report times are whole µs).
            let time_ns = number(snapshot, "/time_ns");
            let peak_ns = number(image, "/start_ns") + number(image, "/peak_time_ns");
            let delay_ns = number(snapshot, "/high/delay_ns");
            let high_ns = time_ns - delay_ns;
            let kind = snapshot["high"]["kind"].as_str();
            assert!(
                matches!(kind, Some("requested" | "rss")),
                "{what}: {kind:?}"
            );
            if high_ns + 2_000 < peak_ns {
                // On a loaded machine, a high before the peak (the 4 MiB block, requested or
                // being written) may ask for a snapshot whose read begins only once the
                // spike is written; the spike's own high then finds that snapshot asked
                // for. The high held no spike, and it was followed for at most 0.5 s of
                // wall time before its snapshot was asked for (a loaded sampler may start
                // the read later).
                let seen = number(snapshot, "/high/bytes");
                assert!(
                    seen < top,
                    "{what}: {kind:?} {seen} before the peak at {peak_ns}"
                );
                assert!(
                    peak_ns - high_ns < 1_000_000_000,
                    "{what}: a {kind:?} high {} µs before the peak",
                    (peak_ns - high_ns) / 1000
                );
            } else if kind == Some("requested") {
                assert_eq!(number(snapshot, "/high/bytes"), peak, "{what}");
                assert!(
                    high_ns.abs_diff(peak_ns) < 2_000,
                    "{what}: peak at {peak_ns}"
                );
            }
            eprintln!(
                "{what}: snapshot {} µs after the peak of requested bytes, {} µs after its high",
                (time_ns - peak_ns) / 1000,
                delay_ns / 1000
            );
            // app at the peak: the spike and the block, plus the executable's own pages,
            // which only grow until the exit snapshot (where app holds the 4 MiB block and
            // those pages).
            let peak_rss = resident_at(image, "app", time_ns);
            assert_eq!(number(app, "/peak_rss_bytes"), peak_rss, "{what}");
            let exit = snapshots(image).last().expect("an exit snapshot");
            assert_eq!(exit["reason"], "exit", "{what}");
            let program_pages = resident_at(image, "app", number(exit, "/time_ns")) - 4 * MIB;
            assert!(
                (top..=top + program_pages).contains(&peak_rss),
                "{what}: app RSS {peak_rss} at the peak, the program's pages {program_pages}"
            );
            // The split at the peak RSS is measured: some snapshot reached it.
            assert_eq!(image["peak_split"]["measured"], true, "{what}");
            let chunk_headers = 2 * PAGE;
            assert!(
                number(snapshot, "/arena_overhead_rss") <= chunk_headers + 64 * KIB,
                "{what}"
            );
        });
    });
}

/// Why each of an image's snapshots was taken, in time order.
fn reasons(image: &Value) -> Vec<&str> {
    snapshots(image)
        .iter()
        .filter_map(|snapshot| snapshot["reason"].as_str())
        .collect()
}

/// The image's first snapshot was taken for `reason`, at its start: before its program made
/// any allocation (the process waited at its launch, fork or exec meanwhile).
fn assert_starts_with_snapshot(image: &Value, reason: &str, what: &str) {
    let reasons = reasons(image);
    assert_eq!(reasons.first(), Some(&reason), "{what}: {reasons:?}");
    let first = &snapshots(image)[0];
    assert!(
        number(first, "/time_ns") >= number(image, "/start_ns"),
        "{what}"
    );
    assert_eq!(number(first, "/requested"), 0, "{what}");
    assert_eq!(reasons.last(), Some(&"exit"), "{what}: {reasons:?}");
}

#[test]
fn every_image_of_a_fork_and_of_a_vfork_child_has_a_snapshot_from_its_start() {
    for_each_variant("fork_exec", |variant, fixture| {
        let child = crate::common::fixture("exit3", variant);
        let child_path = child.to_string_lossy().into_owned();
        let recording = record(fixture, &[child_path.as_str()], None);
        let report = &recording.report;
        assert_image_count(report, 3);
        let what = format!("fork_exec {variant:?}");
        let parent = process_image(report, &file_name(fixture), "launch");
        assert_starts_with_snapshot(parent, "start", &what);
        // The child before its exec ends with the exec, not an exit: its snapshots are the
        // one at the fork and, on a loaded machine where it lives long enough, those the
        // sampler took for a new RSS high (its copied pages), never one at an exit.
        let before_exec = process_image(report, &file_name(fixture), "fork");
        let before_exec = reasons(before_exec);
        assert_eq!(
            before_exec.first(),
            Some(&"fork"),
            "{what}: {before_exec:?}"
        );
        let later = &before_exec[1..];
        assert!(
            later.iter().all(|&reason| reason == "rss_high"),
            "{what}: {before_exec:?}"
        );
        let after_exec = process_image(report, &file_name(&child), "fork");
        assert_starts_with_snapshot(after_exec, "exec", &what);
    });
    for_each_variant("vfork_exec", |variant, fixture| {
        let child = crate::common::fixture("exit3", variant);
        let child_path = child.to_string_lossy().into_owned();
        for flag in [None, Some("--posix-spawn")] {
            let mut args: Vec<&str> = flag.into_iter().collect();
            args.push(child_path.as_str());
            let recording = record(fixture, &args, None);
            let report = &recording.report;
            assert_image_count(report, 2);
            let what = format!("vfork_exec {variant:?} {flag:?}");
            let parent = process_image(report, &file_name(fixture), "launch");
            assert_starts_with_snapshot(parent, "start", &what);
            // A vfork child shares its parent's memory until its exec: its snapshots start
            // there.
            let exec_child = process_image(report, &file_name(&child), "vfork");
            assert_starts_with_snapshot(exec_child, "exec", &what);
        }
    });
}

/// `gcc -c` of a small file: the driver, the compiler proper and the assembler (vfork
/// children) each have residency from their start.
#[test]
fn every_image_of_a_compiler_run_has_a_snapshot_from_its_start() {
    if !require_tool("gcc") {
        return;
    }
    let gcc = find_tool("gcc").expect("gcc");
    let directory = tempfile::tempdir().expect("a temporary directory");
    let source = directory.path().join("twice.c");
    std::fs::write(&source, "int twice(int x) { return 2 * x; }\n").expect("the source");
    let object = directory.path().join("twice.o");
    let args = [
        "-c",
        source.to_str().expect("a UTF-8 path"),
        "-o",
        object.to_str().expect("a UTF-8 path"),
    ];
    let recording = record(&gcc, &args, None);
    assert_eq!(recording.native.status.code(), Some(0));
    assert!(object.exists(), "no object file");
    let images = processes(&recording.report);
    let names: Vec<&str> = images
        .iter()
        .filter_map(|image| image["exe"].as_str())
        .map(|exe| exe.rsplit('/').next().unwrap_or(exe))
        .collect();
    // The assembler's file may be named for the target (x86_64-linux-gnu-as).
    let runs = |program: &str| {
        let suffix = format!("-{program}");
        names
            .iter()
            .any(|name| *name == program || name.ends_with(&suffix))
    };
    assert!(runs("cc1") && runs("as") && names.len() == 3, "{names:?}");
    for (image, name) in images.iter().zip(&names) {
        let reason = match image["cause"].as_str() {
            Some("launch") => "start",
            _ => "exec",
        };
        assert_starts_with_snapshot(image, reason, name);
    }
}

/// A child whose start was snapshotted is snapshotted at its exit too, though another
/// child's dear snapshots used up the budget of the snapshots processes wait for meanwhile;
/// a child forked after that has no snapshot at its fork, and its image says why.
#[test]
fn a_child_snapshotted_at_its_start_is_snapshotted_at_its_exit_past_the_budget() {
    for_each_variant("dear_children", |variant, program| {
        let recording = record(program, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "20000 mappings, children exited with 0, 0 and 0\n"
        );
        assert_eq!(recording.native.status.code(), Some(0));
        let report = &recording.report;
        assert_image_count(report, 4);
        let what = format!("dear_children {variant:?}");
        let parent = process_image(report, &file_name(program), "launch");
        assert_starts_with_snapshot(parent, "start", &what);
        let mut children: Vec<&Value> = processes(report)
            .iter()
            .filter(|image| image["cause"] == "fork")
            .collect();
        children.sort_by_key(|image| number(image, "/start_ns"));
        let [waiting, quick, late] = children[..] else {
            panic!("{what}: {} fork children", children.len());
        };
        for child in [waiting, quick] {
            assert_starts_with_snapshot(child, "fork", &what);
        }
        // Nor is it owed one at its exit, the budget still spent.
        let late_reasons = reasons(late);
        assert!(
            !late_reasons.contains(&"fork") && !late_reasons.contains(&"exit"),
            "{what}: {late_reasons:?}"
        );
        assert_eq!(
            late["warnings"],
            serde_json::json!([
                "no snapshot at its fork: the snapshots processes wait for (fork, exec, exit) \
                 had used their budget (5 % of the recording's time, 20 ms at least); its \
                 residency starts at the sampler's first reading"
            ]),
            "{what}"
        );
        for child in [waiting, quick] {
            assert_eq!(child["warnings"], serde_json::json!([]), "{what}");
        }
        // (A musl build links no allocator, which its launched image warns of.)
        let warnings = parent["warnings"].as_array().expect("a warnings list");
        assert!(
            !warnings.iter().any(|warning| warning
                .as_str()
                .is_some_and(|text| text.starts_with("no snapshot"))),
            "{what}: {warnings:?}"
        );
    });
}

#[test]
fn a_high_of_a_process_whose_snapshot_is_dear_is_estimated_while_it_lasts() {
    for_each_variant("dear_spikes", |variant, program| {
        let recording = record(program, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "held 4 and 8 MiB, 10000 mappings, spikes up to 24 MiB\n"
        );
        assert_eq!(recording.native.status.code(), Some(0));
        let image = launched_image(&recording.report, program, &[]);
        let what = format!("dear_spikes {variant:?}");
        showing_on_failure(&image["snapshots"], || {
            let app = component(image, "app");
            assert_eq!(number(app, "/peak_requested_bytes"), 36 * MIB, "{what}");
            let is_estimate = |snapshot: &&Value| snapshot["estimated"] == true;
            let (estimates, full): (Vec<&Value>, Vec<&Value>) =
                snapshots(image).iter().partition(is_estimate);
            // The first snapshot over 10,000 mappings is a full one (at the 12 MiB high, its
            // cost not known before, or at the exit); the spikes that follow are estimated.
            let dearest = full
                .iter()
                .map(|snapshot| number(snapshot, "/cost_ns"))
                .max()
                .expect("full snapshots");
            // The estimate that still showed its high with most of it resident (one taken
            // while the spike was being written counts the pages written so far).
            let live_resident = |snapshot: &Value| {
                number(snapshot, "/arena_rss") - number(snapshot, "/arena_overhead_rss")
            };
            // Of the spikes' highs (20, 28 or 36 MiB, and static glibc's blocks from before
            // main): every live block resident, as the last snapshot showed the two held
            // ones and pagemap the spike's own mapping.
            let startup = match variant {
                Variant::Static => GlibcStaticStartup::of(program).bytes,
                _ => 0,
            };
            let spikes = [20 * MIB, 28 * MIB, 36 * MIB].map(|bytes| bytes + startup);
            // An estimate while a spike's block was live: for its requested high, or for the
            // RSS high the status reads saw first when the interpret stage was late. One taken
            // once the next spike was allocated (the sampler late) shows that spike's block,
            // not this high's: left out.
            let of_a_spike = |snapshot: &&&Value| {
                let requested = number(snapshot, "/requested");
                let for_it = match snapshot["high"]["kind"].as_str() {
                    Some("requested") => number(snapshot, "/high/bytes") == requested,
                    kind => kind == Some("rss"),
                };
                snapshot["high"]["held"] == true && spikes.contains(&requested) && for_it
            };
            let held = estimates
                .iter()
                .filter(of_a_spike)
                .max_by_key(|snapshot| live_resident(snapshot))
                .expect("an estimate that still showed a spike's high");
            let high = number(held, "/requested");
            assert_eq!(number(held, "/arena_requested"), high, "{what}");
            assert_eq!(live_resident(held), high, "{what}");
            let app_resident = resident_at(image, "app", number(held, "/time_ns"));
            assert!(app_resident >= high - startup, "{what}: {app_resident}");
            // Only what changed was counted: the spike's mapping, and at most the stack and
            // the C library's data; the rest as the last snapshot had it.
            let mappings = number(held, "/mappings");
            assert!(mappings > 10_000, "{what}: {mappings}");
            let counted = number(held, "/pagemap_mappings");
            assert!((1..=4).contains(&counted), "{what}: {counted}");
            let cost = number(held, "/cost_ns");
            // At most half, as the sampler expects an estimate to cost when it takes one.
            assert!(cost * 2 < dearest, "{what}: {cost} ns against {dearest} ns");
        });
    });
}

/// dear_spikes' spikes as mappings of their own: no requested bytes, highs of RSS only. An
/// estimate counts the spike's mapping page by page and takes the rest from the last full
/// snapshot, so the spike's component there holds exactly that snapshot's plus one whole
/// spike, or the exit's (one estimate at least: another may have been taken while a spike
/// was being written).
#[test]
fn an_rss_high_of_a_process_whose_snapshot_is_dear_is_estimated_while_it_lasts() {
    rss_highs_are_estimated("mapped", 1..=4, 2);
}

/// dear_spikes' spikes laid right below the 8 MiB block's mapping, which the kernel merges
/// with it: the estimate counts the merged mapping's new part, and the cut where the calls'
/// ranges meet gives the spike to the program (unknown under musl), not to the arena.
#[test]
fn an_rss_high_in_a_mapping_merged_with_an_allocator_s_is_estimated_while_it_lasts() {
    rss_highs_are_estimated("merged", 1..=4, 2);
}

/// dear_spikes' spikes written into one mapping that keeps its shape: the estimate falls
/// short of the status reads by a whole spike, so the mappings the last snapshot did not
/// show wholly resident (the 10,000 among them) are counted again, the spike's too. That
/// costs less than the snapshot, not half.
#[test]
fn an_rss_high_inside_a_mapping_that_keeps_its_shape_is_estimated_while_it_lasts() {
    // Its 10,000 unwritten one-page mappings at least: the recount ran.
    rss_highs_are_estimated("reused", 10_000..=u64::MAX, 1);
}

/// Records dear_spikes with `argument` and finds an estimate that shows a whole spike, with
/// `counted` mappings counted from pagemap, and a cost under the dearest full snapshot's
/// divided by `cheaper_by`.
fn rss_highs_are_estimated(
    argument: &str,
    counted: std::ops::RangeInclusive<u64>,
    cheaper_by: u64,
) {
    for_each_variant("dear_spikes", |variant, program| {
        let recording = record(program, &[argument], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            format!("held 4 and 8 MiB, 10000 mappings, {argument} spikes up to 24 MiB\n")
        );
        assert_eq!(recording.native.status.code(), Some(0));
        let image = launched_image(&recording.report, program, &[argument]);
        let what = format!("dear_spikes {argument} {variant:?}");
        showing_on_failure(&image["snapshots"], || {
            let app = component(image, "app");
            assert!(number(app, "/peak_requested_bytes") < 13 * MIB, "{what}");
            let all = snapshots(image);
            let full = |snapshot: &&Value| snapshot["estimated"] == false;
            // The spike's mapping is app's, or unknown's under musl: musl has no unwind
            // tables, so the walk from its mmap, seen at the system call, stops there
            // truncated under either engine.
            let holder = match variant {
                Variant::Musl => "unknown",
                _ => "app",
            };
            let resident = |snapshot: &Value| -> u64 {
                let time = number(snapshot, "/time_ns");
                let components = image["components"].as_array().unwrap().iter();
                let holders = components.filter(|c| c["name"] == holder);
                let points = holders.filter_map(|c| c["resident_timeline"].as_array());
                let at = |points: &Vec<Value>| points.iter().find(|p| p[0] == time).cloned();
                let points = points.filter_map(at);
                points.map(|point| point[1].as_u64().unwrap()).sum()
            };
            // What an estimate shows app and unknown hold above the full snapshot before it
            // (its base, unless that one was taken during a spike too) or above the exit
            // snapshot (the same blocks, the spikes gone, and a page or two more touched by
            // the last line's formatting: a static program's C library data is app's).
            let exit = all
                .iter()
                .find(|snapshot| snapshot["reason"] == "exit")
                .expect("an exit snapshot");
            let added = |estimate: &Value| {
                let time = number(estimate, "/time_ns");
                let before = all
                    .iter()
                    .filter(full)
                    .rfind(|snapshot| number(snapshot, "/time_ns") < time)
                    .expect("a full snapshot before the estimate");
                [before, exit].map(|base| resident(estimate).saturating_sub(resident(base)))
            };
            let estimates: Vec<&Value> = all
                .iter()
                .filter(|snapshot| {
                    snapshot["estimated"] == true
                        && snapshot["high"]["kind"] == "rss"
                        && snapshot["high"]["held"] == true
                })
                .collect();
            let spikes = [8 * MIB, 16 * MIB, 24 * MIB];
            let a_whole_spike = |[over_base, over_exit]: [u64; 2]| {
                spikes.contains(&over_base)
                    || spikes
                        .iter()
                        .any(|&spike| (spike - 2 * PAGE..=spike).contains(&over_exit))
            };
            let whole = estimates
                .iter()
                .find(|estimate| a_whole_spike(added(estimate)))
                .unwrap_or_else(|| {
                    let added: Vec<[u64; 2]> = estimates.iter().map(|e| added(e)).collect();
                    panic!("{what}: no estimate added a whole spike: {added:?}")
                });
            assert!(number(whole, "/mappings") > 10_000, "{what}");
            let pagemap_mappings = number(whole, "/pagemap_mappings");
            assert!(
                counted.contains(&pagemap_mappings),
                "{what}: {pagemap_mappings}"
            );
            let dearest = all
                .iter()
                .filter(full)
                .map(|snapshot| number(snapshot, "/cost_ns"))
                .max()
                .expect("full snapshots");
            let cost = number(whole, "/cost_ns");
            assert!(
                cost * cheaper_by < dearest,
                "{what}: {cost} ns against {dearest} ns"
            );
        });
    });
}
