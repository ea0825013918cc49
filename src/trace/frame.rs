//! The framing since version 3: the preamble that opens a profile and the frame in front of
//! each block.
//!
//! ```text
//! preamble: MAGIC (8) | version u32 | recording id u64 | header length u32 | header (bincode)
//!           | crc32 of everything before it in the preamble (u32)
//! block:    recording id u64 | sequence u64 | payload length u32 | inflated length u32
//!           | record count u32 | crc32 of the 28 bytes before it and the payload (u32)
//!           | payload = zstd(`codec` block) from version 9, deflate before
//! ```
//! All integers little-endian. The recording id is random per recording, so a block of
//! another recording is told apart, and the sequence numbers 0, 1, 2, ... show a block missing,
//! repeated or out of order. Every length is checked against a cap before anything is
//! allocated for it.

use std::io::{Read, Write};

use bincode::Options;
use flate2::read::DeflateDecoder;
use flate2::Crc;

use crate::trace::codec::stream_parts;
use crate::trace::format::{Header, FIRST_ZSTD_VERSION, FORMAT_VERSION, MAGIC};

/// Magic and version, common to every format version.
pub const VERSION_BYTES: usize = MAGIC.len() + 4;
/// Recording id and header length after magic and version.
pub const PREAMBLE_FIELDS_BYTES: usize = VERSION_BYTES + 8 + 4;
/// Largest header a reader accepts.
pub const MAX_HEADER_BYTES: usize = 1 << 20;
/// Length of a block frame.
pub const FRAME_BYTES: usize = 32;
/// Largest compressed payload a reader accepts.
pub const MAX_PAYLOAD_BYTES: u32 = 8 << 20;
/// Largest inflated block a reader accepts (and so the most a block can make it allocate
/// for its bytes); the writer never makes a larger one.
pub const MAX_INFLATED_BYTES: u32 = 8 << 20;
/// The zstd level of blocks: at a hook engine's millions of records a second, deflate 6 took
/// a tenth of memsup's CPU; zstd 3 takes about a tenth of that for profiles 10-37 % larger
/// (BENCHMARKS.md, "Profile blocks in zstd").
pub const COMPRESSION_LEVEL: i32 = 3;
/// The largest window a block's zstd frame may ask a reader to reserve: 8 MiB, the largest
/// inflated block (`MAX_INFLATED_BYTES`); the writer's frames use 2 MiB.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// The preamble of a new profile.
pub fn encode_preamble(recording_id: u64, header: &Header) -> Result<Vec<u8>, String> {
    let encoded_header = super::writer::encoding()
        .serialize(header)
        .map_err(|error| error.to_string())?;
    if encoded_header.len() > MAX_HEADER_BYTES {
        return Err("header larger than 1 MiB".to_string());
    }
    let mut preamble = Vec::with_capacity(PREAMBLE_FIELDS_BYTES + encoded_header.len() + 4);
    preamble.extend_from_slice(&MAGIC);
    preamble.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    preamble.extend_from_slice(&recording_id.to_le_bytes());
    preamble.extend_from_slice(&(encoded_header.len() as u32).to_le_bytes());
    preamble.extend_from_slice(&encoded_header);
    let crc = crc32(&[&preamble]);
    preamble.extend_from_slice(&crc.to_le_bytes());
    Ok(preamble)
}

/// The fields in front of a block's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub recording_id: u64,
    pub sequence: u64,
    pub payload_length: u32,
    pub inflated_length: u32,
    pub records: u32,
    pub crc: u32,
}

impl Frame {
    /// Frames `payload`, computing the crc.
    pub fn new(
        recording_id: u64,
        sequence: u64,
        payload: &[u8],
        inflated: u32,
        records: u32,
    ) -> Frame {
        let mut frame = Frame {
            recording_id,
            sequence,
            payload_length: payload.len() as u32,
            inflated_length: inflated,
            records,
            crc: 0,
        };
        frame.crc = crc32(&[&frame.fields(), payload]);
        frame
    }

    pub fn parse(bytes: &[u8; FRAME_BYTES]) -> Frame {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        Frame {
            recording_id: u64_at(0),
            sequence: u64_at(8),
            payload_length: u32_at(16),
            inflated_length: u32_at(20),
            records: u32_at(24),
            crc: u32_at(28),
        }
    }

