//! The record of a probed call, from the arguments saved at its entry and its result, per
//! function ABI.

use crate::breakpoints::returns::PendingReturn;
use crate::breakpoints::table::ProbeKind;
use crate::ptrace::hits::return_record;
use crate::ptrace::memory::SliceMemory;
use crate::trace::format::{AllocFunction, MapCall, Record};
use crate::trace::stacks::EMPTY_STACK;

const TIME: u64 = 7;
/// posix_memalign's out-pointer: memory there holds the block's address.
const OUT_POINTER: u64 = 0x9000;
const ENOMEM: i64 = -(libc::ENOMEM as i64);

fn record_of(kind: ProbeKind, args: [u64; 3], result: u64) -> Record {
    let entry = PendingReturn {
        slot: 0x7000,
        original_return: 0x4000,
        kind,
        args: [args[0], args[1], args[2], 0, 0, 0],
        time_ns: TIME,
        stack: None,
    };
    let memory = SliceMemory {
        base: OUT_POINTER,
        bytes: 0xabc0u64.to_le_bytes().to_vec(),
    };
    return_record(1, 2, &entry, result, &memory).expect("a record")
}

fn alloc(function: AllocFunction, address: u64, size: u64) -> Record {
    Record::Alloc {
        time_ns: TIME,
        pid: 1,
        tid: 2,
        function,
        address,
        size,
        stack: EMPTY_STACK,
    }
}

fn realloc(function: AllocFunction, old_address: u64, new_address: u64, size: u64) -> Record {
    Record::Realloc {
        time_ns: TIME,
        pid: 1,
        tid: 2,
        function,
        old_address,
        new_address,
        size,
        stack: EMPTY_STACK,
    }
}

fn mapping(call: MapCall, args: [u64; 3], result: i64) -> Record {
    Record::Mapping {
        time_ns: TIME,
        pid: 1,
        tid: 2,
        call,
        args: [args[0], args[1], args[2], 0, 0, 0],
        result,
        stack: EMPTY_STACK,
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
        let record = record_of(ProbeKind::Alloc(function), args, result);
        assert_eq!(record, expected, "{function:?} {args:?}");
    }
}

#[test]
fn posix_memalign_reads_the_block_only_when_it_succeeded() {
    let kind = ProbeKind::Alloc(AllocFunction::PosixMemalign);
    let succeeded = record_of(kind, [OUT_POINTER, 64, 512], 0);
    assert_eq!(succeeded, alloc(AllocFunction::PosixMemalign, 0xabc0, 512));
    // Unreadable out-pointer: a failed call is recorded without reading it.
    let failed = record_of(kind, [0x1, 64, 512], libc::ENOMEM as u64);
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
        let record = record_of(ProbeKind::Map(call), args, result);
        assert_eq!(
            record,
            mapping(call, args, expected),
            "{call:?} {result:#x}"
        );
    }
}

#[test]
fn probes_that_record_nothing_at_return_are_an_error() {
    let entry = PendingReturn {
        slot: 0x7000,
        original_return: 0x4000,
        kind: ProbeKind::Alloc(AllocFunction::Free),
        args: [0; 6],
        time_ns: TIME,
        stack: None,
    };
    let memory = SliceMemory {
        base: 0,
        bytes: Vec::new(),
    };
    assert!(return_record(1, 2, &entry, 0, &memory).is_err());
}
