//! Whole call stacks, frame by frame: fixtures whose allocations sit at the bottom of chains
//! known from their sources (fixtures/stack_*) are built at -O2 with and without frame
//! pointers, dynamic, static and musl, recorded, and the stack of each allocation (found by
//! its size) is expanded into function names, inlined functions included, and compared with
//! the chain in full: nothing missing, nothing added, and truncated only where the fixture's
//! header says why. A gdb run of the same binaries cross-checks the chains of
//! fixtures/stack_chains.c.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::common::build;
use crate::common::run::{clean_command, run_command};
use crate::common::stacks::{
    assert_chain, for_each_build, Allocation, ProfileStacks, Step, GLIBC_START, LIBC,
};
use crate::common::*;

use Step::{Function as F, Library, LibraryFunction, Truncated};

const CODEGENS: [CodeGen; 2] = [CodeGen::O2FramePointers, CodeGen::O2NoFramePointers];
const ALL_LINKS: [Variant; 3] = [Variant::Dynamic, Variant::Static, Variant::Musl];

/// `inner`, then what follows `main` for `variant`: glibc's start-up frames, or for musl
/// (whose libc has neither CFI nor frame pointers) one or more of its frames and the mark of
/// a walk that could not go on.
fn through_main(inner: &[Step], variant: Variant) -> Vec<Step> {
    let mut chain = inner.to_vec();
    match variant {
        Variant::Musl => chain.extend([Library(LIBC), Truncated]),
        _ => chain.extend(GLIBC_START),
    }
    chain
}

/// The canonical path of a fixture, as the profile's module records name it.
fn canonical(path: &Path) -> std::path::PathBuf {
    path.canonicalize()
        .unwrap_or_else(|error| panic!("resolving {}: {error}", path.display()))
}

fn heap_image<'a>(report: &'a Value, fixture: &Path, args: &[&str]) -> &'a Value {
    let image = launched_image(report, fixture, args);
    assert_exit(image, "code", Some(0));
    image
}

/// fixtures/stack_chains.c: twelve levels, recursion, a comparator called by qsort, and a
/// signal handler entered from raise() and from kill().
#[test]
fn stacks_of_deep_recursive_qsort_and_signal_chains() {
    for_each_build(
        "stack_chains",
        &ALL_LINKS,
        &CODEGENS,
        |variant, _, fixture| {
            let recording = record(fixture, &[], None);
            assert_eq!(
                String::from_utf8_lossy(&recording.native.stdout),
                "stack_chains: 5 blocks allocated\n"
            );
            let own = HeapExpectation {
                calls: calls(&[("malloc", 5), ("free", 4)]),
                returned_calls: 5,
                allocations: 5,
                bytes_allocated: 1201 + 1202 + 1203 + 1204 + 1205,
                frees: 4,
                peak_live_bytes: 1201 + 1202 + 1203 + 1204 + 1205,
                peak_live_blocks: 5,
                live_bytes_at_exit: 1205,
                live_blocks_at_exit: 1,
                largest_allocation: 1205,
                ..Default::default()
            };
            // glibc's qsort frees its temporary buffer, NULL when the array fit on the stack.
            let glibc = HeapExpectation {
                calls: calls(&[("malloc", 5), ("free", 5)]),
                null_frees: 1,
                ..own.clone()
            };
            let expected = match variant {
                Variant::Dynamic => glibc,
                Variant::Static => glibc.plus_static_startup(GlibcStaticStartup::of(fixture)),
                Variant::Musl => own,
            };
            assert_heap(heap_image(&recording.report, fixture, &[]), &expected);

            let stacks = ProfileStacks::read(&recording.profile);
            let exe = canonical(fixture);
            let levels: Vec<Step> = (1..=12)
                .rev()
                .map(|level| F(LEVEL_NAMES[level - 1]))
                .chain([F("main")])
                .collect();
            let mut recursion = vec![F("recurse"); 8];
            recursion.extend([F("recursion"), F("main")]);
            let chains: [(u64, Vec<Step>); 5] = match variant {
                Variant::Musl => [
                    (1201, through_main(&levels, variant)),
                    (1202, through_main(&recursion, variant)),
                    // musl's qsort, raise and kill have no CFI: the walk stops inside them.
                    (1203, vec![F("compare"), Library(LIBC), Truncated]),
                    (
                        1204,
                        vec![F("on_signal"), F("__restore_rt"), Library(LIBC), Truncated],
                    ),
                    (
                        1205,
                        vec![F("on_signal"), F("__restore_rt"), Library(LIBC), Truncated],
                    ),
                ],
                _ => [
                    (1201, through_main(&levels, variant)),
                    (1202, through_main(&recursion, variant)),
                    (
                        1203,
                        through_main(
                            &[F("compare"), Library(LIBC), F("sort_values"), F("main")],
                            variant,
                        ),
                    ),
                    (
                        1204,
                        through_main(
                            &[
                                F("on_signal"),
                                F("__restore_rt"),
                                Library(LIBC),
                                F("send_raise"),
                                F("signals"),
                                F("main"),
                            ],
                            variant,
                        ),
                    ),
                    (
                        1205,
                        through_main(
                            &[
                                F("on_signal"),
                                F("__restore_rt"),
                                Library(LIBC),
                                F("send_kill"),
                                F("signals"),
                                F("main"),
                            ],
                            variant,
                        ),
                    ),
                ],
            };
            for (size, chain) in &chains {
                assert_chain(stacks.with_size(*size), chain, variant, &exe);
            }
            // The signal trampoline is libc's (linked into a static program).
            for size in [1204, 1205] {
                let trampoline = &stacks.with_size(size).frames[1];
                let module = Path::new(&trampoline.module);
                match variant {
                    Variant::Dynamic => assert!(
                        module
                            .file_name()
                            .is_some_and(|name| name.to_string_lossy().starts_with(LIBC)),
                        "{trampoline:?}"
                    ),
                    _ => assert_eq!(module, exe, "{trampoline:?}"),
                }
            }
        },
    );
}

