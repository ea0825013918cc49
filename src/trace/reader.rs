//! Reads profiles block by block, as an iterator of records, keeping what was damaged or cut.
//!
//! Memory is bounded by one block (the caps in `frame`), whatever the file says.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use bincode::Options;

use crate::error::TraceError;
use crate::trace::block_decoder::BlockDecoder;
use crate::trace::blocks::{BlockFinder, Found};
use crate::trace::format::{Header, Record, FORMAT_VERSION, MAGIC};
use crate::trace::frame::{
    crc32, decompress, MAX_HEADER_BYTES, PREAMBLE_FIELDS_BYTES, VERSION_BYTES,
};
use crate::trace::reader_v2::{V2Blocks, OLDEST_READABLE_VERSION};
use crate::trace::writer::encoding;

/// The first version of framed blocks of streams (version 4 changed how some values in the
/// streams are predicted, not the framing).
const FIRST_FRAMED_VERSION: u32 = 3;

/// A whole profile in memory.
#[derive(Debug, Clone)]
pub struct Profile {
    pub header: Header,
    pub records: Vec<Record>,
    /// The file ended inside a block or without an `End` record.
    pub truncated: bool,
    /// One line for each thing found wrong in the file, e.g. "damaged: block 17 missing".
    pub damage: Vec<String>,
}

/// Reads a whole profile file. Fails on a foreign file, a damaged header or a newer version.
pub fn read_profile(path: &Path) -> Result<Profile, TraceError> {
    let mut reader = ProfileReader::open(path)?;
    let records: Vec<Record> = reader.by_ref().collect();
    let status = reader.status();
    Ok(Profile {
        header: reader.header().clone(),
        records,
        truncated: status.truncated,
        damage: status.damage.to_vec(),
    })
}

/// Where the blocks come from.
enum Blocks {
    Version3(BlockFinder),
    Version2(V2Blocks),
}

/// The block being read.
enum Current {
    Compact(Box<BlockDecoder>),
    Version2(crate::trace::reader_v2::V2Block),
}

/// How reading went, known in full once the iterator is exhausted.
pub struct ReadStatus<'a> {
    /// The file ended inside a block, or without an `End` record.
    pub truncated: bool,
    pub damage: &'a [String],
}

/// The records of a profile, in file order.
pub struct ProfileReader {
    header: Header,
    version: u32,
    blocks: Blocks,
    current: Option<Current>,
    damage: Vec<String>,
    cut: bool,
    last_was_end: bool,
    done: bool,
}

