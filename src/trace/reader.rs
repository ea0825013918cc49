//! Reads profiles, up to the last whole block of one that was cut short.

use std::io::Read;
use std::path::Path;

use bincode::Options;
use flate2::read::DeflateDecoder;
use flate2::Crc;

use crate::error::TraceError;
use crate::trace::format::{Header, Record, FORMAT_VERSION, MAGIC};
use crate::trace::writer::encoding;

/// A whole profile in memory.
#[derive(Debug, Clone)]
pub struct Profile {
    pub header: Header,
    pub records: Vec<Record>,
    /// The file ended inside a block or without an `End` record.
    pub truncated: bool,
}

/// Magic, version and header length.
const PREAMBLE_BYTES: usize = MAGIC.len() + 4 + 4;
/// Payload length and crc32 in front of every block.
const BLOCK_FRAME_BYTES: usize = 8;

/// Reads a profile file. Fails on a foreign file or a newer format version.
pub fn read_profile(path: &Path) -> Result<Profile, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let (header, blocks_start) = read_header(&bytes, path)?;
    let (records, whole) = read_blocks(&bytes[blocks_start..]);
    let ends_properly = matches!(records.last(), Some(Record::End { .. }));
    Ok(Profile {
        header,
        records,
        truncated: !whole || !ends_properly,
    })
}

