//! Each way a block stores a value, with the exact bytes it takes, and the errors a reader
//! meets in a block that breaks its rules.

use crate::trace::codec::{
    BlockEncoder, Stream, KIND_ALLOC, KIND_FREE, KIND_SYMBOL, STREAMS, TIME_FRACTION,
};
use crate::trace::codec_tests::decode;
use crate::trace::format::{AllocFunction, Record, SourceFrame};
use crate::trace::predict::RECENT_STACKS;

fn free(time_ns: u64, address: u64) -> Record {
    Record::Free {
        time_ns,
        pid: 3,
        tid: 3,
        address,
    }
}

fn malloc(time_ns: u64, address: u64) -> Record {
    malloc_of(time_ns, address, 16)
}

fn malloc_of(time_ns: u64, address: u64, size: u64) -> Record {
    Record::Alloc {
        time_ns,
        pid: 3,
        tid: 3,
        function: AllocFunction::Malloc,
        address,
        size,
        stack: 0,
    }
}

/// An inflated block made of the given streams, in `Stream` order.
fn block_of(streams: [&[u8]; STREAMS]) -> Vec<u8> {
    let mut block: Vec<u8> = streams.iter().map(|stream| stream.len() as u8).collect();
    streams
        .iter()
        .for_each(|stream| block.extend_from_slice(stream));
    block
}

fn stream(encoder: &BlockEncoder, stream: Stream) -> &[u8] {
    encoder.streams()[stream as usize]
}

#[test]
fn times_are_whole_microseconds_and_the_nanoseconds_past_them_apart() {
    let mut encoder = BlockEncoder::default();
    let records = [
        free(3_000, 0),
        free(3_500, 0),
        free(4_000, 0),
        free(u64::MAX, 0),
    ];
    records
        .iter()
        .for_each(|record| encoder.push(record).unwrap());
    // Microseconds 3, 3, 4, then the last one's 18446744073709551 as a zigzag difference.
    assert_eq!(stream(&encoder, Stream::Times)[..3], [6, 0, 2]);
    // 500 and 615 ns past the microsecond, two bytes each; the whole ones cost nothing here.
    assert_eq!(
        stream(&encoder, Stream::Fractions),
        [0xf4, 0x03, 0xe7, 0x04]
    );
    assert_eq!(decode(encoder.take(), 4).unwrap(), records);
}

#[test]
fn a_free_of_a_recent_allocation_is_stored_as_its_rank() {
    let mut encoder = BlockEncoder::default();
    let records = [
        malloc(1_000, 0x1000),
        malloc(2_000, 0x2000),
        malloc(3_000, 0x3000),
        free(4_000, 0x2000),
        free(5_000, 0x1000),
        free(6_000, 0x1000),
        free(7_000, 0),
    ];
    records
        .iter()
        .for_each(|record| encoder.push(record).unwrap());
    // 0x2000 is second most recent (rank 1), then 0x1000 too; freeing 0x1000 again and
    // free(NULL) give their addresses against the previous free stored whole: 0x1000 - 0 and
    // 0 - 0x1000, in units of 16 (zigzag, shifted: 0x400 and 0x3fe). The allocations are
    // fresh: 0x1000 from 0, then each 0xfe0 past the 32-byte chunk before it (0x3f8).
    assert_eq!(stream(&encoder, Stream::References), [2, 2, 0, 0]);
    assert_eq!(
        stream(&encoder, Stream::Addresses),
        [0x80, 0x08, 0xf8, 0x07, 0xf8, 0x07, 0x80, 0x08, 0xfe, 0x07]
    );
    assert_eq!(decode(encoder.take(), 7).unwrap(), records);
}

#[test]
fn a_rank_the_thread_has_no_allocation_for_is_an_error() {
    let tags = [KIND_FREE];
    let threads = [3, 3];
    let mut streams: [&[u8]; STREAMS] = [&[]; STREAMS];
    streams[Stream::Tags as usize] = &tags;
    streams[Stream::Threads as usize] = &threads;
    streams[Stream::Times as usize] = &[0];
    streams[Stream::References as usize] = &[1];
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("did not make"), "{error}");
    streams[Stream::References as usize] = &[0];
    streams[Stream::Addresses as usize] = &[0];
    assert_eq!(decode(block_of(streams), 1).unwrap(), [free(0, 0)]);
}