const LEVEL_NAMES: [&str; 12] = [
    "level_01", "level_02", "level_03", "level_04", "level_05", "level_06", "level_07", "level_08",
    "level_09", "level_10", "level_11", "level_12",
];

/// fixtures/stack_threads.c: three threads with distinct chains down from start_thread.
#[test]
fn stacks_of_threads_start_in_the_thread_library() {
    for_each_build(
        "stack_threads",
        &ALL_LINKS,
        &CODEGENS,
        |variant, _, fixture| {
            let recording = record(fixture, &[], None);
            assert_eq!(
                String::from_utf8_lossy(&recording.native.stdout),
                "stack_threads: 4 blocks from 3 threads and main\n"
            );
            let own = HeapExpectation {
                calls: calls(&[("malloc", 4), ("free", 4)]),
                returned_calls: 4,
                allocations: 4,
                bytes_allocated: 1401 + 1402 + 1403 + 1404,
                frees: 4,
                peak_live_bytes: 1401 + 1402 + 1403 + 1404,
                peak_live_blocks: 4,
                largest_allocation: 1404,
                ..Default::default()
            };
            // glibc: one DTV of 272 bytes for the first thread, kept (the next threads reuse
            // its stack and DTV); each reuse of the cached stack frees the 15 DTV slots' blocks,
            // all NULL; at each thread's exit its tcache is freed (an unknown free), and the
            // dynamic libc frees NULL twice.
            let glibc = |null_frees_per_thread: u64| HeapExpectation {
                calls: calls(&[
                    ("malloc", 4),
                    ("calloc", 1),
                    ("free", 4 + 2 * 15 + 3 * (1 + null_frees_per_thread)),
                ]),
                returned_calls: 5,
                allocations: 5,
                bytes_allocated: own.bytes_allocated + 272,
                null_frees: 2 * 15 + 3 * null_frees_per_thread,
                unknown_frees: 3,
                peak_live_bytes: own.peak_live_bytes + 272,
                peak_live_blocks: 5,
                live_bytes_at_exit: 272,
                live_blocks_at_exit: 1,
                ..own.clone()
            };
            let expected = match variant {
                Variant::Dynamic => glibc(2),
                Variant::Static => glibc(0).plus_static_startup(GlibcStaticStartup::of(fixture)),
                Variant::Musl => own,
            };
            assert_heap(heap_image(&recording.report, fixture, &[]), &expected);

            let stacks = ProfileStacks::read(&recording.profile);
            let exe = canonical(fixture);
            let thread_start: Vec<Step> = match variant {
                // glibc's clone3 marks the outermost frame with its CFI.
                Variant::Dynamic | Variant::Static => vec![
                    LibraryFunction(LIBC, &["start_thread"]),
                    LibraryFunction(LIBC, &["clone3"]),
                ],
                Variant::Musl => vec![Library(LIBC), Truncated],
            };
            let threads: [(u64, &[&str]); 3] = [
                (1401, &["alpha_leaf", "alpha_middle", "alpha_entry"]),
                (1402, &["beta_leaf", "beta_entry"]),
                (
                    1403,
                    &[
                        "gamma_leaf",
                        "gamma_leaf_caller",
                        "gamma_middle",
                        "gamma_entry",
                    ],
                ),
            ];
            let mut thread_ids = HashSet::new();
            for (size, names) in threads {
                let mut chain: Vec<Step> = names.iter().map(|name| F(name)).collect();
                chain.extend(thread_start.iter().copied());
                let allocation = stacks.with_size(size);
                assert_chain(allocation, &chain, variant, &exe);
                assert_ne!(allocation.tid, allocation.pid, "{}", allocation.describe());
                thread_ids.insert(allocation.tid);
            }
            assert_eq!(thread_ids.len(), 3, "each block comes from its own thread");
            let main = stacks.with_size(1404);
            assert_chain(
                main,
                &through_main(&[F("main_leaf"), F("main")], variant),
                variant,
                &exe,
            );
            assert_eq!(main.tid, main.pid);
        },
    );
}

