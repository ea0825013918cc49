//! Damaged profiles of the framed versions: blocks appended from another recording, repeated,
//! dropped, swapped, cut, bit-flipped, crafted to inflate without bound, and compressed
//! otherwise than their version says. Each case gives a one-line error or damage lines, and
//! the good blocks.

use std::path::{Path, PathBuf};

use crate::error::TraceError;
use crate::trace::format::FORMAT_VERSION;
use crate::trace::format::{AllocFunction, Header, Record, RecordMode};
use crate::trace::frame::{compress, crc32, decompress, Frame, FRAME_BYTES, MAX_INFLATED_BYTES};
use crate::trace::reader::{read_profile, Profile};
use crate::trace::writer::ProfileWriter;

fn header() -> Header {
    Header {
        memsup_version: "0.1.0".to_string(),
        host: "testhost".to_string(),
        mode: RecordMode::Run,
        target: vec!["./app".to_string()],
        start_unix_ns: 5,
        options: Vec::new(),
    }
}

/// Block `index`'s records: two allocations and a free; the last block ends with `End`.
fn block_records(index: u64, last: bool) -> Vec<Record> {
    let base = 0x5555_0000 + index * 0x100;
    let mut records = vec![
        Record::Alloc {
            time_ns: index * 10 + 1,
            pid: 100,
            tid: 101,
            function: AllocFunction::Malloc,
            address: base,
            size: 24 + index,
            stack: 3,
        },
        Record::Free {
            time_ns: index * 10 + 2,
            pid: 100,
            tid: 101,
            address: base,
        },
    ];
    if last {
        records.push(Record::End {
            time_ns: index * 10 + 3,
        });
    }
    records
}

/// A profile of `blocks` blocks; returns the file's bytes and where each block starts.
struct Written {
    bytes: Vec<u8>,
    block_starts: Vec<usize>,
    recording_id: u64,
}

impl Written {
    fn new(directory: &Path, name: &str, blocks: u64) -> Written {
        let path = directory.join(name);
        let mut writer = ProfileWriter::create(&path, &header()).unwrap();
        let recording_id = writer.recording_id();
        let mut block_starts = Vec::new();
        for index in 0..blocks {
            block_starts.push(std::fs::metadata(&path).unwrap().len() as usize);
            for record in block_records(index, index + 1 == blocks) {
                writer.push(&record).unwrap();
            }
            writer.flush_block().unwrap();
        }
        writer.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        Written {
            bytes,
            block_starts,
            recording_id,
        }
    }

    fn block(&self, index: usize) -> &[u8] {
        let end = self
            .block_starts
            .get(index + 1)
            .copied()
            .unwrap_or(self.bytes.len());
        &self.bytes[self.block_starts[index]..end]
    }

    /// The file made of the preamble and these blocks, in this order.
    fn with_blocks(&self, order: &[usize]) -> Vec<u8> {
        let mut bytes = self.bytes[..self.block_starts[0]].to_vec();
        for &index in order {
            bytes.extend_from_slice(self.block(index));
        }
        bytes
    }
}

fn read_bytes(directory: &Path, bytes: &[u8]) -> Result<Profile, TraceError> {
    let path: PathBuf = directory.join("damaged.msup");
    std::fs::write(&path, bytes).unwrap();
    read_profile(&path)
}

fn records_of(blocks: &[u64], total: u64) -> Vec<Record> {
    blocks
        .iter()
        .flat_map(|&index| block_records(index, index + 1 == total))
        .collect()
}

#[test]
fn an_intact_profile_has_no_damage() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let profile = read_bytes(directory.path(), &written.bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 1, 2, 3], 4));
    assert!(profile.damage.is_empty(), "{:?}", profile.damage);
    assert!(!profile.truncated);
}

