//! The hook engine against the int3 engine on programs with threads, processes and unusual
//! allocators: 8 threads, fork + exec, vfork and posix_spawn, a dlopen'd allocator, an IFUNC
//! allocator and a main thread that ends first. Each process image has the same numbers
//! under both engines, and the hook engine recorded it with no stop and no record lost.

use crate::common::*;
use crate::engines::assert_fixture_engines_agree;
use crate::exit_and_signal::exit3_numbers;
use crate::fork_exec::{child_before_exec_numbers, parent_numbers};

#[test]
fn threads_are_recorded_alike_by_both_engines() {
    for_each_variant("threads", |_, fixture| {
        assert_fixture_engines_agree(fixture, &[], &[]);
    });
}

#[test]
fn a_main_thread_ending_first_is_recorded_alike_by_both_engines() {
    for_each_variant("leader_exit", |_, fixture| {
        assert_fixture_engines_agree(fixture, &[], &[]);
    });
}

/// The fork child gets its own rings before it runs: the parent's and the child's calls,
/// made at the same time, land in their own images with the fixture's exact numbers.
#[test]
fn fork_and_exec_are_recorded_alike_by_both_engines() {
    for_each_variant("fork_exec", |variant, fixture| {
        let child_program = crate::common::fixture("exit3", variant);
        let child_path = child_program.to_string_lossy().into_owned();
        let (_, hooks) = assert_fixture_engines_agree(fixture, &[child_path.as_str()], &[]);
        let report = &hooks.report;
        assert_image_count(report, 3);
        let parent = process_image(report, &file_name(fixture), "launch");
        let before_exec = process_image(report, &file_name(fixture), "fork");
        let after_exec = process_image(report, &file_name(&child_program), "fork");
        let parent_expected = match variant {
            Variant::Static => {
                parent_numbers().plus_static_startup(GlibcStaticStartup::of(fixture))
            }
            _ => parent_numbers(),
        };
        assert_heap(parent, &parent_expected);
        assert_heap(before_exec, &child_before_exec_numbers());
        assert_heap(after_exec, &exit3_numbers(variant, &child_program));
    });
}

/// Twenty children allocating at the same time as each other and as their parent: each
/// image has exactly its own calls under both engines.
#[test]
fn concurrent_fork_children_each_get_their_own_calls() {
    for_each_variant("fork_many", |variant, fixture| {
        let (_, hooks) = assert_fixture_engines_agree(fixture, &[], &[]);
        assert_eq!(
            String::from_utf8_lossy(&hooks.native.stdout),
            "fork_many: 20 children, exit codes sum 190\n"
        );
        let report = &hooks.report;
        assert_image_count(report, 21);
        let pairs = |count: u64, size: u64| HeapExpectation {
            calls: calls(&[("malloc", count), ("free", count)]),
            returned_calls: count,
            allocations: count,
            bytes_allocated: count * size,
            frees: count,
            peak_live_bytes: size,
            peak_live_blocks: 1,
            largest_allocation: size,
            ..Default::default()
        };
        let parent = process_image(report, &file_name(fixture), "launch");
        let parent_expected = match variant {
            Variant::Static => pairs(1000, 32).plus_static_startup(GlibcStaticStartup::of(fixture)),
            _ => pairs(1000, 32),
        };
        assert_heap(parent, &parent_expected);
        let mut children: Vec<&serde_json::Value> = crate::common::report::processes(report)
            .iter()
            .filter(|image| image["cause"] == "fork")
            .collect();
        children.sort_by_key(|image| number(image, "/calls/malloc"));
        assert_eq!(children.len(), 20);
        for (index, child) in children.into_iter().enumerate() {
            let index = index as u64;
            assert_heap(child, &pairs(100 + index, 64));
            assert_exit(child, "code", Some(index as i64));
            assert_eq!(child["parent_pid"], parent["pid"]);
        }
    });
}

