//! Every kind of record through a block and back, with values at their edges.

use crate::trace::block_decoder::BlockDecoder;
use crate::trace::codec::{stream_parts, BlockEncoder, STREAMS};
use bincode::Options;

use crate::trace::format::{
    AllocFunction, ExitKind, ProbeCounters, Record, SourceFrame, ThreadActivity, FORMAT_VERSION,
};
use crate::trace::frame::{compress, decompress};

fn mixed_records() -> Vec<Record> {
    vec![
        Record::StackNode {
            pid: 7,
            id: 1,
            parent: 0,
            address: 0x40_1000,
        },
        Record::StackNode {
            pid: 7,
            id: 2,
            parent: 1,
            address: 0x40_0f00,
        },
        Record::Alloc {
            time_ns: 100,
            pid: 7,
            tid: 7,
            function: AllocFunction::Malloc,
            address: 0x5000,
            size: 24,
            stack: 2,
        },
        Record::Alloc {
            time_ns: 90,
            pid: 7,
            tid: 8,
            function: AllocFunction::Pvalloc,
            address: u64::MAX,
            size: u64::MAX,
            stack: u32::MAX,
        },
        Record::Free {
            time_ns: 101,
            pid: 7,
            tid: 7,
            address: 0x5000,
        },
        Record::Free {
            time_ns: 102,
            pid: 7,
            tid: 7,
            address: 0,
        },
        Record::Realloc {
            time_ns: 103,
            pid: 7,
            tid: 7,
            function: AllocFunction::Reallocarray,
            old_address: 0,
            new_address: 0x6000,
            size: 24,
            stack: 1,
        },
        Record::Realloc {
            time_ns: 104,
            pid: 7,
            tid: 7,
            function: AllocFunction::Realloc,
            old_address: 0x6000,
            new_address: 0,
            size: 0,
            stack: 0,
        },
        Record::StatusSample {
            time_ns: 50,
            pid: 7,
            rss: 4096,
            anon: 0,
            file: 4096,
            shmem: 0,
            swap: u64::MAX,
        },
        Record::StatusSample {
            time_ns: 150,
            pid: 7,
            rss: 1024,
            anon: 8192,
            file: 0,
            shmem: 1,
            swap: 0,
        },
        Record::Free {
            time_ns: 0,
            pid: u32::MAX,
            tid: 0,
            address: 1,
        },
        Record::Symbol {
            pid: 7,
            address: 0x40_1000,
            function: "main".to_string(),
            offset: 4,
            module: "/app".to_string(),
            frames: vec![SourceFrame {
                function: "main".to_string(),
                raw_name: "main".to_string(),
                file: Some("app.c".to_string()),
                line: Some(3),
                column: None,
                inlined: false,
            }],
        },
        Record::ProcessExit {
            time_ns: 200,
            pid: 7,
            status: ExitKind::Code(0),
            counters: ProbeCounters::default(),
        },
        Record::End { time_ns: 201 },
    ]
}

pub(super) fn decode(inflated: Vec<u8>, records: u32) -> Result<Vec<Record>, String> {
    let mut decoder = BlockDecoder::new(inflated, records)?;
    let mut decoded = Vec::new();
    while let Some(record) = decoder.next_record()? {
        decoded.push(record);
    }
    Ok(decoded)
}

#[test]
fn every_kind_of_record_round_trips() {
    let mut encoder = BlockEncoder::default();
    let records = mixed_records();
    for record in &records {
        encoder.push(record).unwrap();
    }
    assert_eq!(encoder.records(), records.len() as u32);
    assert_eq!(
        encoder.threads(),
        4,
        "7/7, 7/8, the sampler of 7, and 4294967295/0"
    );
    let inflated = encoder.take();
    assert!(encoder.is_empty());
    assert_eq!(decode(inflated, records.len() as u32).unwrap(), records);
}

#[test]
fn a_churn_of_one_thread_costs_a_few_bytes_a_record() {
    let mut encoder = BlockEncoder::default();
    for index in 0..1000u64 {
        let time_ns = index * 25_000;
        encoder
            .push(&Record::Alloc {
                time_ns,
                pid: 9,
                tid: 9,
                function: AllocFunction::Malloc,
                address: 0x5555_0000,
                size: 16 + index % 12 * 8,
                stack: 5,
            })
            .unwrap();
        encoder
            .push(&Record::Free {
                time_ns: time_ns + 3_000,
                pid: 9,
                tid: 9,
                address: 0x5555_0000,
            })
            .unwrap();
    }
    // Per pair 9 bytes: 2 tags, time deltas of 22 and 3 microseconds (1 byte each), the
    // allocation as a reuse of the block freed, the free as the most recent allocation,
    // function, size index, zero stack delta. The first pair also names the thread (+2) and
    // gives the address whole (+5); each of the 12 sizes is given whole once (+1 each); the
    // first allocation of each of the other 5 rounded sizes (48 to 112) reuses nothing and
    // gives a zero address delta (+1 each).
    assert_eq!(encoder.bytes(), 9 * 1000 + 2 + 5 + 12 + 5);
    let inflated = encoder.take();
    assert_eq!(decode(inflated, 2000).unwrap().len(), 2000);
}