/// Checks magic and version and decodes the header; returns it and where the blocks start.
fn read_header(bytes: &[u8], path: &Path) -> Result<(Header, usize), TraceError> {
    let not_a_profile = || TraceError::NotAProfile {
        path: path.to_path_buf(),
    };
    if bytes.len() < PREAMBLE_BYTES || bytes[..MAGIC.len()] != MAGIC {
        return Err(not_a_profile());
    }
    let version = read_u32(bytes, MAGIC.len());
    if version > FORMAT_VERSION {
        return Err(TraceError::NewerVersion {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(not_a_profile());
    }
    // Version 1 held one caller address per event instead of a stack.
    if version < FORMAT_VERSION {
        return Err(TraceError::OlderVersion {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let header_length = read_u32(bytes, MAGIC.len() + 4) as usize;
    let header_end = PREAMBLE_BYTES
        .checked_add(header_length)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(not_a_profile)?;
    // The header is written and flushed before any record, so a broken one is not ours.
    let header = encoding()
        .deserialize::<Header>(&bytes[PREAMBLE_BYTES..header_end])
        .map_err(|_| not_a_profile())?;
    Ok((header, header_end))
}

/// Decodes whole blocks until the end; returns the records and false when the data ended
/// inside a block or a block was damaged (the rest is not trusted).
fn read_blocks(mut rest: &[u8]) -> (Vec<Record>, bool) {
    let mut records = Vec::new();
    while !rest.is_empty() {
        let Some((payload, after)) = split_block(rest) else {
            return (records, false);
        };
        match decode_payload(payload) {
            Some(block_records) => records.extend(block_records),
            None => return (records, false),
        }
        rest = after;
    }
    (records, true)
}

/// The payload of the first block if it is complete and its crc matches, and what follows it.
fn split_block(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    if bytes.len() < BLOCK_FRAME_BYTES {
        return None;
    }
    let payload_length = read_u32(bytes, 0) as usize;
    let expected_crc = read_u32(bytes, 4);
    let body = &bytes[BLOCK_FRAME_BYTES..];
    if body.len() < payload_length {
        return None;
    }
    let (payload, after) = body.split_at(payload_length);
    let mut crc = Crc::new();
    crc.update(payload);
    (crc.sum() == expected_crc).then_some((payload, after))
}

/// Inflates a payload and decodes all its records; None if any of it fails.
fn decode_payload(payload: &[u8]) -> Option<Vec<Record>> {
    let mut inflated = Vec::new();
    DeflateDecoder::new(payload)
        .read_to_end(&mut inflated)
        .ok()?;
    let mut remaining = inflated.as_slice();
    let mut records = Vec::new();
    while !remaining.is_empty() {
        // The limit keeps a damaged length prefix from asking for a huge allocation.
        let record = encoding()
            .with_limit(remaining.len() as u64)
            .deserialize_from::<_, Record>(&mut remaining)
            .ok()?;
        records.push(record);
    }
    Some(records)
}

fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::format::{AllocFunction, ExitKind, ProbeCounters, RecordMode, StartCause};
    use crate::trace::writer::ProfileWriter;
    use std::path::PathBuf;

    fn header() -> Header {
        Header {
            memsup_version: "0.1.0".to_string(),
            host: "testhost".to_string(),
            mode: RecordMode::Attach,
            target: vec!["4242".to_string()],
            start_unix_ns: 5,
            options: Vec::new(),
        }
    }

    fn alloc(time_ns: u64, address: u64, size: u64) -> Record {
        Record::Alloc {
            time_ns,
            pid: 4242,
            tid: 4243,
            function: AllocFunction::Calloc,
            address,
            size,
            stack: 7,
        }
    }

    /// Ends with a process exit, which the writer writes as a block at once.
    fn first_block() -> Vec<Record> {
        vec![
            Record::ProcessStart {
                time_ns: 1,
                pid: 4242,
                parent_pid: None,
                cause: StartCause::Attach,
            },
            alloc(2, 0x7f00_0000_0010, 64),
            Record::ProcessExit {
                time_ns: 3,
                pid: 4242,
                status: ExitKind::Signal(11),
                counters: ProbeCounters {
                    stops: 3,
                    ..ProbeCounters::default()
                },
            },
        ]
    }

    fn second_block() -> Vec<Record> {
        vec![
            alloc(4, 0x7f00_0000_0100, 1 << 40),
            Record::Warning {
                time_ns: 5,
                pid: 4242,
                message: "no allocator symbols in libfoo.so".to_string(),
            },
            Record::End { time_ns: 6 },
        ]
    }

    /// Writes the two test blocks; returns the path and the file size after the first block.
    fn write_two_blocks(directory: &Path) -> (PathBuf, u64) {
        let path = directory.join("two.msup");
        let mut writer = ProfileWriter::create(&path, &header()).unwrap();
        for record in first_block() {
            writer.push(&record).unwrap();
        }
        writer.flush_block().unwrap();
        let first_block_end = std::fs::metadata(&path).unwrap().len();
        for record in second_block() {
            writer.push(&record).unwrap();
        }
        writer.finish().unwrap();
        (path, first_block_end)
    }

    #[test]
    fn round_trip_keeps_header_and_records() {
        let directory = tempfile::tempdir().unwrap();
        let (path, _) = write_two_blocks(directory.path());
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.header, header());
        let mut expected = first_block();
        expected.extend(second_block());
        assert_eq!(profile.records, expected);
        assert!(!profile.truncated);
    }

    #[test]
    fn a_cut_inside_the_last_block_keeps_the_whole_blocks() {
        let directory = tempfile::tempdir().unwrap();
        let (path, first_block_end) = write_two_blocks(directory.path());
        let full = std::fs::read(&path).unwrap();
        let cut_path = directory.path().join("cut.msup");
        let inside_last_block = [
            first_block_end + 1,
            first_block_end + 4,
            first_block_end + 8,
            first_block_end + 9,
            full.len() as u64 - 1,
        ];
        for cut in inside_last_block {
            std::fs::write(&cut_path, &full[..cut as usize]).unwrap();
            let profile = read_profile(&cut_path).unwrap();
            assert_eq!(profile.records, first_block(), "cut at {cut}");
            assert!(profile.truncated, "cut at {cut}");
        }
        std::fs::write(&cut_path, &full[..first_block_end as usize]).unwrap();
        let profile = read_profile(&cut_path).unwrap();
        assert_eq!(profile.records, first_block());
        assert!(profile.truncated, "no End record");
    }

    #[test]
    fn a_damaged_block_ends_reading() {
        let directory = tempfile::tempdir().unwrap();
        let (path, first_block_end) = write_two_blocks(directory.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.records, first_block());
        assert!(profile.truncated);
        assert!(first_block_end < last as u64);
    }

    #[test]
    fn foreign_and_short_files_are_not_profiles() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("foreign");
        for content in [
            &b"\x7fELF\x02\x01\x01\0\x01\0\0\0\0\0\0\0"[..],
            b"MEMSUP",
            b"",
        ] {
            std::fs::write(&path, content).unwrap();
            let error = read_profile(&path).unwrap_err();
            assert!(matches!(error, TraceError::NotAProfile { .. }), "{error:?}");
        }
    }

    #[test]
    fn a_newer_version_is_refused() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("newer.msup");
        ProfileWriter::create(&path, &header()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        match read_profile(&path).unwrap_err() {
            TraceError::NewerVersion {
                found, supported, ..
            } => assert_eq!((found, supported), (FORMAT_VERSION + 1, FORMAT_VERSION)),
            other => panic!("expected NewerVersion, got {other:?}"),
        }
    }

    #[test]
    fn a_version_1_profile_is_refused_with_advice() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("older.msup");
        ProfileWriter::create(&path, &header()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let error = read_profile(&path).unwrap_err();
        assert!(
            matches!(
                error,
                TraceError::OlderVersion {
                    found: 1,
                    supported: 2,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("record the program again"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        let directory = tempfile::tempdir().unwrap();
        let error = read_profile(&directory.path().join("absent.msup")).unwrap_err();
        assert!(matches!(error, TraceError::Io { .. }), "{error:?}");
    }
}