#[test]
fn a_fraction_of_a_microsecond_must_be_less_than_one() {
    let tags = [KIND_FREE | TIME_FRACTION];
    let threads = [3, 3];
    let mut streams: [&[u8]; STREAMS] = [&[]; STREAMS];
    streams[Stream::Tags as usize] = &tags;
    streams[Stream::Threads as usize] = &threads;
    streams[Stream::Times as usize] = &[0];
    streams[Stream::Addresses as usize] = &[0];
    streams[Stream::References as usize] = &[0];
    streams[Stream::Fractions as usize] = &[0xe8, 0x07];
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("time out of range"), "{error}");
    streams[Stream::Fractions as usize] = &[0xe7, 0x07];
    assert_eq!(decode(block_of(streams), 1).unwrap(), [free(999, 0)]);
}

#[test]
fn an_allocation_of_a_block_freed_lately_is_stored_as_its_rank() {
    let mut encoder = BlockEncoder::default();
    let records = [
        malloc(1_000, 0x1000),
        malloc_of(2_000, 0x2000, 24),
        free(3_000, 0x1000),
        free(4_000, 0x2000),
        malloc(5_000, 0x1000),
        malloc_of(6_000, 0x2000, 20),
        malloc_of(7_000, 0x3000, 16),
    ];
    records
        .iter()
        .for_each(|record| encoder.push(record).unwrap());
    // 16, 20 and 24 bytes are one rounded size: 0x1000 was freed before 0x2000 (rank 1),
    // then 0x2000 is the latest; nothing freed is at 0x3000, stored 0xfe0 past where the
    // last fresh chunk (0x2000, 32 bytes) ends.
    assert_eq!(stream(&encoder, Stream::Reuses), [0, 0, 2, 1, 0]);
    assert_eq!(stream(&encoder, Stream::References), [2, 1]);
    assert_eq!(
        stream(&encoder, Stream::Addresses),
        [0x80, 0x08, 0xf8, 0x07, 0xf8, 0x07]
    );
    assert_eq!(decode(encoder.take(), 7).unwrap(), records);
}

#[test]
fn a_reuse_of_a_block_the_thread_did_not_free_is_an_error() {
    let tags = [KIND_ALLOC];
    let threads = [3, 3];
    let mut streams: [&[u8]; STREAMS] = [&[]; STREAMS];
    streams[Stream::Tags as usize] = &tags;
    streams[Stream::Threads as usize] = &threads;
    streams[Stream::Times as usize] = &[0];
    // malloc (1 + its index), 16 bytes stored whole, stack 0 as a difference (past the ranks).
    streams[Stream::Values as usize] = &[1];
    streams[Stream::Sizes as usize] = &[1, 16];
    streams[Stream::Stacks as usize] = &[RECENT_STACKS as u8];
    streams[Stream::Reuses as usize] = &[1];
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("did not free"), "{error}");
    streams[Stream::Reuses as usize] = &[0];
    streams[Stream::Addresses as usize] = &[0];
    assert_eq!(decode(block_of(streams), 1).unwrap(), [malloc(0, 0)]);
}

fn symbol(address: u64, function: &str, frames: Vec<SourceFrame>) -> Record {
    Record::Symbol {
        pid: 3,
        address,
        function: function.to_string(),
        offset: 2,
        module: "/m".to_string(),
        frames,
    }
}

fn source_frame(
    function: &str,
    file: Option<&str>,
    line: Option<u32>,
    inlined: bool,
) -> SourceFrame {
    SourceFrame {
        function: function.to_string(),
        raw_name: function.to_string(),
        file: file.map(str::to_string),
        line,
        column: line.map(|line| line + 1),
        inlined,
    }
}

#[test]
fn a_symbol_stores_each_string_once_per_block() {
    let mut encoder = BlockEncoder::default();
    let records = [
        symbol(
            0x40,
            "f",
            vec![source_frame("g", Some("a.c"), Some(7), true)],
        ),
        symbol(0x30, "f", vec![source_frame("f", None, None, false)]),
        symbol(0x31, "", vec![]),
    ];
    records
        .iter()
        .for_each(|record| encoder.push(record).unwrap());
    // Strings f, /m, g, a.c, then "": each given once, then by index + 1.
    assert_eq!(
        stream(&encoder, Stream::Strings),
        b"\x01f\x02/m\x01g\x03a.c\x00"
    );
    assert_eq!(
        stream(&encoder, Stream::StringRefs),
        [0, 0, 0, 3, 0, 1, 2, 1, 1, 0, 2]
    );
    // Address differences 0x40, -0x10, 1 (zigzag), offsets, frame counts, a frame's flags
    // (inlined, file, line, column), line and column.
    assert_eq!(
        stream(&encoder, Stream::Symbols),
        [0x80, 0x01, 2, 1, 0b1111, 7, 8, 0x1f, 2, 1, 0, 2, 2, 0]
    );
    assert_eq!(decode(encoder.take(), 3).unwrap(), records);
}