#[test]
fn a_wrong_record_count_is_an_error() {
    let mut encoder = BlockEncoder::default();
    for record in &mixed_records() {
        encoder.push(record).unwrap();
    }
    let inflated = encoder.take();
    let count = mixed_records().len() as u32;
    for wrong in [0, count - 1, count + 1, u32::MAX] {
        assert!(decode(inflated.clone(), wrong).is_err(), "{wrong} records");
    }
}

#[test]
fn every_truncation_of_a_block_is_an_error_not_a_panic() {
    let mut encoder = BlockEncoder::default();
    for record in &mixed_records() {
        encoder.push(record).unwrap();
    }
    let inflated = encoder.take();
    let count = mixed_records().len() as u32;
    for cut in 0..inflated.len() {
        assert!(
            decode(inflated[..cut].to_vec(), count).is_err(),
            "cut at {cut}"
        );
    }
    for index in 0..inflated.len() {
        for bit in 0..8 {
            let mut flipped = inflated.clone();
            flipped[index] ^= 1 << bit;
            // Any outcome but a panic: a flip may still decode to other records.
            let _ = decode(flipped, count);
        }
    }
}

/// An inflated block whose streams have these lengths, each filled with bytes from `fill`.
fn block_with_streams(lengths: [usize; STREAMS], fill: &mut dyn FnMut() -> u8) -> Vec<u8> {
    let mut block = Vec::new();
    for length in lengths {
        crate::trace::varint::put_unsigned(&mut block, length as u64);
    }
    for length in lengths {
        block.extend((0..length).map(|_| fill()));
    }
    block
}

#[test]
fn streams_are_compressed_in_parts_of_at_least_256_bytes() {
    let mut lengths = [0; STREAMS];
    lengths[0] = 300;
    lengths[2] = 100;
    lengths[3] = 200;
    lengths[5] = 1000;
    let block = block_with_streams(lengths, &mut || 7);
    let table = block.len() - 1600;
    let parts: Vec<usize> = stream_parts(&block).iter().map(|part| part.len()).collect();
    // The table with the first stream; the two small ones together; then the last.
    assert_eq!(parts, [table + 300, 300, 1000]);
    assert_eq!(
        stream_parts(&[0x80]),
        [&[0x80]],
        "a table that does not parse: one part"
    );
}

#[test]
fn a_block_compressed_in_parts_inflates_whole_however_it_compresses() {
    // Bytes that do not compress, more than one call's output room, and a stream of zeros.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut random = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    };
    let mut lengths = [0; STREAMS];
    lengths[1] = 3 << 20;
    lengths[4] = 1 << 20;
    lengths[9] = 70_000;
    let mut block = block_with_streams(lengths, &mut random);
    let zeros_start = block.len() - 70_000;
    block[zeros_start..].fill(0);
    let payload = compress(&block).unwrap();
    assert!(payload.len() > 4 << 20, "random bytes stay as large");
    assert_eq!(
        decompress(&payload, block.len() as u32, FORMAT_VERSION).unwrap(),
        block
    );
}

/// What `memsup snapshot` writes of threads, with every activity and unusual text.
fn snapshot_records() -> Vec<Record> {
    let state = |tid, activity, kernel_state, wchan: &str, stack| Record::ThreadState {
        time_ns: 5_000,
        pid: 40,
        tid,
        activity,
        kernel_state,
        wchan: wchan.to_string(),
        stack,
    };
    vec![
        state(40, ThreadActivity::SystemCall(0), 'S', "anon_pipe_read", 3),
        state(41, ThreadActivity::SystemCall(u32::MAX), 'D', "", 0),
        state(42, ThreadActivity::Running, 'R', "", u32::MAX),
        state(43, ThreadActivity::Stopped, 'T', "do_signal_stop", 9),
        state(44, ThreadActivity::Running, '?', "naïve_wait", 1),
        Record::SnapshotStop {
            time_ns: 6_000,
            pid: 40,
            stopped_ns: 1_234_567,
            threads: 5,
        },
        Record::SnapshotStop {
            time_ns: u64::MAX,
            pid: u32::MAX,
            stopped_ns: u64::MAX,
            threads: u32::MAX,
        },
    ]
}

#[test]
fn a_snapshot_s_records_round_trip_among_others() {
    assert_round_trip_among_others(snapshot_records());
}

