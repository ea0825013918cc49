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