/// fixtures/stack_templates.cpp: template functions inlined into others, allocating with
/// new; the inlined functions are frames of their own. Also libstdc++'s allocation before
/// main, whose stack in a dynamic program ends in the dynamic linker's entry code.
#[test]
fn stacks_of_inlined_templates_show_each_inlined_function() {
    let links = [Variant::Dynamic, Variant::Static];
    for_each_build(
        "stack_templates",
        &links,
        &CODEGENS,
        |variant, _, fixture| {
            let recording = record(fixture, &[], None);
            assert_eq!(
                String::from_utf8_lossy(&recording.native.stdout),
                "stack_templates: 1301 + 1302 bytes\n"
            );
            let pool = 72704;
            let own = HeapExpectation {
                calls: calls(&[("malloc", 3), ("free", 2)]),
                returned_calls: 3,
                allocations: 3,
                bytes_allocated: pool + 1301 + 1302,
                frees: 2,
                peak_live_bytes: pool + 1301 + 1302,
                peak_live_blocks: 3,
                live_bytes_at_exit: pool,
                live_blocks_at_exit: 1,
                largest_allocation: pool,
                ..Default::default()
            };
            let expected = match variant {
                Variant::Static => own.plus_static_startup(GlibcStaticStartup::of(fixture)),
                _ => own,
            };
            assert_heap(heap_image(&recording.report, fixture, &[]), &expected);

            let stacks = ProfileStacks::read(&recording.profile);
            let exe = canonical(fixture);
            let new = F("operator new(unsigned long)");
            let widget = stacks.with_size(1301);
            assert_chain(
                widget,
                &through_main(
                    &[
                        new,
                        F("Widget* make_node<Widget, 3>()"),
                        F("Widget* wrap<Widget, 3>()"),
                        F("Widget* build<Widget, 3>()"),
                        F("main"),
                    ],
                    variant,
                ),
                variant,
                &exe,
            );
            let inlined: Vec<bool> = widget.frames[1..4].iter().map(|f| f.inlined).collect();
            assert_eq!(inlined, [true, true, false], "{}", widget.describe());
            // operator new[] jumps to operator new (a tail call), so it has no frame.
            let buffer = stacks.with_size(1302);
            assert_chain(
                buffer,
                &through_main(
                    &[
                        new,
                        F("char* fill_buffer<char, (unsigned long)1302>()"),
                        F("Holder<char>::grow()"),
                        F("Holder<char>::reset()"),
                        F("build_holder(Holder<char>*)"),
                        F("main"),
                    ],
                    variant,
                ),
                variant,
                &exe,
            );
            let inlined: Vec<bool> = buffer.frames[1..5].iter().map(|f| f.inlined).collect();
            assert_eq!(inlined, [true, false, true, false], "{}", buffer.describe());
            // Before main: libstdc++'s emergency pool, from its static initialiser.
            let before_main: Vec<Step> = match variant {
                // libstdc++.so.6 names only its exported functions; the dynamic linker runs the
                // initialiser (call_init, _dl_init) from its entry code, the outermost frame.
                Variant::Dynamic => vec![Library("libstdc++.so"), Library("ld-linux-x86-64.so")],
                _ => vec![
                    F("_GLOBAL__sub_I_eh_alloc.cc"),
                    LibraryFunction(LIBC, &["__libc_start_main_impl"]),
                    F("_start"),
                ],
            };
            assert_chain(stacks.with_size(pool), &before_main, variant, &exe);
        },
    );
}

