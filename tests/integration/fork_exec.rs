//! fixtures/fork_exec.c: a fork whose child frees an inherited block, allocates and execs
//! exit3; three process images with their causes, pids and numbers.

use crate::common::*;
use crate::exit_and_signal::exit3_numbers;

pub fn parent_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 3), ("free", 3)]),
        returned_calls: 3,
        allocations: 3,
        bytes_allocated: 1111 + 2222 + 3333,
        frees: 3,
        peak_live_bytes: 2222 + 3333,
        peak_live_blocks: 2,
        largest_allocation: 3333,
        ..Default::default()
    }
}

/// The child between fork and exec: its image starts with no known blocks, so freeing the
/// inherited one is an unknown free; the 77 bytes are live when exec ends the image.
pub fn child_before_exec_numbers() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[("malloc", 1), ("free", 1)]),
        returned_calls: 1,
        allocations: 1,
        bytes_allocated: 77,
        unknown_frees: 1,
        peak_live_bytes: 77,
        peak_live_blocks: 1,
        live_bytes_at_exit: 77,
        live_blocks_at_exit: 1,
        largest_allocation: 77,
        ..Default::default()
    }
}

#[test]
fn fork_and_exec_make_three_images() {
    for_each_variant("fork_exec", |variant, fixture| {
        let child_program = crate::common::fixture("exit3", variant);
        let child_path = child_program.to_string_lossy().into_owned();
        let recording = record(fixture, &[child_path.as_str()], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "exit3: leaking 400 bytes in 2 blocks, sum 195, exiting with status 3\n\
             fork_exec: child exited with status 3\n"
        );
        let report = &recording.report;
        assert_profile(report, "run", &target_of(fixture, &[child_path.as_str()]));
        assert_image_count(report, 3);

        let parent = process_image(report, &file_name(fixture), "launch");
        let before_exec = process_image(report, &file_name(fixture), "fork");
        let after_exec = process_image(report, &file_name(&child_program), "fork");
        assert!(parent["parent_pid"].is_null());
        assert_eq!(
            before_exec["parent_pid"], parent["pid"],
            "the child's parent"
        );
        assert_eq!(
            after_exec["parent_pid"], parent["pid"],
            "the exec'd child's parent"
        );
        assert_eq!(before_exec["pid"], after_exec["pid"], "exec keeps the pid");
        assert_ne!(before_exec["pid"], parent["pid"]);
        assert_exit(parent, "code", Some(0));
        assert_exit(before_exec, "exec", None);
        assert_exit(after_exec, "code", Some(3));
        let argv: Vec<&str> = after_exec["argv"]
            .as_array()
            .map(|items| items.iter().filter_map(|item| item.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(argv, [child_path.as_str()], "argv of the exec'd child");

        let parent_expected = match variant {
            Variant::Static => {
                parent_numbers().plus_static_startup(GlibcStaticStartup::of(fixture))
            }
            _ => parent_numbers(),
        };
        assert_heap(parent, &parent_expected);
        assert_sites(
            parent,
            &[
                site(Some("main"), 3333, 1).with_totals(1, 3333),
                site(Some("main"), 2222, 1).with_totals(1, 2222),
            ],
        );
        // The parent receives SIGCHLD.
        assert_probe_costs(parent, &parent_expected, 0, 1);

        let child_expected = child_before_exec_numbers();
        assert_heap(before_exec, &child_expected);
        let inherited = number(before_exec, "/unknown_free_sources/before_fork");
        assert_eq!(inherited, 1, "the unknown free is of the parent's block");
        assert_sites(before_exec, &[site(Some("main"), 77, 1).with_totals(1, 77)]);
        assert_probe_costs(before_exec, &child_expected, 0, 0);

        let exec_expected = exit3_numbers(variant, &child_program);
        assert_heap(after_exec, &exec_expected);
        assert_probe_costs(after_exec, &exec_expected, 0, 0);
    });
}
