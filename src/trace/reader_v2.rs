//! Version-2 profiles, still read: magic, version, header length, bincode header, then blocks of
//! `[payload length u32][crc32 of payload u32][deflate(bincode records)]`, with no recording
//! id and no sequence numbers. The first block that is cut or damaged ends reading, as it did
//! when version 2 was current; the caps of version 3 bound what a block may allocate.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use bincode::Options;
use flate2::read::DeflateDecoder;

use crate::error::TraceError;
use crate::trace::format::{Header, Record};
use crate::trace::frame::{crc32, MAX_HEADER_BYTES, MAX_INFLATED_BYTES, MAX_PAYLOAD_BYTES};
use crate::trace::reader::read_up_to;
use crate::trace::writer::encoding;

/// Version 1 held one caller address per event instead of a stack.
pub const OLDEST_READABLE_VERSION: u32 = 2;

pub struct V2Blocks {
    file: BufReader<File>,
    /// Blocks read so far.
    index: u64,
    cut: bool,
}

impl V2Blocks {
    /// Reads the header; `file` stands just after magic and version.
    pub fn open(mut file: File, path: &Path) -> Result<(Header, V2Blocks), TraceError> {
        let not_a_profile = || TraceError::NotAProfile {
            path: path.to_path_buf(),
        };
        let mut length = [0u8; 4];
        if read_up_to(&mut file, &mut length).map_err(|_| not_a_profile())? < 4 {
            return Err(not_a_profile());
        }
        let header_length = u32::from_le_bytes(length) as usize;
        if header_length > MAX_HEADER_BYTES {
            return Err(not_a_profile());
        }
        let mut encoded = vec![0u8; header_length];
        if read_up_to(&mut file, &mut encoded).map_err(|_| not_a_profile())? < header_length {
            return Err(not_a_profile());
        }
        // The header is written and flushed before any record, so a broken one is not ours.
        let header = encoding()
            .with_limit(header_length as u64)
            .deserialize::<Header>(&encoded)
            .map_err(|_| not_a_profile())?;
        let blocks = V2Blocks {
            file: BufReader::new(file),
            index: 0,
            cut: false,
        };
        Ok((header, blocks))
    }

    /// The file ended inside a block, or a block was damaged (the rest is not trusted).
    pub fn cut(&self) -> bool {
        self.cut
    }

    /// The next whole block whose crc matches; None at the end or at the first bad block.
    pub fn next_block(&mut self) -> std::io::Result<Option<V2Block>> {
        let mut frame = [0u8; 8];
        let read = read_up_to(&mut self.file, &mut frame)?;
        if read < frame.len() {
            self.cut = read > 0;
            return Ok(None);
        }
        let payload_length = u32::from_le_bytes(frame[..4].try_into().unwrap());
        let crc = u32::from_le_bytes(frame[4..].try_into().unwrap());
        if payload_length > MAX_PAYLOAD_BYTES {
            return self.damaged("declares a payload over the limit");
        }
        let mut payload = vec![0u8; payload_length as usize];
        if read_up_to(&mut self.file, &mut payload)? < payload.len() {
            self.cut = true;
            return Ok(None);
        }
        if crc32(&[&payload]) != crc {
            self.cut = true;
            return Ok(None);
        }
        let mut data = Vec::new();
        let inflated = DeflateDecoder::new(payload.as_slice())
            .take(u64::from(MAX_INFLATED_BYTES) + 1)
            .read_to_end(&mut data);
        if inflated.is_err() {
            return self.damaged("does not inflate");
        }
        if data.len() > MAX_INFLATED_BYTES as usize {
            return self.damaged("inflates past the limit");
        }
        self.index += 1;
        Ok(Some(V2Block { data, position: 0 }))
    }

    fn damaged<T>(&mut self, reason: &str) -> std::io::Result<T> {
        self.cut = true;
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("block {} {reason}", self.index),
        ))
    }
}

/// An inflated version-2 block: bincode records back to back.
pub struct V2Block {
    data: Vec<u8>,
    position: usize,
}

impl V2Block {
    pub fn next_record(&mut self) -> Result<Option<Record>, String> {
        let mut rest = &self.data[self.position..];
        if rest.is_empty() {
            return Ok(None);
        }
        // The limit keeps a damaged length prefix from asking for a huge allocation.
        let record = encoding()
            .with_limit(rest.len() as u64)
            .deserialize_from::<_, Record>(&mut rest)
            .map_err(|error| error.to_string())?;
        self.position = self.data.len() - rest.len();
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::DeflateEncoder;
    use flate2::Compression;

    use crate::trace::format::{Header, Record, RecordMode, MAGIC};
    use crate::trace::frame::crc32;
    use crate::trace::reader::read_profile;
    use crate::trace::writer::encoding;
    use bincode::Options;

    fn header() -> Header {
        Header {
            memsup_version: "0.1.0".to_string(),
            host: "old".to_string(),
            mode: RecordMode::Run,
            target: vec!["./app".to_string()],
            start_unix_ns: 1,
            options: Vec::new(),
        }
    }

    /// A version-2 file: preamble, then one block per payload given (already inflated).
    fn version_2_file(blocks: &[Vec<u8>]) -> Vec<u8> {
        let encoded = encoding().serialize(&header()).unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&encoded);
        for inflated in blocks {
            let mut encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
            encoder.write_all(inflated).unwrap();
            let payload = encoder.finish().unwrap();
            bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32(&[&payload]).to_le_bytes());
            bytes.extend_from_slice(&payload);
        }
        bytes
    }

    fn records_bytes(records: &[Record]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for record in records {
            encoding().serialize_into(&mut bytes, record).unwrap();
        }
        bytes
    }

    #[test]
    fn a_version_2_file_reads_whole() {
        let records = vec![
            Record::Free {
                time_ns: 1,
                pid: 2,
                tid: 2,
                address: 0x10,
            },
            Record::End { time_ns: 2 },
        ];
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("v2.msup");
        std::fs::write(&path, version_2_file(&[records_bytes(&records)])).unwrap();
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.header, header());
        assert_eq!(profile.records, records);
        assert!(!profile.truncated);
        assert!(profile.damage.is_empty());
    }

    #[test]
    fn a_version_2_inflate_bomb_stops_at_the_cap() {
        let good = records_bytes(&[Record::Free {
            time_ns: 1,
            pid: 2,
            tid: 2,
            address: 0x10,
        }]);
        let bomb = vec![0u8; 16 << 20];
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bomb.msup");
        let bytes = version_2_file(&[good, bomb]);
        assert!(bytes.len() < 200 << 10, "{} bytes", bytes.len());
        std::fs::write(&path, bytes).unwrap();
        let profile = read_profile(&path).unwrap();
        assert_eq!(profile.records.len(), 1);
        assert!(profile.truncated);
        assert_eq!(
            profile.damage,
            ["damaged: reading stopped: block 1 inflates past the limit"]
        );
    }
}