/// fixtures/stack_dlopen.c: the frames of a library that was dlopen()ed, then dlclose()d and
/// replaced by another at the same address, are named from the library that made the call.
#[test]
fn stacks_through_unloaded_libraries_keep_their_names() {
    for_each_build(
        "stack_dlopen",
        &[Variant::Dynamic],
        &CODEGENS,
        |variant, codegen, fixture| {
            let plugin = shared_object_with("stack_plugin", codegen);
            let next = shared_object_with("stack_plugin_next", codegen);
            let args = [plugin.to_str().unwrap(), next.to_str().unwrap()];
            let recording = record(fixture, &args, None);
            assert_eq!(
                String::from_utf8_lossy(&recording.native.stdout),
                "stack_dlopen: both blocks outlived their libraries\n"
            );
            heap_image(&recording.report, fixture, &args);

            let stacks = ProfileStacks::read(&recording.profile);
            let exe = canonical(fixture);
            let module = |path: &Path| {
                let path = canonical(path).to_string_lossy().into_owned();
                stacks
                    .modules
                    .iter()
                    .find(|module| module.path == path)
                    .unwrap_or_else(|| panic!("no module {path} in {:#?}", stacks.modules))
                    .clone()
            };
            let (first, second) = (module(&plugin), module(&next));
            assert_eq!(
                (first.start, first.end),
                (second.start, second.end),
                "the second library should take the first one's place"
            );
            for (size, inner, library) in [
                (
                    1501,
                    &["plugin_leaf", "plugin_middle", "plugin_entry"][..],
                    &first,
                ),
                (1502, &["next_leaf", "next_entry"][..], &second),
            ] {
                let mut chain: Vec<Step> = inner.iter().map(|name| F(name)).collect();
                chain.extend([F("call_plugin"), F("load_and_call"), F("main")]);
                let allocation = stacks.with_size(size);
                assert_chain(allocation, &through_main(&chain, variant), variant, &exe);
                for frame in &allocation.frames[..inner.len()] {
                    assert_eq!(frame.module, library.path, "{}", allocation.describe());
                }
            }
        },
    );
}

/// fixtures/stack_fortran.f90: an ALLOCATE in a chain of module procedures, and an
/// allocation libgfortran makes for TRIM.
#[test]
fn stacks_of_fortran_and_libgfortran() {
    let links = [Variant::Dynamic, Variant::Static];
    for_each_build("stack_fortran", &links, &CODEGENS, |variant, _, fixture| {
        let recording = record(fixture, &[], None);
        assert_eq!(
            String::from_utf8_lossy(&recording.native.stdout),
            "stack_fortran: total 3203\n"
        );
        heap_image(&recording.report, fixture, &[]);

        let stacks = ProfileStacks::read(&recording.profile);
        let exe = canonical(fixture);
        // Module procedures keep their linkage names (__MODULE_MOD_NAME); the main program
        // is named by DWARF (its symbol is MAIN__).
        let allocate = stacks.with_size(1601);
        assert_chain(
            allocate,
            &through_main(
                &[
                    F("__chains_MOD_allocate_leaf"),
                    F("__chains_MOD_allocate_middle"),
                    F("__chains_MOD_allocate_outer"),
                    F("stack_fortran"),
                    F("main"),
                ],
                variant,
            ),
            variant,
            &exe,
        );
        // _gfortran_string_trim allocates through libgfortran's xmallocarray, which
        // libgfortran.so.5 does not name (it has no symbol table).
        let trim = stacks.with_size(1602);
        assert_chain(
            trim,
            &through_main(
                &[
                    LibraryFunction("libgfortran.so", &["_gfortrani_xmallocarray"]),
                    F("_gfortran_string_trim"),
                    F("__chains_MOD_trim_leaf"),
                    F("__chains_MOD_trim_outer"),
                    F("stack_fortran"),
                    F("main"),
                ],
                variant,
            ),
            variant,
            &exe,
        );
    });
}

/// gdb's frames for one allocation of the stack oracle.
struct GdbStack {
    frames: Vec<Value>,
    tailcalls: Vec<String>,
}