impl ProfileReader {
    /// Opens the file and reads its header.
    pub fn open(path: &Path) -> Result<ProfileReader, TraceError> {
        let io_error = |source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(io_error)?;
        let mut start = [0u8; VERSION_BYTES];
        let read = read_up_to(&mut file, &mut start).map_err(io_error)?;
        let not_a_profile = || TraceError::NotAProfile {
            path: path.to_path_buf(),
        };
        if read < VERSION_BYTES || start[..MAGIC.len()] != MAGIC {
            return Err(not_a_profile());
        }
        let version = u32::from_le_bytes(start[MAGIC.len()..].try_into().unwrap());
        check_version(version, path)?;
        let (header, blocks) = if version >= FIRST_FRAMED_VERSION {
            let (header, recording_id, blocks_start) = read_preamble(&mut file, &start, path)?;
            let finder = BlockFinder::new(file, blocks_start, recording_id).map_err(io_error)?;
            (header, Blocks::Version3(finder))
        } else {
            let (header, blocks) = V2Blocks::open(file, path)?;
            (header, Blocks::Version2(blocks))
        };
        Ok(ProfileReader {
            header,
            version,
            blocks,
            current: None,
            damage: Vec::new(),
            cut: false,
            last_was_end: false,
            done: false,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The format version of the file.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Damage found so far, in the order found (lines are added as reading passes them).
    pub fn damage(&self) -> &[String] {
        &self.damage
    }

    /// Truncation and damage; complete once the iterator returned None.
    pub fn status(&self) -> ReadStatus<'_> {
        ReadStatus {
            truncated: self.cut || !self.last_was_end,
            damage: &self.damage,
        }
    }

    /// Moves to the next usable block; false at the end of the file.
    fn next_block(&mut self) -> bool {
        loop {
            let found = match &mut self.blocks {
                Blocks::Version3(finder) => finder.next_found(),
                Blocks::Version2(blocks) => match blocks.next_block() {
                    Ok(Some(block)) => {
                        self.current = Some(Current::Version2(block));
                        return true;
                    }
                    Ok(None) => Ok(Found::End { cut: blocks.cut() }),
                    Err(error) => Err(error),
                },
            };
            match found {
                Err(error) => {
                    // Nothing after a read error can be trusted.
                    self.damage
                        .push(format!("damaged: reading stopped: {error}"));
                    self.cut = true;
                    return false;
                }
                Ok(Found::Damage(line)) => self.damage.push(line),
                Ok(Found::End { cut }) => {
                    self.cut |= cut;
                    return false;
                }
                Ok(Found::Block {
                    frame,
                    payload,
                    damage_before,
                }) => {
                    self.damage.extend(damage_before);
                    let decoder = decompress(&payload, frame.inflated_length, self.version)
                        .and_then(|inflated| {
                            BlockDecoder::with_version(inflated, frame.records, self.version)
                        });
                    match decoder {
                        Ok(decoder) => {
                            self.current = Some(Current::Compact(Box::new(decoder)));
                            return true;
                        }
                        Err(reason) => self.damage.push(format!(
                            "damaged: block {} {reason}; skipped",
                            frame.sequence
                        )),
                    }
                }
            }
        }
    }
}

impl Iterator for ProfileReader {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        while !self.done {
            let next = match &mut self.current {
                None => {
                    if !self.next_block() {
                        self.done = true;
                    }
                    continue;
                }
                Some(Current::Compact(decoder)) => decoder.next_record(),
                Some(Current::Version2(block)) => block.next_record(),
            };
            match next {
                Ok(Some(record)) => {
                    self.last_was_end = matches!(record, Record::End { .. });
                    return Some(record);
                }
                Ok(None) => self.current = None,
                Err(reason) => {
                    // The records of the block before the fault were good and are kept.
                    self.damage.push(format!(
                        "damaged: a block stops decoding: {reason}; its rest skipped"
                    ));
                    self.current = None;
                    if self.version < FIRST_FRAMED_VERSION {
                        self.cut = true;
                        self.done = true;
                    }
                }
            }
        }
        None
    }
}

fn check_version(version: u32, path: &Path) -> Result<(), TraceError> {
    if version > FORMAT_VERSION {
        return Err(TraceError::NewerVersion {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(TraceError::NotAProfile {
            path: path.to_path_buf(),
        });
    }
    // Version 1 held one caller address per event instead of a stack.
    if version < OLDEST_READABLE_VERSION {
        return Err(TraceError::OlderVersion {
            path: path.to_path_buf(),
            found: version,
            supported: OLDEST_READABLE_VERSION,
        });
    }
    Ok(())
}

/// Reads the rest of a version-3 preamble and checks its crc: header, recording id and where
/// the blocks start.
fn read_preamble(
    file: &mut File,
    start: &[u8; VERSION_BYTES],
    path: &Path,
) -> Result<(Header, u64, u64), TraceError> {
    let damaged = || TraceError::DamagedHeader {
        path: path.to_path_buf(),
    };
    let mut fields = [0u8; PREAMBLE_FIELDS_BYTES];
    fields[..VERSION_BYTES].copy_from_slice(start);
    let read = read_up_to(file, &mut fields[VERSION_BYTES..]).map_err(|_| damaged())?;
    if read < PREAMBLE_FIELDS_BYTES - VERSION_BYTES {
        return Err(damaged());
    }
    let recording_id = u64::from_le_bytes(fields[12..20].try_into().unwrap());
    let header_length = u32::from_le_bytes(fields[20..24].try_into().unwrap()) as usize;
    if header_length > MAX_HEADER_BYTES {
        return Err(damaged());
    }
    let mut rest = vec![0u8; header_length + 4];
    if read_up_to(file, &mut rest).map_err(|_| damaged())? < rest.len() {
        return Err(damaged());
    }
    let (encoded_header, crc) = rest.split_at(header_length);
    if crc32(&[&fields, encoded_header]).to_le_bytes() != crc {
        return Err(damaged());
    }
    let header = encoding()
        .with_limit(header_length as u64)
        .deserialize::<Header>(encoded_header)
        .map_err(|_| damaged())?;
    let blocks_start = (PREAMBLE_FIELDS_BYTES + header_length + 4) as u64;
    Ok((header, recording_id, blocks_start))
}

/// Fills as much of `buffer` as the file has; returns how much.
pub(crate) fn read_up_to(file: &mut impl Read, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..])? {
            0 => break,
            read => filled += read,
        }
    }
    Ok(filled)
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
