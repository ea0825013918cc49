//! fixtures/vfork_exec.c: vfork + exec, and posix_spawn (a clone with CLONE_VM | CLONE_VFORK),
//! of exit3. memsup follows the child either way and reports it with cause "vfork".
//!
//! The child makes no allocator or mapping call before its exec, so its image before the exec
//! is "fresh" when the exec arrives, and memsup's analysis names that image after the exec'd
//! program instead of closing it and opening another (src/analysis/replay.rs, `exec`; unit
//! test `exec_and_fork_split_and_name_images`, where a vfork child that execs /bin/true is one
//! image). So the report holds two images, not three as for fork_exec, whose child allocates
//! before its exec: the parent (launch) and the child (vfork) as exit3, ending with code 3.

use crate::common::strace::MappingTotals;
use crate::common::*;
use crate::exit_and_signal::exit3_numbers;

/// Cross-checked with the gdb oracle for all three variants and both ways of starting the
/// child (follow-fork-mode parent): the same numbers, plus static glibc's start-up blocks.
fn parent_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 3), ("free", 3)]),
        returned_calls: 3,
        allocations: 3,
        bytes_allocated: 4444 + 555 + 666,
        frees: 3,
        peak_live_bytes: 4444 + 555,
        peak_live_blocks: 2,
        largest_allocation: 4444,
        ..Default::default()
    }
}

/// Runs the fixture with `flag` (none, or "--posix-spawn") and checks the two images; returns
/// the parent's mapping totals.
fn check_run(variant: Variant, fixture: &std::path::Path, flag: Option<&str>) -> MappingTotals {
    let child_program = crate::common::fixture("exit3", variant);
    let child_path = child_program.to_string_lossy().into_owned();
    let mut args: Vec<&str> = flag.into_iter().collect();
    args.push(child_path.as_str());
    let recording = record(fixture, &args, None);
    let how = if flag.is_some() {
        "posix_spawn"
    } else {
        "vfork"
    };
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        format!(
            "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with status 3\n\
             vfork_exec: {how} child exited with status 3\n"
        )
    );
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stderr),
        "exit3: this line goes to stderr\n"
    );
    assert_eq!(recording.native.status.code(), Some(0));
    let report = &recording.report;
    assert_profile(report, "run", &target_of(fixture, &args));
    assert_image_count(report, 2);

    let parent = process_image(report, &file_name(fixture), "launch");
    let child = process_image(report, &file_name(&child_program), "vfork");
    assert!(parent["parent_pid"].is_null());
    assert_eq!(child["parent_pid"], parent["pid"], "the child's parent");
    assert_ne!(child["pid"], parent["pid"]);
    assert_exit(parent, "code", Some(0));
    assert_exit(child, "code", Some(3));
    let argv: Vec<&str> = child["argv"]
        .as_array()
        .map(|items| items.iter().filter_map(|item| item.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(argv, [child_path.as_str()], "argv of the exec'd child");

    let parent_expected = match variant {
        Variant::Static => parent_numbers().plus_static_startup(GlibcStaticStartup::of(fixture)),
        _ => parent_numbers(),
    };
    assert_heap(parent, &parent_expected);
    assert_site_listed(parent, &site(Some("main"), 4444, 1).with_totals(1, 4444));
    assert_site_listed(parent, &site(Some("main"), 555, 1).with_totals(1, 555));
    assert_eq!(leaf_function(&parent["sites"][0]), "main");
    assert_eq!(parent["sites"][0]["peak_bytes"], 4444);
    // The parent receives SIGCHLD.
    assert_probe_costs(parent, &parent_expected, 0, 1);

    let child_expected = exit3_numbers(variant, &child_program);
    assert_heap(child, &child_expected);
    assert_probe_costs(child, &child_expected, 0, 0);
    MappingTotals::from_image(parent)
}

#[test]
fn vfork_and_posix_spawn_children_are_followed_as_vfork() {
    for_each_variant("vfork_exec", |variant, fixture| {
        let with_vfork = check_run(variant, fixture, None);
        let with_posix_spawn = check_run(variant, fixture, Some("--posix-spawn"));
        // glibc's posix_spawn maps a stack for the child (32 KiB for the arguments' pointers
        // and its frames, rounded up to pages: 36864 bytes with two arguments) and unmaps it
        // once the child has exec'd; musl's child runs on a buffer in the parent's frame.
        let spawn_stack = match variant {
            Variant::Musl => MappingTotals::default(),
            _ => MappingTotals {
                calls: [1, 1, 0, 0, 0, 0],
                mmap_bytes: 36864,
                munmap_bytes: 36864,
                brk_growth_bytes: 0,
            },
        };
        assert_eq!(
            with_posix_spawn.minus(&with_vfork),
            spawn_stack,
            "the parent's mapping calls with posix_spawn over those with vfork \
             (posix_spawn: {with_posix_spawn:?}, vfork: {with_vfork:?})"
        );
    });
}