#[test]
fn a_string_outside_the_table_or_not_utf8_is_an_error() {
    let tags = [KIND_SYMBOL];
    let mut streams: [&[u8]; STREAMS] = [&[]; STREAMS];
    streams[Stream::Tags as usize] = &tags;
    streams[Stream::Threads as usize] = &[3];
    streams[Stream::Symbols as usize] = &[0, 0, 0];
    streams[Stream::StringRefs as usize] = &[0, 1];
    streams[Stream::Strings as usize] = b"\x02/m";
    let expected = Record::Symbol {
        pid: 3,
        address: 0,
        function: "/m".to_string(),
        offset: 0,
        module: "/m".to_string(),
        frames: vec![],
    };
    assert_eq!(decode(block_of(streams), 1).unwrap(), [expected]);
    streams[Stream::StringRefs as usize] = &[0, 2];
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("not in the block's table"), "{error}");
    streams[Stream::StringRefs as usize] = &[0, 0];
    streams[Stream::Strings as usize] = b"\x09ab";
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("runs past"), "{error}");
    streams[Stream::Strings as usize] = b"\x01\xff";
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("UTF-8"), "{error}");
}

#[test]
fn a_symbol_that_names_one_string_past_its_block_size_is_an_error() {
    let frames = 10;
    let tags = [KIND_SYMBOL];
    let mut numbers = vec![0, 0, frames];
    numbers.extend(std::iter::repeat_n(0, frames as usize));
    let mut references = vec![0, 1];
    references.extend(std::iter::repeat_n(1, 2 * frames as usize));
    let mut streams: [&[u8]; STREAMS] = [&[]; STREAMS];
    streams[Stream::Tags as usize] = &tags;
    streams[Stream::Threads as usize] = &[3];
    streams[Stream::Symbols as usize] = &numbers;
    streams[Stream::StringRefs as usize] = &references;
    streams[Stream::Strings as usize] = b"\x10abcdefghijklmnop";
    // 22 copies of 16 bytes from a block of 70.
    let block = block_of(streams);
    assert_eq!(block.len(), 70);
    let error = decode(block, 1).unwrap_err();
    assert!(error.contains("outweigh its block"), "{error}");
}

#[test]
fn a_call_site_s_function_and_size_and_the_recent_stacks_are_predicted() {
    let call = |function, size, stack| Record::Alloc {
        time_ns: 0,
        pid: 3,
        tid: 3,
        function,
        address: 0,
        size,
        stack,
    };
    let records = [
        call(AllocFunction::Malloc, 40, 5),
        call(AllocFunction::Calloc, 40, 7),
        call(AllocFunction::Malloc, 40, 5),
        call(AllocFunction::Malloc, 48, 5),
    ];
    let mut encoder = BlockEncoder::default();
    records
        .iter()
        .for_each(|record| encoder.push(record).unwrap());
    // New stacks as 64 + zigzag difference (5 from 0, then 7 from 5), then stack 5 as its
    // rank among the recent ones: 1 behind 7, then 0.
    assert_eq!(stream(&encoder, Stream::Stacks), [74, 68, 1, 0]);
    // 1 + the function's index where the stack has no call yet, then 0: as predicted.
    assert_eq!(stream(&encoder, Stream::Values), [1, 2, 0, 0]);
    // 40 whole; at stack 7 the table's first size (2 + 0); as predicted; 48 whole.
    assert_eq!(stream(&encoder, Stream::Sizes), [1, 40, 2, 0, 1, 48]);
    assert_eq!(decode(encoder.take(), 4).unwrap(), records);
}

#[test]
fn a_prediction_the_block_cannot_make_is_an_error() {
    let tags = [KIND_ALLOC];
    let threads = [3, 3];
    let mut streams: [&[u8]; STREAMS] = [&[]; STREAMS];
    streams[Stream::Tags as usize] = &tags;
    streams[Stream::Threads as usize] = &threads;
    streams[Stream::Times as usize] = &[0];
    streams[Stream::Reuses as usize] = &[0];
    streams[Stream::Addresses as usize] = &[0];
    streams[Stream::Values as usize] = &[1];
    streams[Stream::Sizes as usize] = &[1, 16];
    streams[Stream::Stacks as usize] = &[0];
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(error.contains("stack rank past"), "{error}");
    streams[Stream::Stacks as usize] = &[RECENT_STACKS as u8];
    streams[Stream::Values as usize] = &[0];
    let error = decode(block_of(streams), 1).unwrap_err();
    assert!(
        error.contains("a call predicted at a stack without one"),
        "{error}"
    );
    streams[Stream::Values as usize] = &[1];
    assert_eq!(decode(block_of(streams), 1).unwrap(), [malloc(0, 0)]);
}
