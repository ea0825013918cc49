//! fixtures/dlopen_many.c: twenty libraries dlopen()ed one after another while two threads
//! allocate. Every block a library allocates has its whole stack through that library
//! (under the hook engine, each library's unwind tables are published before its code
//! runs), and the profile counts what the hooks' walks cost.

use std::path::Path;

use serde_json::Value;

use crate::common::stacks::{assert_chain, ProfileStacks, Step, GLIBC_START};
use crate::common::*;

use Step::Function as F;

const LIBRARIES: u64 = 20;

fn canonical(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|error| panic!("resolving {}: {error}", path.display()))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn twenty_libraries_loaded_while_threads_allocate_have_whole_stacks() {
    if !require_tool("gcc") {
        return;
    }
    let plugin = shared_object("dlopen_many_plugin");
    let directory = tempfile::tempdir().unwrap();
    for index in 0..LIBRARIES {
        let copy = directory.path().join(format!("plugin_{index:02}.so"));
        std::fs::copy(&plugin, copy).unwrap();
    }
    let fixture = fixture("dlopen_many", Variant::Dynamic);
    let args = [directory.path().to_str().unwrap()];
    let recording = record(&fixture, &args, None);
    assert_eq!(recording.native.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        "dlopen_many: 20 libraries, 2 workers\n"
    );
    let image = launched_image(&recording.report, &fixture, &args);
    assert_exit(image, "code", Some(0));

    let stacks = ProfileStacks::read(&recording.profile);
    let exe = fixture.canonicalize().unwrap();
    for index in 0..LIBRARIES {
        let allocation = stacks.with_size(2000 + index);
        let mut chain = vec![
            F("plugin_leaf"),
            F("plugin_allocate"),
            F("call_plugin"),
            F("main"),
        ];
        chain.extend(GLIBC_START);
        assert_chain(allocation, &chain, Variant::Dynamic, &exe);
        let library = canonical(&directory.path().join(format!("plugin_{index:02}.so")));
        for frame in &allocation.frames[..2] {
            assert_eq!(frame.module, library, "{}", allocation.describe());
        }
    }
    assert_walk_costs(image);
    // memsup's own use closes the profile: its peak RSS at least its own code and rings.
    let recorder = &recording.report["recorder"];
    let peak = recorder["peak_rss_bytes"].as_u64().unwrap();
    assert!((4 << 20..4 << 30).contains(&peak), "{recorder}");
    assert!(recorder["cpu_ns"].as_u64().unwrap() > 0, "{recorder}");
}

/// Under the hook engine every allocator call but a free was walked to its end, once each.
fn assert_walk_costs(image: &Value) {
    let costs = &image["hook_stacks"];
    if !recorded_by_hooks(image) {
        assert!(costs.is_null(), "{costs}");
        assert!(image["hook_calls"].is_null(), "{image}");
        return;
    }
    // Every allocator call but a free (nested calls are not calls).
    let walked_calls = image["calls"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| *name != "free")
        .map(|(_, count)| count.as_u64().unwrap())
        .sum::<u64>();
    let mappings = image["mappings"]["calls"]
        .as_object()
        .unwrap()
        .values()
        .map(|count| count.as_u64().unwrap())
        .sum::<u64>();
    let number = |key: &str| {
        costs[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {costs}"))
    };
    // Mapping calls in run mode are seen at system-call level, not by hooks.
    assert!(mappings > 0);
    assert_eq!(number("walks"), walked_calls, "{costs}");
    assert_eq!(number("truncated"), 0, "{costs}");
    assert_eq!(number("unwalked"), 0, "{costs}");
    assert_eq!(number("lost"), 0, "{costs}");
    assert_eq!(number("stored_bytes") % 8, 0, "{costs}");
    // The workers' loop is one stack, walked thousands of times and stored once.
    assert!(10 * number("stored_stacks") <= number("walks"), "{costs}");
    // The workers' stack is the shortest: worker_leaf, worker, start_thread, clone3.
    assert!(number("frames") >= 4 * number("walks"), "{costs}");
    // A new stack's second pass, into the store, looks up all its frames but the last; a
    // first pass looks up the rule of each frame it does not take from its thread's last
    // walk, which the workers' loop, walking the same stack again and again, nearly
    // never has to.
    let calls = &image["hook_calls"];
    let second_passes = number("stored_bytes") / 8 - number("stored_stacks");
    let first_passes = calls["rule_lookups"]
        .as_u64()
        .unwrap()
        .checked_sub(second_passes)
        .unwrap_or_else(|| panic!("second passes look up rules: {calls} {costs}"));
    assert!(first_passes < number("frames") / 10, "{calls} {costs}");
    let misses = calls["cache_misses"].as_u64().unwrap();
    assert!(
        misses > 0 && misses < number("frames") / 2,
        "{calls} {costs}"
    );
    let timed = calls["timed_calls"].as_u64().unwrap();
    assert!(timed <= walked_calls + image["calls"]["free"].as_u64().unwrap());
    assert_eq!(
        calls["timed_ns"].as_u64().unwrap() > 0,
        timed > 0,
        "{calls}"
    );
}
