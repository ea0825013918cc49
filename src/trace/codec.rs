//! The record encoding of a version-3 block, before compression.
//!
//! A block's records are split into streams by kind of value, because each stream compresses
//! far better alone than interleaved: the tags (one byte per record), the process and thread
//! ids, times, addresses, sizes, stack ids, other numbers, and the rare records in bincode.
//! Times, addresses and stack ids are stored as differences from the same thread's previous
//! value in the block, sizes as an index into the block's table of sizes seen. All of that
//! state starts empty in every block, so a block decodes without any block before it.
//!
//! Inflated layout: for each stream in `Stream` order its length (varint), then the streams.

use std::collections::HashMap;

use bincode::Options;

use crate::trace::format::{AllocFunction, Record};
use crate::trace::stacks::StackId;
use crate::trace::varint::{put_signed, put_unsigned, Cursor};

/// Distinct threads one block may hold; the writer starts a new block before passing it.
pub const MAX_BLOCK_THREADS: usize = 4096;
/// Stack node addresses one block remembers.
const MAX_BLOCK_NODES: usize = 65536;
/// Distinct sizes one block interns; later new sizes are stored whole.
const MAX_BLOCK_SIZES: usize = 4096;

/// The streams of a block, in the order they are laid out.
#[derive(Clone, Copy)]
enum Stream {
    Tags,
    Threads,
    Times,
    Addresses,
    Sizes,
    Stacks,
    Values,
    Other,
}
const STREAMS: usize = 8;

/// Kinds of record in the tag byte's low bits; everything else goes to bincode.
const KIND_OTHER: u8 = 0;
const KIND_ALLOC: u8 = 1;
const KIND_FREE: u8 = 2;
const KIND_REALLOC: u8 = 3;
const KIND_STACK_NODE: u8 = 4;
const KIND_STATUS: u8 = 5;
const KIND_MASK: u8 = 0x1f;
/// Set when the record's process and thread are the previous record's.
const SAME_THREAD: u8 = 0x80;

/// The thread key of status samples: they come from the sampler, in their own time order.
const SAMPLER_THREAD: u32 = u32::MAX;

/// What the previous record of one thread left, to difference the next one against.
#[derive(Default, Clone, Copy)]
struct ThreadState {
    time_ns: u64,
    address: u64,
    stack: StackId,
    /// For status samples: rss, anon, file, shmem, swap of the previous sample.
    values: [u64; 5],
}

/// The state both sides keep while walking a block, identical on each side.
#[derive(Default)]
struct BlockState {
    threads: HashMap<(u32, u32), ThreadState>,
    sizes: HashMap<u64, u32>,
    size_list: Vec<u64>,
    previous_thread: Option<(u32, u32)>,
    previous_node: (StackId, u64),
    /// Addresses of the block's stack nodes by id (bounded): a node's address is stored as
    /// the difference from its parent's, which is often in the same function or module.
    node_addresses: HashMap<StackId, u64>,
}

impl BlockState {
    /// The address a stack node's is differenced against: its parent's if the block holds
    /// it, else the previous node's.
    fn node_base(&self, parent: StackId) -> u64 {
        match self.node_addresses.get(&parent) {
            Some(&address) => address,
            None => self.previous_node.1,
        }
    }

    fn remember_node(&mut self, id: StackId, address: u64) {
        self.previous_node = (id, address);
        if self.node_addresses.len() < MAX_BLOCK_NODES {
            self.node_addresses.insert(id, address);
        }
    }

    fn intern_size(&mut self, size: u64) {
        if self.size_list.len() < MAX_BLOCK_SIZES && !self.sizes.contains_key(&size) {
            self.sizes.insert(size, self.size_list.len() as u32);
            self.size_list.push(size);
        }
    }
}

/// Builds one block's streams record by record.
#[derive(Default)]
pub struct BlockEncoder {
    streams: [Vec<u8>; STREAMS],
    state: BlockState,
    records: u32,
}

impl BlockEncoder {
    /// Records encoded since the block started.
    pub fn records(&self) -> u32 {
        self.records
    }

    /// Encoded bytes so far.
    pub fn bytes(&self) -> usize {
        self.streams.iter().map(Vec::len).sum()
    }

