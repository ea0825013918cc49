//! fixtures/dlopen_main.c and fixtures/dlopen_arena.c: an allocator (mi_malloc and mi_free,
//! probed as malloc and free) in a library dlopen()ed after start is probed, the libc calls
//! dlopen and dlclose make are counted, and nothing goes wrong once the library is unloaded.

use crate::common::expect::SiteExpectation;
use crate::common::*;

/// The whole run, from the comment at the top of fixtures/dlopen_main.c: the program's own
/// libc calls, dlopen's and dlclose's (counted with the gdb oracle), and the 5 mi_malloc and
/// 5 mi_free calls (4 blocks and NULL) made in use_arena.
pub fn expected_heap() -> HeapExpectation {
    HeapExpectation {
        calls: calls(&[
            ("malloc", 8 + 5),
            ("calloc", 1),
            ("realloc", 1),
            ("free", 12 + 5),
        ]),
        // _dl_new_object's realloc(NULL, 146) calls malloc.
        nested_calls: 1,
        returned_calls: 10 + 5,
        allocations: 10 + 5,
        bytes_allocated: 60408 + (96 + 160 + 224 + 288 + 352),
        frees: 8 + 4,
        null_frees: 4 + 1,
        peak_live_bytes: 50000 + 2304 + 2222 + 1111 + 352,
        peak_live_blocks: 5,
        live_bytes_at_exit: 2222 + 2304 + 352,
        live_blocks_at_exit: 3,
        largest_allocation: 50000,
        ..Default::default()
    }
}

#[test]
fn allocator_of_a_dlopened_library_is_probed() {
    // Dynamic glibc only: a static glibc program can dlopen only with the very glibc it was
    // linked with installed as shared objects (and it warns at link time), and musl's static
    // dlopen always fails; neither is a supported way to load a plugin.
    if !require_tool("gcc") {
        return;
    }
    let library = shared_object("dlopen_arena");
    let fixture = fixture("dlopen_main", Variant::Dynamic);
    let directory = library.parent().expect("a library lives in a directory");
    // _dl_new_object makes its origin buffer with realloc(NULL, 18 + 128) and grows it while
    // the working directory (where the program opens ./dlopen_arena.so) does not fit.
    assert!(
        directory.as_os_str().len() < 128,
        "the fixtures directory {} is 128 bytes or longer: dlopen would make more calls than \
         fixtures/dlopen_main.c expects",
        directory.display()
    );
    let library = library.to_str().expect("a UTF-8 fixtures path");
    let recording = record(&fixture, &[library], None);
    assert_eq!(recording.native.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&recording.native.stdout),
        "dlopen_main: arena used 1120 bytes, 1 block live\ndlopen_main: done, leaking 2222 bytes\n"
    );
    let image = launched_image(&recording.report, &fixture, &[library]);
    assert_exit(image, "code", Some(0));
    let expected = expected_heap();
    assert_heap(image, &expected);
    assert_sites(image, &expected_sites());
    assert_probe_costs(image, &expected, 0, 0);
}

/// The sites of the whole run, largest live bytes first.
pub fn expected_sites() -> Vec<SiteExpectation> {
    vec![
        site(Some("after_dlclose"), 50000, 1).with_totals(1, 50000),
        // _dl_find_object_update in ld.so, which has no symbol table here (it is named only
        // with debug symbols).
        site(None, 2304, 1).with_totals(1, 2304),
        site(Some("before_dlopen"), 2222, 1).with_totals(1, 2222),
        site(Some("before_dlopen"), 1111, 1).with_totals(1, 1111),
        // Every mi_malloc: only the last block (352 bytes) is never freed.
        site(Some("use_arena"), 352, 1).with_totals(5, 1120),
    ]
}