/// A vfork child runs in its parent's memory, so with its parent's rings: this one execs
/// at once and makes no allocator call, so the engines agree.
#[test]
fn vfork_and_posix_spawn_are_recorded_alike_by_both_engines() {
    for_each_variant("vfork_exec", |variant, fixture| {
        let child_program = crate::common::fixture("exit3", variant);
        let child_path = child_program.to_string_lossy().into_owned();
        assert_fixture_engines_agree(fixture, &[child_path.as_str()], &[]);
        assert_fixture_engines_agree(fixture, &["--posix-spawn", child_path.as_str()], &[]);
    });
}

/// A vfork child that allocates: under hooks its calls land in its parent's rings with its
/// parent's thread pointer, and are tagged as the child's from the vfork to its end.
#[test]
fn a_vfork_child_s_calls_are_its_own_under_both_engines() {
    for_each_variant("vfork_alloc", |variant, fixture| {
        let (_, hooks) = assert_fixture_engines_agree(fixture, &[], &[]);
        assert_eq!(
            String::from_utf8_lossy(&hooks.native.stdout),
            "vfork_alloc: child exited with status 5\n"
        );
        let report = &hooks.report;
        assert_image_count(report, 2);
        let parent = process_image(report, &file_name(fixture), "launch");
        let child = process_image(report, &file_name(fixture), "vfork");
        let parent_own = HeapExpectation {
            calls: calls(&[("malloc", 1), ("free", 1)]),
            returned_calls: 1,
            allocations: 1,
            bytes_allocated: 1111,
            frees: 1,
            peak_live_bytes: 1111,
            peak_live_blocks: 1,
            largest_allocation: 1111,
            ..Default::default()
        };
        let parent_expected = match variant {
            Variant::Static => parent_own.plus_static_startup(GlibcStaticStartup::of(fixture)),
            _ => parent_own,
        };
        assert_heap(parent, &parent_expected);
        let child_expected = HeapExpectation {
            calls: calls(&[("malloc", 2), ("free", 2)]),
            returned_calls: 2,
            allocations: 2,
            bytes_allocated: 555,
            frees: 2,
            peak_live_bytes: 333,
            peak_live_blocks: 1,
            largest_allocation: 333,
            ..Default::default()
        };
        assert_heap(child, &child_expected);
        assert_exit(child, "code", Some(5));
    });
}

/// The library's mi_malloc and mi_free are hooked at the rendezvous that announces it,
/// before its code runs.
#[test]
fn a_dlopened_allocator_is_recorded_alike_by_both_engines() {
    if !require_tool("gcc") {
        return;
    }
    let library = shared_object("dlopen_arena");
    let fixture = crate::common::fixture("dlopen_main", Variant::Dynamic);
    let library = library.to_str().expect("a UTF-8 fixtures path");
    let (_, hooks) = assert_fixture_engines_agree(&fixture, &[library], &[]);
    let image = launched_image(&hooks.report, &fixture, &[library]);
    // libc's and the library's.
    assert_hooked(image, "malloc", 2);
    assert_hooked(image, "free", 2);
}

/// The functions the IFUNC resolvers choose are hooked once the resolvers return.
#[test]
fn an_ifunc_allocator_is_recorded_alike_by_both_engines() {
    for_each_variant("ifunc_alloc", |variant, fixture| {
        if variant == Variant::Musl {
            return; // musl does not support IFUNC
        }
        let (_, hooks) = assert_fixture_engines_agree(fixture, &[], &[]);
        let image = launched_image(&hooks.report, fixture, &[]);
        // libc's malloc and free (in libc.so, or linked in), and the arena's.
        assert_hooked(image, "malloc", 2);
        assert_hooked(image, "free", 2);
    });
}

/// `function` has exactly `count` hooked entries in `image` and no int3 probe.
fn assert_hooked(image: &serde_json::Value, function: &str, count: usize) {
    let sites: Vec<&serde_json::Value> = image["probe_sites"]
        .as_array()
        .expect("probe sites")
        .iter()
        .filter(|site| site["function"] == function)
        .collect();
    let hooked = sites
        .iter()
        .filter(|site| site["implementation"] == "hook")
        .count();
    assert_eq!(hooked, count, "{function}: {sites:#?}");
    assert_eq!(
        sites.len(),
        count,
        "{function} has an int3 probe: {sites:#?}"
    );
}