    /// Distinct threads in the block so far.
    pub fn threads(&self) -> usize {
        self.state.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    pub fn push(&mut self, record: &Record) -> Result<(), bincode::Error> {
        match *record {
            Record::Alloc {
                time_ns,
                pid,
                tid,
                function,
                address,
                size,
                stack,
            } => {
                let thread = self.begin(KIND_ALLOC, pid, tid, time_ns);
                self.put_byte(Stream::Values, function as u8);
                self.put_address(thread, address);
                self.put_size(size);
                self.put_stack(thread, stack);
            }
            Record::Free {
                time_ns,
                pid,
                tid,
                address,
            } => {
                let thread = self.begin(KIND_FREE, pid, tid, time_ns);
                self.put_address(thread, address);
            }
            Record::Realloc {
                time_ns,
                pid,
                tid,
                function,
                old_address,
                new_address,
                size,
                stack,
            } => {
                let thread = self.begin(KIND_REALLOC, pid, tid, time_ns);
                self.put_byte(Stream::Values, function as u8);
                self.put_address(thread, old_address);
                self.put_address(thread, new_address);
                self.put_size(size);
                self.put_stack(thread, stack);
            }
            Record::StackNode {
                pid,
                id,
                parent,
                address,
            } => self.push_stack_node(pid, id, parent, address),
            Record::StatusSample {
                time_ns,
                pid,
                rss,
                anon,
                file,
                shmem,
                swap,
            } => {
                let thread = self.begin(KIND_STATUS, pid, SAMPLER_THREAD, time_ns);
                let previous = self.state.threads[&thread].values;
                let values = [rss, anon, file, shmem, swap];
                for (value, before) in values.iter().zip(previous) {
                    put_signed(
                        self.stream(Stream::Values),
                        value.wrapping_sub(before) as i64,
                    );
                }
                self.state.threads.get_mut(&thread).unwrap().values = values;
            }
            _ => {
                self.put_byte(Stream::Tags, KIND_OTHER);
                super::writer::encoding().serialize_into(self.stream(Stream::Other), record)?;
            }
        }
        self.records += 1;
        Ok(())
    }

    /// The inflated block: stream lengths, then the streams. Leaves the encoder empty.
    pub fn take(&mut self) -> Vec<u8> {
        let mut block = Vec::with_capacity(self.bytes() + 5 * STREAMS);
        for stream in &self.streams {
            put_unsigned(&mut block, stream.len() as u64);
        }
        for stream in &self.streams {
            block.extend_from_slice(stream);
        }
        *self = BlockEncoder::default();
        block
    }

    fn stream(&mut self, stream: Stream) -> &mut Vec<u8> {
        &mut self.streams[stream as usize]
    }

    fn put_byte(&mut self, stream: Stream, byte: u8) {
        self.stream(stream).push(byte);
    }

    /// Writes the tag, the thread (unless it is the previous record's) and the time.
    fn begin(&mut self, kind: u8, pid: u32, tid: u32, time_ns: u64) -> (u32, u32) {
        let thread = (pid, tid);
        if self.state.previous_thread == Some(thread) {
            self.put_byte(Stream::Tags, kind | SAME_THREAD);
        } else {
            self.put_byte(Stream::Tags, kind);
            put_unsigned(self.stream(Stream::Threads), pid.into());
            put_unsigned(self.stream(Stream::Threads), tid.into());
            self.state.previous_thread = Some(thread);
        }
        let state = self.state.threads.entry(thread).or_default();
        let delta = time_ns.wrapping_sub(state.time_ns) as i64;
        state.time_ns = time_ns;
        put_signed(self.stream(Stream::Times), delta);
        thread
    }

    fn put_address(&mut self, thread: (u32, u32), address: u64) {
        let state = self.state.threads.get_mut(&thread).unwrap();
        let delta = address.wrapping_sub(state.address) as i64;
        if address != 0 {
            state.address = address;
        }
        put_signed(self.stream(Stream::Addresses), delta);
    }

    fn put_size(&mut self, size: u64) {
        match self.state.sizes.get(&size) {
            Some(&index) => put_unsigned(self.stream(Stream::Sizes), u64::from(index) + 1),
            None => {
                put_unsigned(self.stream(Stream::Sizes), 0);
                put_unsigned(self.stream(Stream::Sizes), size);
                self.state.intern_size(size);
            }
        }
    }

    fn put_stack(&mut self, thread: (u32, u32), stack: StackId) {
        let state = self.state.threads.get_mut(&thread).unwrap();
        let delta = i64::from(stack) - i64::from(state.stack);
        state.stack = stack;
        put_signed(self.stream(Stream::Stacks), delta);
    }

    fn push_stack_node(&mut self, pid: u32, id: StackId, parent: StackId, address: u64) {
        self.put_byte(Stream::Tags, KIND_STACK_NODE);
        put_unsigned(self.stream(Stream::Threads), pid.into());
        let previous_id = self.state.previous_node.0;
        put_signed(
            self.stream(Stream::Stacks),
            i64::from(id) - i64::from(previous_id),
        );
        put_signed(
            self.stream(Stream::Stacks),
            i64::from(id) - i64::from(parent),
        );
        let delta = address.wrapping_sub(self.state.node_base(parent)) as i64;
        put_signed(self.stream(Stream::Addresses), delta);
        self.state.remember_node(id, address);
        // A stack node names no thread: the next record writes its own.
        self.state.previous_thread = None;
    }
}

/// Walks an inflated block, one record per call; any inconsistency is an error, never a panic.
pub struct BlockDecoder {
    data: Vec<u8>,
    /// (position, end) of each stream inside `data`.
    streams: [(usize, usize); STREAMS],
    state: BlockState,
    remaining: u32,
}

impl BlockDecoder {
    /// Checks the stream table against the block's length and its record count.
    pub fn new(data: Vec<u8>, records: u32) -> Result<BlockDecoder, String> {
        let mut table = Cursor::new(&data);
        let mut lengths = [0usize; STREAMS];
        for length in &mut lengths {
            *length = usize::try_from(table.unsigned()?).map_err(|_| "stream too long")?;
        }
        let mut position = table.position();
        let mut streams = [(0, 0); STREAMS];
        for (stream, length) in streams.iter_mut().zip(lengths) {
            let end = position
                .checked_add(length)
                .filter(|&end| end <= data.len())
                .ok_or("a stream runs past the block")?;
            *stream = (position, end);
            position = end;
        }
        if position != data.len() {
            return Err("bytes after the last stream".to_string());
        }
        let tags = streams[Stream::Tags as usize];
        if tags.1 - tags.0 != records as usize {
            return Err(format!("{records} records declared, not one tag each"));
        }
        Ok(BlockDecoder {
            data,
            streams,
            state: BlockState::default(),
            remaining: records,
        })
    }

