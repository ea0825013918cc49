use super::*;

fn alloc(time_ns: u64, address: u64, size: u64, stack: StackId) -> HeapEvent {
    HeapEvent {
        time_ns,
        stack,
        call: HeapCall::Alloc { address, size },
    }
}

fn free(time_ns: u64, address: u64) -> HeapEvent {
    HeapEvent {
        time_ns,
        stack: 0,
        call: HeapCall::Free { address },
    }
}

fn realloc(time_ns: u64, (old_address, new_address): (u64, u64), size: u64) -> HeapEvent {
    HeapEvent {
        time_ns,
        stack: 9,
        call: HeapCall::Realloc {
            old_address,
            new_address,
            size,
        },
    }
}

fn block(address: u64, size: u64, stack: StackId, time_ns: u64, sequence: u64) -> Block {
    Block {
        address,
        size,
        stack,
        time_ns,
        sequence,
    }
}

#[test]
fn an_allocation_creates_a_block_and_its_free_releases_it() {
    let mut heap = LiveHeap::default();
    let created = heap.apply(alloc(10, 0x100, 24, 3));
    assert_eq!(
        created,
        Outcome {
            sequence: 0,
            created: Some(block(0x100, 24, 3, 10, 0)),
            ..Outcome::default()
        }
    );
    assert_eq!((heap.live_bytes(), heap.live_blocks()), (24, 1));
    let released = heap.apply(free(20, 0x100));
    assert_eq!(
        released,
        Outcome {
            sequence: 1,
            released: Some(block(0x100, 24, 3, 10, 0)),
            ..Outcome::default()
        }
    );
    assert_eq!((heap.live_bytes(), heap.live_blocks()), (0, 0));
}

#[test]
fn null_results_fail_only_for_a_size() {
    let mut heap = LiveHeap::default();
    assert!(heap.apply(alloc(1, 0, 64, 1)).failed);
    let empty = heap.apply(alloc(2, 0, 0, 1));
    assert_eq!(
        empty,
        Outcome {
            sequence: 1,
            ..Outcome::default()
        }
    );
    let null_free = heap.apply(free(3, 0));
    assert!(null_free.null_free);
    assert_eq!(null_free.unknown_free, None);
    assert_eq!(heap.live_blocks(), 0);
}

#[test]
fn a_free_of_an_address_never_allocated_is_unknown() {
    let mut heap = LiveHeap::default();
    heap.apply(alloc(1, 0x100, 8, 1));
    let outcome = heap.apply(free(2, 0x200));
    assert_eq!(outcome.unknown_free, Some(0x200));
    assert_eq!(outcome.released, None);
    assert_eq!(heap.live_bytes(), 8);
}

#[test]
fn an_address_handed_out_again_replaces_the_block_whose_free_was_missed() {
    let mut heap = LiveHeap::default();
    heap.apply(alloc(1, 0x100, 8, 1));
    let outcome = heap.apply(alloc(5, 0x100, 32, 2));
    assert_eq!(outcome.replaced, Some(block(0x100, 8, 1, 1, 0)));
    assert_eq!(outcome.created, Some(block(0x100, 32, 2, 5, 1)));
    assert_eq!(outcome.released, None);
    assert_eq!((heap.live_bytes(), heap.live_blocks()), (32, 1));
}

#[test]
fn realloc_in_place_and_moved_release_the_old_block_and_create_the_new() {
    let mut heap = LiveHeap::default();
    heap.apply(alloc(1, 0x100, 8, 1));
    let in_place = heap.apply(realloc(2, (0x100, 0x100), 16));
    assert_eq!(in_place.released, Some(block(0x100, 8, 1, 1, 0)));
    assert_eq!(in_place.replaced, None);
    assert_eq!(in_place.created, Some(block(0x100, 16, 9, 2, 1)));
    let moved = heap.apply(realloc(3, (0x100, 0x300), 40));
    assert_eq!(moved.released, Some(block(0x100, 16, 9, 2, 1)));
    assert_eq!(moved.created, Some(block(0x300, 40, 9, 3, 2)));
    assert_eq!((heap.live_bytes(), heap.live_blocks()), (40, 1));
    let blocks: Vec<Block> = heap.blocks().collect();
    assert_eq!(blocks, vec![block(0x300, 40, 9, 3, 2)]);
}

#[test]
fn realloc_from_null_allocates_and_of_an_unknown_pointer_says_so() {
    let mut heap = LiveHeap::default();
    let from_null = heap.apply(realloc(1, (0, 0x100), 8));
    assert_eq!(from_null.unknown_free, None);
    assert_eq!(from_null.released, None);
    assert_eq!(from_null.created, Some(block(0x100, 8, 9, 1, 0)));
    let from_unknown = heap.apply(realloc(2, (0x500, 0x600), 4));
    assert_eq!(from_unknown.unknown_free, Some(0x500));
    assert_eq!(from_unknown.created, Some(block(0x600, 4, 9, 2, 1)));
    assert_eq!(heap.live_bytes(), 12);
}

#[test]
fn realloc_to_null_frees_with_size_zero_and_fails_with_a_size() {
    let mut heap = LiveHeap::default();
    heap.apply(alloc(1, 0x100, 8, 1));
    heap.apply(alloc(1, 0x200, 16, 1));
    let failed = heap.apply(realloc(2, (0x100, 0), 1 << 40));
    assert!(failed.failed);
    assert_eq!((failed.released, failed.created), (None, None));
    assert_eq!(heap.live_bytes(), 24, "a failed realloc keeps its block");
    let freed = heap.apply(realloc(3, (0x200, 0), 0));
    assert!(!freed.failed);
    assert_eq!(freed.released, Some(block(0x200, 16, 1, 1, 1)));
    assert_eq!(freed.created, None);
    assert_eq!((heap.live_bytes(), heap.live_blocks()), (8, 1));
    let nothing = heap.apply(realloc(4, (0, 0), 0));
    assert_eq!(
        nothing,
        Outcome {
            sequence: 4,
            ..Outcome::default()
        }
    );
}

#[test]
fn clearing_empties_the_heap() {
    let mut heap = LiveHeap::default();
    heap.apply(alloc(1, 0x100, 8, 1));
    heap.apply(alloc(1, 0x200, 16, 1));
    assert_eq!(heap.clear(), 24);
    assert_eq!((heap.live_bytes(), heap.live_blocks()), (0, 0));
    assert_eq!(heap.apply(free(2, 0x100)).unknown_free, Some(0x100));
}

#[test]
fn only_the_first_exec_of_an_image_without_events_names_it() {
    let mut launched = ImageLifecycle::default();
    assert!(!launched.had_exec());
    assert_eq!(launched.exec(), ExecEffect::Names);
    assert!(launched.had_exec());
    assert_eq!(launched.exec(), ExecEffect::StartsImage, "a second exec");

    let mut busy = ImageLifecycle::default();
    busy.event();
    assert_eq!(busy.exec(), ExecEffect::StartsImage, "after an event");
    assert_eq!(
        busy.exec(),
        ExecEffect::StartsImage,
        "the new image had an exec"
    );

    let mut fresh_after_exec = ImageLifecycle::default();
    fresh_after_exec.exec();
    fresh_after_exec.event();
    assert_eq!(fresh_after_exec.exec(), ExecEffect::StartsImage);
}
