//! fixtures/pool_arenas.c: a program with its own pool allocator keeps 8 MiB resident in
//! live mmap'd arenas after its malloc'd blocks are freed. Live requested bytes fall from
//! 8,000,000 to 0 while RSS stays, yet the allocator holds none of it: no fragmentation
//! warning (fixtures/fragmentation.c, whose freed blocks glibc keeps, still has one:
//! components.rs).

use serde_json::Value;

use crate::common::*;

#[test]
fn resident_pool_arenas_are_no_fragmentation() {
    let program = fixture("pool_arenas", Variant::Dynamic);
    let recording = record(&program, &[], None);
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        "pool_arenas: 32 arenas, 262144 objects, checksum 33423360\n"
    );
    let image = launched_image(&recording.report, &program, &[]);
    assert_exit(image, "code", Some(0));
    assert_eq!(number(image, "/allocations"), 2000);
    assert_eq!(number(image, "/bytes_allocated"), 8_000_000);
    assert_eq!(number(image, "/frees"), 2000);
    assert_eq!(number(image, "/peak_live_bytes"), 8_000_000);
    assert_eq!(number(image, "/live_bytes_at_exit"), 0);
    // The arenas: 32 mmap calls of 256 KiB from the program's own code.
    let arenas: Vec<&Value> = (image["mapping_sites"].as_array().unwrap().iter())
        .filter(|site| number(site, "/mmap_bytes") == 32 * 256 * 1024)
        .collect();
    assert_eq!(arenas.len(), 1, "{:#}", image["mapping_sites"]);
    assert_eq!(number(arenas[0], "/calls/mmap"), 32);
    let warnings: Vec<&str> = (image["warnings"].as_array().unwrap().iter())
        .filter_map(Value::as_str)
        .filter(|warning| warning.starts_with("fragmentation:"))
        .collect();
    assert_eq!(warnings, Vec::<&str>::new(), "no fragmentation warning");
    // The RSS stayed: the arenas' 8 MiB is resident at exit, held by the program.
    let snapshots = image["snapshots"].as_array().unwrap();
    let at_exit = snapshots.last().expect("an exit snapshot");
    assert!(number(at_exit, "/rss") >= 32 * 256 * 1024, "{at_exit}");
}