    /// The next record, None after the last one (when every stream must be used up).
    pub fn next_record(&mut self) -> Result<Option<Record>, String> {
        if self.remaining == 0 {
            return match self.streams.iter().all(|(position, end)| position == end) {
                true => Ok(None),
                false => Err("bytes left over after the last record".to_string()),
            };
        }
        self.remaining -= 1;
        let tag = self.byte(Stream::Tags)?;
        let kind = tag & KIND_MASK;
        match kind {
            KIND_OTHER => self.other().map(Some),
            KIND_STACK_NODE => self.stack_node().map(Some),
            KIND_ALLOC | KIND_FREE | KIND_REALLOC | KIND_STATUS => {
                self.threaded(kind, tag & SAME_THREAD != 0).map(Some)
            }
            _ => Err(format!("unknown record tag {tag:#x}")),
        }
    }

    fn threaded(&mut self, kind: u8, same_thread: bool) -> Result<Record, String> {
        let thread = match (same_thread, self.state.previous_thread) {
            (true, Some(thread)) => thread,
            (true, None) => return Err("a record continues no thread".to_string()),
            (false, _) => (
                self.unsigned_u32(Stream::Threads)?,
                self.unsigned_u32(Stream::Threads)?,
            ),
        };
        let (pid, tid) = thread;
        if kind == KIND_STATUS && tid != SAMPLER_THREAD
            || kind != KIND_STATUS && tid == SAMPLER_THREAD
        {
            return Err("a status sample's thread mixed with a program thread".to_string());
        }
        self.state.previous_thread = Some(thread);
        if !self.state.threads.contains_key(&thread)
            && self.state.threads.len() >= MAX_BLOCK_THREADS
        {
            return Err("too many threads in one block".to_string());
        }
        let delta = self.signed(Stream::Times)?;
        let state = self.state.threads.entry(thread).or_default();
        let time_ns = state.time_ns.wrapping_add(delta as u64);
        state.time_ns = time_ns;
        Ok(match kind {
            KIND_ALLOC => Record::Alloc {
                time_ns,
                pid,
                tid,
                function: self.function()?,
                address: self.address(thread)?,
                size: self.size()?,
                stack: self.stack(thread)?,
            },
            KIND_FREE => Record::Free {
                time_ns,
                pid,
                tid,
                address: self.address(thread)?,
            },
            KIND_REALLOC => Record::Realloc {
                time_ns,
                pid,
                tid,
                function: self.function()?,
                old_address: self.address(thread)?,
                new_address: self.address(thread)?,
                size: self.size()?,
                stack: self.stack(thread)?,
            },
            _ => self.status_sample(time_ns, thread)?,
        })
    }