/// Runs fixtures/tools/gdb_stack_oracle.py on `fixture` for allocations of `sizes`.
fn gdb_stacks(fixture: &Path, sizes: &[u64]) -> Vec<(u64, GdbStack)> {
    let script = build::fixtures_source_dir().join("tools/gdb_stack_oracle.py");
    let mut command = clean_command("gdb");
    let sizes_text: Vec<String> = sizes.iter().map(u64::to_string).collect();
    command
        .env("STACK_ORACLE_SIZES", sizes_text.join(","))
        .args(["-batch", "-nx", "-x"])
        .arg(&script)
        .arg("--args")
        .arg(fixture);
    let output = run_command(command, None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("STACK-ORACLE-DONE"),
        "gdb failed ({:?}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("STACK-ORACLE "))
        .map(|json| {
            let value: Value = serde_json::from_str(json).expect("the oracle prints JSON");
            let size = value["size"].as_u64().expect("a size");
            let frames = value["frames"].as_array().cloned().unwrap_or_default();
            let tailcalls = value["tailcalls"]
                .as_array()
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|name| name.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            (size, GdbStack { frames, tailcalls })
        })
        .collect()
}

/// A function name without the suffixes of GCC's clones (`.part.0`, `.constprop.0`, ...),
/// which gdb does not always print in full.
fn without_clone_suffix(name: &str) -> &str {
    const CLONES: [&str; 5] = [".part", ".constprop", ".isra", ".cold", ".lto_priv"];
    let cut = CLONES
        .iter()
        .filter_map(|suffix| name.find(suffix))
        .min()
        .unwrap_or(name.len());
    &name[..cut]
}

/// Compares memsup's stack of `allocation` up to `main` with gdb's: the same number of
/// frames, each in the same module, inlined where gdb's is an inline frame, the signal
/// trampoline where gdb's is a signal frame, and the same name wherever gdb named the frame
/// from debug information or from the executable's own symbol table (gdb names a local
/// function of libc.so.6 without its debug file after the nearest exported symbol).
fn compare_with_gdb(allocation: &Allocation, gdb: &GdbStack, exe: &Path) -> Result<(), String> {
    let main = allocation
        .frames
        .iter()
        .position(|frame| frame.function == "main")
        .ok_or("memsup's stack has no main")?;
    let ours = &allocation.frames[..=main];
    if ours.len() != gdb.frames.len() {
        return Err(format!(
            "memsup has {} frames up to main, gdb {}",
            ours.len(),
            gdb.frames.len()
        ));
    }
    let exe = exe.to_string_lossy();
    for (index, (frame, theirs)) in ours.iter().zip(&gdb.frames).enumerate() {
        let module = theirs["module"].as_str().unwrap_or("");
        let their_module = canonical(Path::new(module));
        if Path::new(&frame.module) != their_module {
            return Err(format!(
                "frame #{index}: module differs from gdb's {module}"
            ));
        }
        let kind = theirs["kind"].as_str().unwrap_or("");
        if frame.inlined != (kind == "inline") {
            return Err(format!("frame #{index}: gdb's frame is of kind {kind}"));
        }
        if (kind == "sigtramp") != (frame.function == "__restore_rt") {
            return Err(format!("frame #{index}: gdb's frame is of kind {kind}"));
        }
        let name = theirs["name"].as_str().unwrap_or("");
        let named_by_gdb = theirs["dwarf"].as_bool() == Some(true) || frame.module == exe;
        if kind != "sigtramp"
            && named_by_gdb
            && without_clone_suffix(&frame.function) != without_clone_suffix(name)
        {
            return Err(format!("frame #{index}: gdb names it {name}"));
        }
    }
    Ok(())
}

/// gdb, stopped at malloc for the allocations of fixtures/stack_chains.c, finds the same
/// frames as memsup (glibc builds: gdb cannot walk musl's libc either).
#[test]
fn gdb_finds_the_same_stacks() {
    if !require_tool("gdb") {
        return;
    }
    let sizes = [1201, 1202, 1203, 1204, 1205];
    let links = [Variant::Dynamic, Variant::Static];
    for_each_build("stack_chains", &links, &CODEGENS, |_, _, fixture| {
        let recording = record(fixture, &[], None);
        let stacks = ProfileStacks::read(&recording.profile);
        let seen = gdb_stacks(fixture, &sizes);
        let seen_sizes: Vec<u64> = seen.iter().map(|(size, _)| *size).collect();
        assert_eq!(seen_sizes, sizes, "gdb stopped at these allocations");
        let exe = canonical(fixture);
        for (size, gdb) in &seen {
            let allocation = stacks.with_size(*size);
            assert!(!allocation.is_truncated(), "{}", allocation.describe());
            if let Err(problem) = compare_with_gdb(allocation, gdb, &exe) {
                panic!(
                    "{problem}\nmemsup: {}\ngdb (tail-call frames left out: {:?}):\n{:#?}",
                    allocation.describe(),
                    gdb.tailcalls,
                    gdb.frames
                );
            }
        }
    });
}