#[test]
fn another_recording_appended_is_damage_and_skipped() {
    let directory = tempfile::tempdir().unwrap();
    let ours = Written::new(directory.path(), "a.msup", 3);
    let theirs = Written::new(directory.path(), "b.msup", 2);
    assert_ne!(ours.recording_id, theirs.recording_id);
    let mut bytes = ours.bytes.clone();
    bytes.extend_from_slice(&theirs.bytes);
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 1, 2], 3));
    assert_eq!(
        profile.damage,
        [
            format!(
                "damaged: another recording appended at byte {}",
                ours.bytes.len()
            ),
            "damaged: a block of another recording".to_string(),
            "damaged: a block of another recording".to_string(),
        ]
    );
    assert!(!profile.truncated, "this recording's End was read");
}

#[test]
fn blocks_of_another_recording_alone_are_damage() {
    let directory = tempfile::tempdir().unwrap();
    let ours = Written::new(directory.path(), "a.msup", 3);
    let theirs = Written::new(directory.path(), "b.msup", 2);
    let mut bytes = ours.with_blocks(&[0]);
    bytes.extend_from_slice(theirs.block(0));
    bytes.extend_from_slice(ours.block(1));
    bytes.extend_from_slice(ours.block(2));
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 1, 2], 3));
    assert_eq!(profile.damage, ["damaged: a block of another recording"]);
}

#[test]
fn a_duplicated_block_is_used_once() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let profile = read_bytes(directory.path(), &written.with_blocks(&[0, 1, 1, 2, 3])).unwrap();
    assert_eq!(profile.records, records_of(&[0, 1, 2, 3], 4));
    assert_eq!(profile.damage, ["damaged: block 1 repeated"]);
}

#[test]
fn a_dropped_block_is_missing() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let profile = read_bytes(directory.path(), &written.with_blocks(&[0, 2, 3])).unwrap();
    assert_eq!(profile.records, records_of(&[0, 2, 3], 4));
    assert_eq!(profile.damage, ["damaged: block 1 missing"]);
    assert!(!profile.truncated);
}

#[test]
fn swapped_blocks_are_out_of_order_and_both_used() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let profile = read_bytes(directory.path(), &written.with_blocks(&[0, 2, 1, 3])).unwrap();
    assert_eq!(profile.records, records_of(&[0, 2, 1, 3], 4));
    assert_eq!(profile.damage, ["damaged: block 1 out of order"]);
}

#[test]
fn a_corrupt_block_is_skipped_and_reading_resumes_after_it() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let mut bytes = written.bytes.clone();
    let second = written.block_starts[1];
    bytes[second + FRAME_BYTES + 2] ^= 0x10;
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 2, 3], 4));
    assert_eq!(
        profile.damage,
        [
            format!(
                "damaged: bytes {second} to {} are no block of this recording; skipped",
                written.block_starts[2]
            ),
            "damaged: block 1 missing".to_string(),
        ]
    );
}

#[test]
fn a_middle_block_whose_length_runs_past_the_end_is_skipped_not_a_cut() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let mut bytes = written.bytes.clone();
    let second = written.block_starts[1];
    // The payload length's third byte: the block now claims 1 MiB more than the file holds.
    bytes[second + 18] ^= 0x10;
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 2, 3], 4));
    assert_eq!(
        profile.damage,
        [
            format!(
                "damaged: bytes {second} to {} are no block of this recording; skipped",
                written.block_starts[2]
            ),
            "damaged: block 1 missing".to_string(),
        ]
    );
    assert!(!profile.truncated);
}

#[test]
fn the_last_block_whose_length_runs_past_the_end_is_a_cut() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let mut bytes = written.bytes.clone();
    bytes[written.block_starts[3] + 18] ^= 0x10;
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 1, 2], 4));
    assert!(profile.damage.is_empty(), "{:?}", profile.damage);
    assert!(profile.truncated);
}

/// Block `index` of `written` renumbered `sequence`, with a crc that holds.
fn renumbered_block(written: &Written, index: usize, sequence: u64) -> Vec<u8> {
    let block = written.block(index);
    let frame = Frame::parse(block[..FRAME_BYTES].try_into().unwrap());
    let payload = &block[FRAME_BYTES..];
    let renumbered = Frame::new(
        written.recording_id,
        sequence,
        payload,
        frame.inflated_length,
        frame.records,
    );
    let mut bytes = renumbered.encode().to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn a_block_numbered_last_of_all_is_used_once() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 4);
    let mut bytes = written.with_blocks(&[0]);
    for _ in 0..3 {
        bytes.extend_from_slice(&renumbered_block(&written, 1, u64::MAX));
    }
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 1], 4));
    let repeated = format!("damaged: block {} repeated", u64::MAX);
    let missing = format!("damaged: blocks 1 to {} missing", u64::MAX - 1);
    assert_eq!(profile.damage, [repeated.as_str(), &repeated, &missing]);
    assert!(profile.truncated, "no End record");
}

