//! Finds the blocks of a version-3 profile in its file, one at a time, and says what is wrong
//! around them: bytes that are no block, blocks of another recording, and (through
//! `sequence`) blocks missing, repeated or out of order.
//!
//! After bytes that are no valid block (a crc failure, a bad frame), the reader resynchronises:
//! it scans forward for the next place where the recording's id (or another profile's magic)
//! starts a frame whose crc holds, and goes on from there. A crc over frame and payload makes
//! a false match there as unlikely as a damaged block passing its crc. A frame whose length
//! runs past the end of the file is a cut only when no such place follows it; otherwise its
//! length was damaged, and the reader resynchronises the same way.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use crate::trace::format::MAGIC;
use crate::trace::frame::{crc32, Frame, FRAME_BYTES, MAX_HEADER_BYTES, PREAMBLE_FIELDS_BYTES};
use crate::trace::sequence::SequenceCheck;

/// What the file holds next.
pub enum Found {
    /// A block of this recording, crc checked, to be used, after the damage lines that its
    /// sequence number revealed (blocks before it missing, or it out of order).
    Block {
        frame: Frame,
        payload: Vec<u8>,
        damage_before: Vec<String>,
    },
    /// One line of damage, e.g. "damaged: block 17 missing".
    Damage(String),
    /// The end of the file; `cut` when it ends inside a frame or a block.
    End { cut: bool },
}

/// What is at one offset.
enum Candidate {
    Block(Frame, Vec<u8>),
    /// A whole preamble (crc checked) of this or another recording, and its length.
    Preamble {
        recording_id: u64,
        length: u64,
    },
    /// A frame of this recording whose payload runs past the end of the file: a cut, or a
    /// damaged length field.
    Cut,
    Nothing,
}

/// Bytes scanned at a time while resynchronising.
const SCAN_CHUNK: usize = 64 * 1024;

pub struct BlockFinder {
    file: BufReader<File>,
    offset: u64,
    length: u64,
    recording_id: u64,
    /// Ids of other recordings whose preamble was seen in this file (bounded).
    foreign_ids: Vec<u64>,
    sequence: SequenceCheck,
    /// Damage lines decided but not yet handed out.
    pending: Vec<String>,
    ended: bool,
}

impl BlockFinder {
    /// Starts at `offset`, just after the preamble.
    pub fn new(file: File, offset: u64, recording_id: u64) -> std::io::Result<BlockFinder> {
        let length = file.metadata()?.len();
        Ok(BlockFinder {
            file: BufReader::new(file),
            offset,
            length,
            recording_id,
            foreign_ids: Vec::new(),
            sequence: SequenceCheck::default(),
            pending: Vec::new(),
            ended: false,
        })
    }

    pub fn next_found(&mut self) -> std::io::Result<Found> {
        loop {
            if let Some(line) = self.pending.pop() {
                return Ok(Found::Damage(line));
            }
            if self.ended {
                return Ok(Found::End { cut: false });
            }
            if self.offset >= self.length {
                self.ended = true;
                self.pending = self.sequence.finish();
                self.pending.reverse();
                continue;
            }
            let at = self.offset;
            match self.candidate(at, true)? {
                Candidate::Block(frame, payload) => {
                    self.offset += (FRAME_BYTES + payload.len()) as u64;
                    if frame.recording_id != self.recording_id {
                        return Ok(Found::Damage(
                            "damaged: a block of another recording".to_string(),
                        ));
                    }
                    let (usable, lines) = self.sequence.accept(frame.sequence);
                    if usable {
                        return Ok(Found::Block {
                            frame,
                            payload,
                            damage_before: lines,
                        });
                    }
                    self.pending = lines;
                    self.pending.reverse();
                }
                Candidate::Preamble {
                    recording_id,
                    length,
                } => {
                    self.offset += length;
                    return Ok(Found::Damage(self.preamble_line(recording_id, at)));
                }
                Candidate::Cut => return self.cut_or_resynchronise(at),
                Candidate::Nothing => return self.resynchronise(at),
            }
        }
    }

    fn cut_at_end(&mut self) -> std::io::Result<Found> {
        self.ended = true;
        self.pending = self.sequence.finish();
        self.pending.reverse();
        Ok(Found::End { cut: true })
    }

    fn preamble_line(&mut self, recording_id: u64, at: u64) -> String {
        if recording_id == self.recording_id {
            return format!("damaged: this recording's start again at byte {at}");
        }
        if !self.foreign_ids.contains(&recording_id) && self.foreign_ids.len() < 64 {
            self.foreign_ids.push(recording_id);
        }
        format!("damaged: another recording appended at byte {at}")
    }

    /// A frame of this recording whose payload runs past the end: the file was cut inside its
    /// last block, unless a valid block or preamble lies further on; then the frame's length
    /// was damaged, and the bytes up to there are skipped as after a crc failure.
    fn cut_or_resynchronise(&mut self, at: u64) -> std::io::Result<Found> {
        match self.next_start(at + 1)? {
            Some(start) => Ok(self.skip_to(at, start)),
            None => self.cut_at_end(),
        }
    }