#[test]
fn the_snapshot_records_are_appended_after_every_older_kind() {
    // bincode writes the variant's index first: older kinds keep theirs, so profiles written
    // before these records existed read as they did.
    let index = |record: &Record| crate::trace::writer::encoding().serialize(record).unwrap()[0];
    let probe_sites = Record::ProbeSites {
        time_ns: 0,
        pid: 1,
        engine: crate::trace::format::Engine::Int3,
        sites: Vec::new(),
        hooks: Default::default(),
    };
    assert_eq!(index(&probe_sites), 23);
    let snapshot = snapshot_records();
    assert_eq!(index(&snapshot[0]), 24);
    assert_eq!(index(&snapshot[5]), 25);
}

/// A rank, a launcher, and a rank whose size and job are unknown.
fn role_records() -> Vec<Record> {
    use crate::trace::format::{MpiRank, ProcessRole};
    let rank = |rank, world_size, job: &str, source: &str| {
        ProcessRole::Rank(MpiRank {
            rank,
            world_size,
            job: job.to_string(),
            source: source.to_string(),
        })
    };
    vec![
        Record::ProcessRole {
            time_ns: 7_000,
            pid: 41,
            role: rank(3, Some(4), "1042350081", "OMPI_COMM_WORLD_RANK"),
        },
        Record::ProcessRole {
            time_ns: 7_001,
            pid: 40,
            role: ProcessRole::Launcher {
                program: "orterun".to_string(),
            },
        },
        Record::ProcessRole {
            time_ns: u64::MAX,
            pid: u32::MAX,
            role: rank(u32::MAX, None, "", "singleton"),
        },
    ]
}

#[test]
fn process_roles_round_trip_and_come_after_every_older_kind() {
    assert_round_trip_among_others(role_records());
    let index = |record: &Record| crate::trace::writer::encoding().serialize(record).unwrap()[0];
    assert_eq!(index(&role_records()[0]), 26);
}

/// An MPI function's name and a call's entry and return.
fn mpi_records() -> Vec<Record> {
    let call = |time_ns, entry| Record::MpiCall {
        time_ns,
        pid: 41,
        tid: 42,
        function: 3,
        entry,
    };
    vec![
        Record::MpiFunction {
            pid: 41,
            function: 3,
            name: "MPI_Alltoall".to_string(),
        },
        call(8_000, true),
        call(9_000, false),
    ]
}

#[test]
fn mpi_calls_round_trip_and_come_after_every_older_kind() {
    assert_round_trip_among_others(mpi_records());
    let index = |record: &Record| crate::trace::writer::encoding().serialize(record).unwrap()[0];
    assert_eq!(index(&mpi_records()[0]), 27);
    assert_eq!(index(&mpi_records()[1]), 28);
}

#[test]
fn summed_mpi_calls_round_trip_and_come_after_every_older_kind() {
    let summed = Record::MpiCalls {
        time_ns: 9_500,
        pid: 41,
        tid: 42,
        function: 3,
        calls: 1_000_000,
        inside_ns: 123_456_789,
    };
    let mut records = mpi_records();
    records.push(summed.clone());
    assert_round_trip_among_others(records);
    let index = |record: &Record| crate::trace::writer::encoding().serialize(record).unwrap()[0];
    assert_eq!(index(&summed), 34);
}

#[test]
fn snapshot_reasons_are_appended_and_round_trip() {
    use crate::trace::format::SnapshotReason;
    // bincode writes an enum's variant index first: older reasons keep theirs.
    let index =
        |reason: &SnapshotReason| crate::trace::writer::encoding().serialize(reason).unwrap()[0];
    let high = SnapshotReason::RssHigh {
        bytes: 1,
        delay_ns: 2,
    };
    assert_eq!(index(&high), 8);
    let entry = SnapshotReason::MpiEntry { function: 3 };
    let exit = SnapshotReason::MpiReturn { function: u32::MAX };
    assert_eq!((index(&entry), index(&exit)), (9, 10));
    let requested = SnapshotReason::RequestedHighEstimate {
        bytes: 3,
        delay_ns: 4,
        sampled: 5,
    };
    let rss = SnapshotReason::RssHighEstimate {
        bytes: 6,
        delay_ns: 7,
        sampled: u32::MAX,
    };
    assert_eq!((index(&requested), index(&rss)), (11, 12));
    let records: Vec<Record> = [entry, exit, requested, rss]
        .into_iter()
        .map(|reason| Record::SmapsSnapshot {
            time_ns: 5,
            pid: 7,
            reason,
            cost_ns: 1,
            mappings: Vec::new(),
        })
        .collect();
    assert_round_trip_among_others(records);
}

/// `extra` between the mixed records and their end, through a block and back.
fn assert_round_trip_among_others(extra: Vec<Record>) {
    let mut records = mixed_records();
    let end = records.pop().expect("the end record");
    records.extend(extra);
    records.push(end);
    let mut encoder = BlockEncoder::default();
    for record in &records {
        encoder.push(record).unwrap();
    }
    assert_eq!(
        decode(encoder.take(), records.len() as u32).unwrap(),
        records
    );
}