#[test]
fn every_bit_flip_in_the_preamble_is_a_one_line_error() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 1);
    for byte in 0..written.block_starts[0] {
        for bit in 0..8 {
            let mut bytes = written.bytes.clone();
            bytes[byte] ^= 1 << bit;
            let error = read_bytes(directory.path(), &bytes)
                .err()
                .unwrap_or_else(|| panic!("a flip of bit {bit} of byte {byte} went unnoticed"));
            let message = error.to_string();
            assert_eq!(message.lines().count(), 1, "{message}");
            if byte >= 12 {
                assert!(
                    matches!(error, TraceError::DamagedHeader { .. }),
                    "{error:?}"
                );
            }
        }
    }
}

#[test]
fn every_cut_reads_a_prefix_of_the_records() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 3);
    let all = records_of(&[0, 1, 2], 3);
    for cut in written.block_starts[0]..written.bytes.len() {
        let profile = read_bytes(directory.path(), &written.bytes[..cut]).unwrap();
        // Blocks whose last byte is before the cut (the next block starts at or before it).
        let whole_blocks = written.block_starts[1..]
            .iter()
            .filter(|&&next_start| next_start <= cut)
            .count();
        assert_eq!(profile.records, all[..whole_blocks * 2], "cut at {cut}");
        assert!(profile.truncated, "cut at {cut}");
        assert!(
            profile.damage.len() <= 1,
            "cut at {cut}: {:?}",
            profile.damage
        );
    }
}

/// A block whose frame and crc are right but whose payload lies about its size.
fn crafted_block(recording_id: u64, sequence: u64, inflated: &[u8], declared: u32) -> Vec<u8> {
    let payload = compress(inflated).unwrap();
    let frame = Frame::new(recording_id, sequence, &payload, declared, 1);
    let mut block = frame.encode().to_vec();
    block.extend_from_slice(&payload);
    block
}

#[test]
fn an_inflate_bomb_is_stopped_at_its_declared_length() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 3);
    // 64 MiB of zeros compress to about 64 KiB; the frame declares 1000 bytes.
    let bomb = crafted_block(written.recording_id, 1, &vec![0u8; 64 << 20], 1000);
    assert!(bomb.len() < 100 << 10);
    let mut bytes = written.with_blocks(&[0]);
    bytes.extend_from_slice(&bomb);
    bytes.extend_from_slice(written.block(2));
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 2], 3));
    assert_eq!(
        profile.damage,
        ["damaged: block 1 inflates past the 1000 bytes declared; skipped"]
    );
}

#[test]
fn a_block_declaring_more_than_the_cap_is_never_inflated() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 3);
    let over = crafted_block(written.recording_id, 1, &[0u8; 16], MAX_INFLATED_BYTES + 1);
    let mut bytes = written.with_blocks(&[0]);
    bytes.extend_from_slice(&over);
    bytes.extend_from_slice(written.block(2));
    let profile = read_bytes(directory.path(), &bytes).unwrap();
    assert_eq!(profile.records, records_of(&[0, 2], 3));
    let over_start = written.block_starts[1];
    assert_eq!(
        profile.damage,
        [
            format!(
                "damaged: bytes {over_start} to {} are no block of this recording; skipped",
                over_start + over.len()
            ),
            "damaged: block 1 missing".to_string(),
        ]
    );
}