    /// Skips to the next place a block or preamble starts and reports the bytes skipped.
    fn resynchronise(&mut self, from: u64) -> std::io::Result<Found> {
        if self.length - from < FRAME_BYTES as u64 {
            return self.cut_at_end();
        }
        if let Some(start) = self.next_start(from + 1)? {
            return Ok(self.skip_to(from, start));
        }
        self.offset = self.length;
        Ok(Found::Damage(format!(
            "damaged: bytes {from} to the end ({}) are no block of this recording; skipped",
            self.length
        )))
    }

    fn skip_to(&mut self, from: u64, start: u64) -> Found {
        self.offset = start;
        Found::Damage(format!(
            "damaged: bytes {from} to {start} are no block of this recording; skipped"
        ))
    }

    /// The first offset at or after `position` where a whole block (crc checked) of this or a
    /// known other recording, or a whole preamble, starts.
    fn next_start(&mut self, mut position: u64) -> std::io::Result<Option<u64>> {
        while let Some(start) = self.next_marker(position)? {
            if !matches!(
                self.candidate(start, false)?,
                Candidate::Nothing | Candidate::Cut
            ) {
                return Ok(Some(start));
            }
            position = start + 1;
        }
        Ok(None)
    }

    /// The first offset at or after `from` where this recording's id, a known other
    /// recording's id or the profile magic starts.
    fn next_marker(&mut self, mut from: u64) -> std::io::Result<Option<u64>> {
        let mut markers = vec![self.recording_id.to_le_bytes(), MAGIC];
        markers.extend(self.foreign_ids.iter().map(|id| id.to_le_bytes()));
        let mut chunk = vec![0u8; SCAN_CHUNK];
        while from + 8 <= self.length {
            let wanted = (self.length - from).min(SCAN_CHUNK as u64) as usize;
            self.file.seek(SeekFrom::Start(from))?;
            self.file.read_exact(&mut chunk[..wanted])?;
            let window = &chunk[..wanted];
            let hit = window
                .windows(8)
                .position(|bytes| markers.iter().any(|marker| bytes == marker));
            if let Some(index) = hit {
                return Ok(Some(from + index as u64));
            }
            // Overlap by 7 so a marker across two chunks is found.
            from += (wanted as u64).saturating_sub(7).max(1);
        }
        Ok(None)
    }

    /// What starts at `at`. `any_recording`: a frame with any id counts (walking the file
    /// block by block), not only this recording's and the known others'.
    fn candidate(&mut self, at: u64, any_recording: bool) -> std::io::Result<Candidate> {
        let remaining = self.length - at;
        let mut head = [0u8; FRAME_BYTES];
        let available = remaining.min(FRAME_BYTES as u64) as usize;
        self.file.seek(SeekFrom::Start(at))?;
        self.file.read_exact(&mut head[..available])?;
        if available >= MAGIC.len() && head[..MAGIC.len()] == MAGIC {
            return self.preamble(at);
        }
        if available < FRAME_BYTES {
            let ours = available >= 8 && head[..8] == self.recording_id.to_le_bytes();
            return Ok(if ours {
                Candidate::Cut
            } else {
                Candidate::Nothing
            });
        }
        let frame = Frame::parse(&head);
        let known = frame.recording_id == self.recording_id
            || self.foreign_ids.contains(&frame.recording_id);
        if !frame.plausible() || !(known || any_recording) {
            return Ok(Candidate::Nothing);
        }
        if u64::from(frame.payload_length) > remaining - FRAME_BYTES as u64 {
            let ours = frame.recording_id == self.recording_id;
            return Ok(if ours {
                Candidate::Cut
            } else {
                Candidate::Nothing
            });
        }
        let mut payload = vec![0u8; frame.payload_length as usize];
        self.file.read_exact(&mut payload)?;
        Ok(match frame.crc_matches(&payload) {
            true => Candidate::Block(frame, payload),
            false => Candidate::Nothing,
        })
    }

    /// A version-3 preamble at `at` whose crc holds.
    fn preamble(&mut self, at: u64) -> std::io::Result<Candidate> {
        let remaining = self.length - at;
        if remaining < PREAMBLE_FIELDS_BYTES as u64 {
            return Ok(Candidate::Nothing);
        }
        let mut fields = [0u8; PREAMBLE_FIELDS_BYTES];
        self.file.seek(SeekFrom::Start(at))?;
        self.file.read_exact(&mut fields)?;
        let header_length = u32::from_le_bytes(fields[20..24].try_into().unwrap()) as usize;
        let length = (PREAMBLE_FIELDS_BYTES + header_length + 4) as u64;
        if header_length > MAX_HEADER_BYTES || length > remaining {
            return Ok(Candidate::Nothing);
        }
        let mut rest = vec![0u8; header_length + 4];
        self.file.read_exact(&mut rest)?;
        let (header, crc) = rest.split_at(header_length);
        if crc32(&[&fields, header]).to_le_bytes() != crc {
            return Ok(Candidate::Nothing);
        }
        let recording_id = u64::from_le_bytes(fields[12..20].try_into().unwrap());
        Ok(Candidate::Preamble {
            recording_id,
            length,
        })
    }
}
