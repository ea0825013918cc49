//! Allocators other than glibc's, preloaded into fixtures/alloc_script.c (jemalloc, tcmalloc,
//! mimalloc from Debian's packages): their own entries are hooked under `--engine hooks`,
//! and both engines record the same calls, bytes, peaks and leaks, which are the fixture's
//! known numbers plus what each allocator's own start-up allocates.

use serde_json::Value;

use crate::common::engine::late_allowance;
use crate::common::report::processes;
use crate::common::tools::require_file;
use crate::common::*;
use crate::engines::EXACT_FIELDS;

const LIBRARIES: &str = "/usr/lib/x86_64-linux-gnu";

/// An allocator library and the numbers of alloc_script's image under it.
struct Allocator {
    file: &'static str,
    package: &'static str,
    allocations: u64,
    bytes_allocated: u64,
    frees: u64,
    live_bytes_at_exit: u64,
}

/// alloc_script itself: 9 allocations of 19,628 bytes, 6 frees of a block (one more of
/// NULL), 1,128 bytes leaked in 3 blocks. jemalloc and tcmalloc are C++ libraries: libstdc++
/// comes with them and allocates its 72,704-byte emergency exception pool, never freed;
/// tcmalloc's start-up (TCMallocGuard) also allocates and frees two 1-byte blocks.
const ALLOCATORS: [Allocator; 3] = [
    Allocator {
        file: "libjemalloc.so.2",
        package: "libjemalloc2",
        allocations: 10,
        bytes_allocated: 19_628 + 72_704,
        frees: 6,
        live_bytes_at_exit: 1_128 + 72_704,
    },
    Allocator {
        file: "libtcmalloc_minimal.so.4",
        package: "libtcmalloc-minimal4",
        allocations: 12,
        bytes_allocated: 19_628 + 72_704 + 2,
        frees: 8,
        live_bytes_at_exit: 1_128 + 72_704,
    },
    Allocator {
        file: "libmimalloc.so.2",
        package: "libmimalloc2.0",
        allocations: 9,
        bytes_allocated: 19_628,
        frees: 6,
        live_bytes_at_exit: 1_128,
    },
];

/// alloc_script's image, recorded by `engine` with `library` preloaded into it (through
/// env, so that memsup itself runs on glibc's allocator).
fn recorded_by(engine: &str, library: &str) -> Value {
    let fixture = fixture("alloc_script", Variant::Dynamic);
    let preload = format!("LD_PRELOAD={library}");
    let args = [preload.as_str(), fixture.to_str().expect("a UTF-8 path")];
    let options = ["--stacks", "caller", "--engine", engine];
    // The fixture's output and exit status are checked against a native run inside.
    let recording = record_with_options(&options, "/usr/bin/env".as_ref(), &args, None);
    let images = processes(&recording.report);
    assert_eq!(
        images.len(),
        2,
        "env, then alloc_script: {:#}",
        recording.report
    );
    images[1].clone()
}

fn exact_numbers(image: &Value) -> Vec<Value> {
    EXACT_FIELDS
        .iter()
        .map(|field| image.pointer(field).cloned().unwrap_or(Value::Null))
        .collect()
}

/// The probe sites of the allocator's main entries that are not hooks.
fn unhooked_main_entries(image: &Value) -> Vec<String> {
    image["probe_sites"]
        .as_array()
        .expect("probe sites")
        .iter()
        .filter(|site| {
            let function = site["function"].as_str().unwrap_or_default();
            ["malloc", "free", "calloc", "realloc"].contains(&function)
                && site["implementation"] != "hook"
        })
        .map(|site| site.to_string())
        .collect()
}

#[test]
fn preloaded_allocators_are_hooked_and_recorded_alike_by_both_engines() {
    let mut failures = Vec::new();
    for allocator in &ALLOCATORS {
        let library = format!("{LIBRARIES}/{}", allocator.file);
        if !require_file(&library, allocator.package) {
            continue;
        }
        let outcome = std::panic::catch_unwind(|| {
            let hooks = recorded_by("hooks", &library);
            let int3 = recorded_by("int3", &library);
            showing_on_failure(&hooks, || {
                assert_eq!(hooks["engine"], "hooks");
                assert_eq!(unhooked_main_entries(&hooks), Vec::<String>::new());
                assert_eq!(number(&hooks, "/allocations"), allocator.allocations);
                assert_eq!(
                    number(&hooks, "/bytes_allocated"),
                    allocator.bytes_allocated
                );
                assert_eq!(number(&hooks, "/frees"), allocator.frees);
                assert_eq!(number(&hooks, "/null_frees"), 1);
                assert_eq!(
                    number(&hooks, "/live_bytes_at_exit"),
                    allocator.live_bytes_at_exit
                );
                assert_eq!(number(&hooks, "/hooks/dropped"), 0);
                let late = number(&hooks, "/hooks/late");
                assert!(late <= late_allowance(&hooks, 0, 0), "{late} late");
                assert_eq!(number(&hooks, "/probes/entry_hits"), 0);
                assert_eq!(exact_numbers(&hooks), exact_numbers(&int3));
            });
        });
        if let Err(panic) = outcome {
            let message = panic_message(panic.as_ref());
            failures.push(format!("--- {}:\n{message}", allocator.file));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