#[test]
fn a_crafted_record_count_or_stream_table_is_damage() {
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 3);
    // Stream lengths that run past the block, then a table claiming 2^62 bytes.
    let mut too_long = vec![0x7fu8; 8];
    too_long.extend_from_slice(&[0; 4]);
    let mut huge = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
    huge.extend_from_slice(&[0; 7]);
    for inflated in [too_long, huge] {
        let block = crafted_block(written.recording_id, 1, &inflated, inflated.len() as u32);
        let mut bytes = written.with_blocks(&[0]);
        bytes.extend_from_slice(&block);
        bytes.extend_from_slice(written.block(2));
        let profile = read_bytes(directory.path(), &bytes).unwrap();
        assert_eq!(profile.records, records_of(&[0, 2], 3));
        assert_eq!(profile.damage.len(), 1, "{:?}", profile.damage);
        assert!(
            profile.damage[0].starts_with("damaged: block 1 "),
            "{:?}",
            profile.damage
        );
    }
}

/// The file with its preamble's version set to `version` (crc made again) and each block's
/// payload replaced by `recompress` of its block.
fn rewritten(written: &Written, version: u32, recompress: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let preamble_end = written.block_starts[0];
    let mut bytes = written.bytes[..preamble_end - 4].to_vec();
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32(&[&bytes]);
    bytes.extend_from_slice(&crc.to_le_bytes());
    for index in 0..written.block_starts.len() {
        let block = written.block(index);
        let frame = Frame::parse(block[..FRAME_BYTES].try_into().unwrap());
        let inflated =
            decompress(&block[FRAME_BYTES..], frame.inflated_length, FORMAT_VERSION).unwrap();
        let payload = recompress(&inflated);
        let reframed = Frame::new(
            frame.recording_id,
            frame.sequence,
            &payload,
            frame.inflated_length,
            frame.records,
        );
        bytes.extend_from_slice(&reframed.encode());
        bytes.extend_from_slice(&payload);
    }
    bytes
}

/// None of the profile's `blocks` blocks gave a record: each is a damage line of its own.
fn assert_no_block_inflates(profile: &Profile, blocks: usize) {
    assert!(profile.records.is_empty(), "{:?}", profile.records);
    assert_eq!(profile.damage.len(), blocks, "{:?}", profile.damage);
    for (sequence, line) in profile.damage.iter().enumerate() {
        assert!(
            line.starts_with(&format!("damaged: block {sequence} does not inflate: ")),
            "{line}"
        );
    }
}

#[test]
fn a_version_8_profile_reads_its_deflate_blocks_and_no_zstd_ones() {
    use std::io::Write;
    let deflate = |block: &[u8]| {
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6));
        encoder.write_all(block).unwrap();
        encoder.finish().unwrap()
    };
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 3);
    let version_8 = read_bytes(directory.path(), &rewritten(&written, 8, deflate)).unwrap();
    assert_eq!(version_8.records, records_of(&[0, 1, 2], 3));
    assert!(version_8.damage.is_empty(), "{:?}", version_8.damage);

    let zstd_as_8 = read_bytes(
        directory.path(),
        &rewritten(&written, 8, |block| compress(block).unwrap()),
    )
    .unwrap();
    assert_no_block_inflates(&zstd_as_8, 3);
    let deflate_as_9 = read_bytes(directory.path(), &rewritten(&written, 9, deflate)).unwrap();
    assert_no_block_inflates(&deflate_as_9, 3);
}

#[test]
fn a_block_whose_frame_asks_for_a_larger_window_than_a_block_is_damage() {
    use std::io::Write;
    let directory = tempfile::tempdir().unwrap();
    let written = Written::new(directory.path(), "a.msup", 3);
    let wide = |window_log: u32| {
        move |block: &[u8]| {
            let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            encoder.window_log(window_log).unwrap();
            encoder.write_all(block).unwrap();
            encoder.finish().unwrap()
        }
    };
    let within = read_bytes(directory.path(), &rewritten(&written, 9, wide(23))).unwrap();
    assert_eq!(within.records, records_of(&[0, 1, 2], 3));
    assert!(within.damage.is_empty(), "{:?}", within.damage);
    let over = read_bytes(directory.path(), &rewritten(&written, 9, wide(27))).unwrap();
    assert_no_block_inflates(&over, 3);
}