    fn status_sample(&mut self, time_ns: u64, thread: (u32, u32)) -> Result<Record, String> {
        let mut values = self.state.threads[&thread].values;
        for value in &mut values {
            *value = value.wrapping_add(self.signed(Stream::Values)? as u64);
        }
        self.state.threads.get_mut(&thread).unwrap().values = values;
        let [rss, anon, file, shmem, swap] = values;
        Ok(Record::StatusSample {
            time_ns,
            pid: thread.0,
            rss,
            anon,
            file,
            shmem,
            swap,
        })
    }

    fn stack_node(&mut self) -> Result<Record, String> {
        let pid = self.unsigned_u32(Stream::Threads)?;
        let previous_id = self.state.previous_node.0;
        let id = i64::from(previous_id)
            .checked_add(self.signed(Stream::Stacks)?)
            .and_then(|id| StackId::try_from(id).ok())
            .ok_or("a stack node id out of range")?;
        let parent = i64::from(id)
            .checked_sub(self.signed(Stream::Stacks)?)
            .and_then(|parent| StackId::try_from(parent).ok())
            .ok_or("a stack node parent out of range")?;
        let delta = self.signed(Stream::Addresses)? as u64;
        let address = self.state.node_base(parent).wrapping_add(delta);
        self.state.remember_node(id, address);
        self.state.previous_thread = None;
        Ok(Record::StackNode {
            pid,
            id,
            parent,
            address,
        })
    }

    fn other(&mut self) -> Result<Record, String> {
        let (position, end) = self.streams[Stream::Other as usize];
        let mut rest = &self.data[position..end];
        // The limit bounds every length inside the record by the bytes actually there.
        let record = super::writer::encoding()
            .with_limit(rest.len() as u64)
            .deserialize_from::<_, Record>(&mut rest)
            .map_err(|error| format!("a record does not decode: {error}"))?;
        self.streams[Stream::Other as usize].0 = end - rest.len();
        match record {
            Record::Alloc { .. }
            | Record::Free { .. }
            | Record::Realloc { .. }
            | Record::StackNode { .. }
            | Record::StatusSample { .. } => Err("a compact record kind stored whole".to_string()),
            record => Ok(record),
        }
    }

    fn cursor(&self, stream: Stream) -> Cursor<'_> {
        let (position, end) = self.streams[stream as usize];
        Cursor::new(&self.data[position..end])
    }

    fn advance(&mut self, stream: Stream, used: usize) {
        self.streams[stream as usize].0 += used;
    }

    fn byte(&mut self, stream: Stream) -> Result<u8, String> {
        let byte = self.cursor(stream).byte()?;
        self.advance(stream, 1);
        Ok(byte)
    }

    fn unsigned(&mut self, stream: Stream) -> Result<u64, String> {
        let mut cursor = self.cursor(stream);
        let value = cursor.unsigned()?;
        let used = cursor.position();
        self.advance(stream, used);
        Ok(value)
    }

    fn unsigned_u32(&mut self, stream: Stream) -> Result<u32, String> {
        u32::try_from(self.unsigned(stream)?).map_err(|_| "an id past 32 bits".to_string())
    }

    fn signed(&mut self, stream: Stream) -> Result<i64, String> {
        let mut cursor = self.cursor(stream);
        let value = cursor.signed()?;
        let used = cursor.position();
        self.advance(stream, used);
        Ok(value)
    }

    fn function(&mut self) -> Result<AllocFunction, String> {
        let index = self.byte(Stream::Values)?;
        AllocFunction::ALL
            .get(usize::from(index))
            .copied()
            .ok_or_else(|| format!("unknown allocator function {index}"))
    }

    fn address(&mut self, thread: (u32, u32)) -> Result<u64, String> {
        let delta = self.signed(Stream::Addresses)?;
        let state = self.state.threads.get_mut(&thread).unwrap();
        let address = state.address.wrapping_add(delta as u64);
        if address != 0 {
            state.address = address;
        }
        Ok(address)
    }

    fn size(&mut self) -> Result<u64, String> {
        match self.unsigned(Stream::Sizes)? {
            0 => {
                let size = self.unsigned(Stream::Sizes)?;
                self.state.intern_size(size);
                Ok(size)
            }
            index => self
                .state
                .size_list
                .get(index as usize - 1)
                .copied()
                .ok_or_else(|| format!("size {index} not in the block's table")),
        }
    }

    fn stack(&mut self, thread: (u32, u32)) -> Result<StackId, String> {
        let delta = self.signed(Stream::Stacks)?;
        let state = self.state.threads.get_mut(&thread).unwrap();
        let stack = i64::from(state.stack)
            .checked_add(delta)
            .and_then(|stack| StackId::try_from(stack).ok())
            .ok_or("a stack id out of range")?;
        state.stack = stack;
        Ok(stack)
    }
}
