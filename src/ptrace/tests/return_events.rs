//! The event of a probed call, from the arguments saved at its entry and its result, per
//! function ABI.

use crate::breakpoints::returns::PendingReturn;
use crate::breakpoints::table::ProbeKind;
use crate::events::{EventKind, RawStack};
use crate::ptrace::hits::return_event;
use crate::ptrace::memory::SliceMemory;
use crate::trace::format::{AllocFunction, MapCall};

/// posix_memalign's out-pointer: memory there holds the block's address.
const OUT_POINTER: u64 = 0x9000;
const ENOMEM: i64 = -(libc::ENOMEM as i64);
const RETURN: u64 = 0x4000;
/// The stack taken at the entry, which the event carries unchanged.
const STACK: RawStack = RawStack::Caller(RETURN);

fn pending(kind: ProbeKind, args: [u64; 3], stack: Option<RawStack>) -> PendingReturn {
    PendingReturn {
        slot: 0x7000,
        original_return: RETURN,
        kind,
        args: [args[0], args[1], args[2], 0, 0, 0],
        stack,
    }
}

fn out_pointer_memory() -> SliceMemory {
    SliceMemory {
        base: OUT_POINTER,
        bytes: 0xabc0u64.to_le_bytes().to_vec(),
    }
}

fn event_of(kind: ProbeKind, args: [u64; 3], result: u64) -> EventKind {
    let entry = pending(kind, args, Some(STACK));
    return_event(entry, result, &out_pointer_memory()).expect("an event")
}

fn alloc(function: AllocFunction, address: u64, size: u64) -> EventKind {
    EventKind::Alloc {
        function,
        address,
        size,
        stack: STACK,
    }
}

fn realloc(function: AllocFunction, old_address: u64, new_address: u64, size: u64) -> EventKind {
    EventKind::Realloc {
        function,
        old_address,
        new_address,
        size,
        stack: STACK,
    }
}

fn mapping(call: MapCall, args: [u64; 3], result: i64) -> EventKind {
    EventKind::Mapping {
        call,
        args: [args[0], args[1], args[2], 0, 0, 0],
        result,
        stack: STACK,
    }
}

#[test]
fn allocators_record_the_size_from_their_own_arguments() {
    use AllocFunction::*;
    let cases = [
        (Malloc, [24, 0, 0], 0x1000, alloc(Malloc, 0x1000, 24)),
        (Valloc, [5000, 0, 0], 0x2000, alloc(Valloc, 0x2000, 5000)),
        (Pvalloc, [100, 0, 0], 0x3000, alloc(Pvalloc, 0x3000, 100)),
        (Calloc, [3, 8, 0], 0x4000, alloc(Calloc, 0x4000, 24)),
        (Calloc, [u64::MAX, 2, 0], 0, alloc(Calloc, 0, u64::MAX)),
        (
            AlignedAlloc,
            [64, 256, 0],
            0x5000,
            alloc(AlignedAlloc, 0x5000, 256),
        ),
        (Memalign, [32, 100, 0], 0x6000, alloc(Memalign, 0x6000, 100)),
        (
            Realloc,
            [0x1000, 200, 0],
            0x7000,
            realloc(Realloc, 0x1000, 0x7000, 200),
        ),
        (
            Reallocarray,
            [0x1000, 10, 30],
            0x8000,
            realloc(Reallocarray, 0x1000, 0x8000, 300),
        ),
        (
            Reallocarray,
            [0, u64::MAX, 3],
            0,
            realloc(Reallocarray, 0, 0, u64::MAX),
        ),
    ];
    for (function, args, result, expected) in cases {
        let event = event_of(ProbeKind::Alloc(function), args, result);
        assert_eq!(event, expected, "{function:?} {args:?}");
    }
}

#[test]
fn posix_memalign_reads_the_block_only_when_it_succeeded() {
    let kind = ProbeKind::Alloc(AllocFunction::PosixMemalign);
    let succeeded = event_of(kind, [OUT_POINTER, 64, 512], 0);
    assert_eq!(succeeded, alloc(AllocFunction::PosixMemalign, 0xabc0, 512));
    // Unreadable out-pointer: a failed call is recorded without reading it.
    let failed = event_of(kind, [0x1, 64, 512], libc::ENOMEM as u64);
    assert_eq!(failed, alloc(AllocFunction::PosixMemalign, 0, 512));
}

#[test]
fn mapping_wrappers_record_the_system_call_s_result_not_libc_s() {
    use MapCall::*;
    let failed = u64::MAX;
    let cases = [
        (Mmap, [0, 4096, 3], 0x7f00_0000, 0x7f00_0000),
        (Mmap, [0, 4096, 3], failed, ENOMEM),
        (Munmap, [0x7f00_0000, 4096, 0], 0, 0),
        (Munmap, [0x7f00_0000, 4096, 0], failed, ENOMEM),
        // brk(addr) returns 0 on success: the break is then the address asked for.
        (Brk, [0x60_0000, 0, 0], 0, 0x60_0000),
        (Brk, [0x60_0000, 0, 0], failed, ENOMEM),
    ];
    for (call, args, result, expected) in cases {
        let event = event_of(ProbeKind::Map(call), args, result);
        assert_eq!(event, mapping(call, args, expected), "{call:?} {result:#x}");
    }
}

#[test]
fn a_call_with_no_stack_taken_at_its_entry_carries_an_empty_walk() {
    let entry = pending(ProbeKind::Alloc(AllocFunction::Malloc), [24, 0, 0], None);
    let event = return_event(entry, 0x1000, &out_pointer_memory()).expect("an event");
    let expected = EventKind::Alloc {
        function: AllocFunction::Malloc,
        address: 0x1000,
        size: 24,
        stack: RawStack::Frames(Vec::new()),
    };
    assert_eq!(event, expected);
}

#[test]
fn probes_that_record_nothing_at_return_are_an_error() {
    let memory = SliceMemory {
        base: 0,
        bytes: Vec::new(),
    };
    for kind in [ProbeKind::Alloc(AllocFunction::Free), ProbeKind::Rendezvous] {
        let entry = pending(kind, [0, 0, 0], None);
        assert!(return_event(entry, 0, &memory).is_err(), "{kind:?}");
    }
}
