//! Symbol records in a block's streams: each string once per block, then as an index into
//! the block's table (a module's path, or a function's names, recur in symbol after symbol);
//! addresses as differences from the previous symbol's, as symbols come sorted by address.

use std::collections::HashMap;

use crate::trace::block_decoder::BlockDecoder;
use crate::trace::codec::{BlockEncoder, Stream, KIND_SYMBOL};
use crate::trace::format::{Record, SourceFrame};
use crate::trace::varint::{put_signed, put_unsigned};

/// Strings one block interns; later new strings are stored whole each time.
const MAX_BLOCK_STRINGS: usize = 65536;

/// Bits of a source frame's flag byte.
const INLINED: u8 = 1;
const HAS_FILE: u8 = 2;
const HAS_LINE: u8 = 4;
const HAS_COLUMN: u8 = 8;

/// The block's strings: by value for the encoder, by index for the decoder.
#[derive(Default)]
pub(super) struct StringTable {
    indices: HashMap<String, u32>,
    strings: Vec<String>,
    previous_address: u64,
    /// Bytes of strings the record being decoded may still take: a record's strings never
    /// come to more than its block's bytes, however often it names one string.
    budget: usize,
}

impl BlockEncoder {
    pub(super) fn push_symbol(&mut self, record: &Record) {
        let Record::Symbol {
            pid,
            address,
            function,
            offset,
            module,
            frames,
        } = record
        else {
            unreachable!("only symbols come here")
        };
        self.put_byte(Stream::Tags, KIND_SYMBOL);
        put_unsigned(self.stream(Stream::Threads), (*pid).into());
        let delta = address.wrapping_sub(self.state.strings.previous_address) as i64;
        self.state.strings.previous_address = *address;
        put_signed(self.stream(Stream::Symbols), delta);
        put_unsigned(self.stream(Stream::Symbols), *offset);
        self.put_string(function);
        self.put_string(module);
        put_unsigned(self.stream(Stream::Symbols), frames.len() as u64);
        for frame in frames {
            self.put_frame(frame);
        }
        // A symbol names no thread: the next record writes its own.
        self.state.previous_thread = None;
    }

    fn put_frame(&mut self, frame: &SourceFrame) {
        let flags = [
            (frame.inlined, INLINED),
            (frame.file.is_some(), HAS_FILE),
            (frame.line.is_some(), HAS_LINE),
            (frame.column.is_some(), HAS_COLUMN),
        ]
        .iter()
        .filter(|(set, _)| *set)
        .fold(0, |flags, (_, bit)| flags | bit);
        self.put_byte(Stream::Symbols, flags);
        self.put_string(&frame.function);
        self.put_string(&frame.raw_name);
        if let Some(file) = &frame.file {
            self.put_string(file);
        }
        for number in [frame.line, frame.column].into_iter().flatten() {
            put_unsigned(self.stream(Stream::Symbols), number.into());
        }
    }

    /// 1 + the string's index in the block's table, or 0 and the string itself.
    fn put_string(&mut self, string: &str) {
        let table = &mut self.state.strings;
        if let Some(&index) = table.indices.get(string) {
            put_unsigned(self.stream(Stream::StringRefs), u64::from(index) + 1);
            return;
        }
        if table.indices.len() < MAX_BLOCK_STRINGS {
            let index = table.indices.len() as u32;
            table.indices.insert(string.to_string(), index);
        }
        put_unsigned(self.stream(Stream::StringRefs), 0);
        put_unsigned(self.stream(Stream::Strings), string.len() as u64);
        self.stream(Stream::Strings)
            .extend_from_slice(string.as_bytes());
    }
}

impl BlockDecoder {
    pub(super) fn symbol(&mut self) -> Result<Record, String> {
        let pid = self.unsigned_u32(Stream::Threads)?;
        self.state.strings.budget = self.block_length();
        let delta = self.signed(Stream::Symbols)? as u64;
        let address = self.state.strings.previous_address.wrapping_add(delta);
        self.state.strings.previous_address = address;
        let offset = self.unsigned(Stream::Symbols)?;
        let function = self.string()?;
        let module = self.string()?;
        let count = self.unsigned(Stream::Symbols)?;
        // Each frame takes at least its flag byte, so a count past the stream fails there.
        let mut frames = Vec::new();
        for _ in 0..count {
            frames.push(self.frame()?);
        }
        self.state.previous_thread = None;
        Ok(Record::Symbol {
            pid,
            address,
            function,
            offset,
            module,
            frames,
        })
    }

    fn frame(&mut self) -> Result<SourceFrame, String> {
        let flags = self.byte(Stream::Symbols)?;
        if flags & !(INLINED | HAS_FILE | HAS_LINE | HAS_COLUMN) != 0 {
            return Err(format!("unknown source frame flags {flags:#x}"));
        }
        let function = self.string()?;
        let raw_name = self.string()?;
        let file = match flags & HAS_FILE {
            0 => None,
            _ => Some(self.string()?),
        };
        let mut number = |flag| -> Result<Option<u32>, String> {
            match flags & flag {
                0 => Ok(None),
                _ => Ok(Some(self.unsigned_u32(Stream::Symbols)?)),
            }
        };
        let line = number(HAS_LINE)?;
        let column = number(HAS_COLUMN)?;
        Ok(SourceFrame {
            function,
            raw_name,
            file,
            line,
            column,
            inlined: flags & INLINED != 0,
        })
    }

    fn string(&mut self) -> Result<String, String> {
        let index = self.unsigned(Stream::StringRefs)?;
        let table = &mut self.state.strings;
        if index > 0 {
            let string = usize::try_from(index - 1)
                .ok()
                .and_then(|index| table.strings.get(index))
                .ok_or_else(|| format!("string {index} not in the block's table"))?;
            table.budget = table
                .budget
                .checked_sub(string.len())
                .ok_or("a symbol's strings outweigh its block")?;
            return Ok(string.clone());
        }
        let length = self.unsigned(Stream::Strings)?;
        let bytes = self.bytes(Stream::Strings, length)?;
        let string = String::from_utf8(bytes).map_err(|_| "a string not in UTF-8")?;
        if self.state.strings.strings.len() < MAX_BLOCK_STRINGS {
            self.state.strings.strings.push(string.clone());
        }
        Ok(string)
    }
}