    pub fn encode(&self) -> [u8; FRAME_BYTES] {
        let mut bytes = [0u8; FRAME_BYTES];
        bytes[..28].copy_from_slice(&self.fields());
        bytes[28..].copy_from_slice(&self.crc.to_le_bytes());
        bytes
    }

    /// Within the caps: only then may its payload be read.
    pub fn plausible(&self) -> bool {
        self.payload_length <= MAX_PAYLOAD_BYTES
            && self.inflated_length <= MAX_INFLATED_BYTES
            && self.records <= self.inflated_length
    }

    pub fn crc_matches(&self, payload: &[u8]) -> bool {
        crc32(&[&self.fields(), payload]) == self.crc
    }

    fn fields(&self) -> [u8; 28] {
        let mut fields = [0u8; 28];
        fields[..8].copy_from_slice(&self.recording_id.to_le_bytes());
        fields[8..16].copy_from_slice(&self.sequence.to_le_bytes());
        fields[16..20].copy_from_slice(&self.payload_length.to_le_bytes());
        fields[20..24].copy_from_slice(&self.inflated_length.to_le_bytes());
        fields[24..28].copy_from_slice(&self.records.to_le_bytes());
        fields
    }
}

pub fn crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = Crc::new();
    parts.iter().for_each(|part| crc.update(part));
    crc.sum()
}

/// Compresses an inflated block into one zstd frame, ending a zstd block after each of its
/// streams, so that each kind of value gets entropy tables of its own.
pub fn compress(inflated: &[u8]) -> std::io::Result<Vec<u8>> {
    compress_at_level(inflated, COMPRESSION_LEVEL)
}

/// `compress` at another zstd level (`examples/profile_sizes` compares them).
pub fn compress_at_level(inflated: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let mut encoder =
        zstd::stream::write::Encoder::new(Vec::with_capacity(inflated.len() / 4 + 64), level)?;
    for part in stream_parts(inflated) {
        encoder.write_all(part)?;
        encoder.flush()?;
    }
    encoder.finish()
}

/// The block of a payload in a file of format `version` (zstd from version 9, deflate
/// before), which must come to exactly `declared` bytes; never produces more.
pub fn decompress(payload: &[u8], declared: u32, version: u32) -> Result<Vec<u8>, String> {
    if declared > MAX_INFLATED_BYTES {
        return Err(format!(
            "declares {declared} bytes inflated, over the limit"
        ));
    }
    match version < FIRST_ZSTD_VERSION {
        true => read_exactly(DeflateDecoder::new(payload), declared),
        false => {
            let not = |error: std::io::Error| format!("does not inflate: {error}");
            let mut decoder = zstd::stream::read::Decoder::with_buffer(payload).map_err(not)?;
            // zstd would reserve the window a frame's header asks for, up to 128 MiB.
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(not)?;
            read_exactly(decoder, declared)
        }
    }
}

/// Reads `declared` bytes and one more at most, and fails unless exactly `declared` came.
fn read_exactly(decoder: impl Read, declared: u32) -> Result<Vec<u8>, String> {
    let mut inflated = Vec::with_capacity(declared as usize);
    decoder
        .take(u64::from(declared) + 1)
        .read_to_end(&mut inflated)
        .map_err(|error| format!("does not inflate: {error}"))?;
    if inflated.len() > declared as usize {
        return Err(format!("inflates past the {declared} bytes declared"));
    }
    if inflated.len() < declared as usize {
        return Err(format!(
            "inflates to {} bytes, not the {declared} declared",
            inflated.len()
        ));
    }
    Ok(inflated)
}

/// A random id for a new recording, from getrandom(2); the clock and pid if that fails.
pub fn new_recording_id() -> u64 {
    let mut id = [0u8; 8];
    // SAFETY: the buffer is valid for its 8 bytes.
    let filled = unsafe { libc::getrandom(id.as_mut_ptr().cast(), id.len(), 0) };
    if filled == id.len() as isize {
        return u64::from_le_bytes(id);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    now ^ (u64::from(std::process::id()) << 32)
}
