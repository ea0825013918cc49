//! Decodes a version-3 block's streams (see `codec`) back into records, one at a time.

use bincode::Options;

use crate::trace::codec::{
    BlockState, Stream, KIND_ALLOC, KIND_FREE, KIND_MASK, KIND_OTHER, KIND_REALLOC,
    KIND_STACK_NODE, KIND_STATUS, KIND_SYMBOL, MAX_BLOCK_THREADS, SAME_THREAD, SAMPLER_THREAD,
    STREAMS, TIME_FRACTION, TIME_UNIT_NS,
};
use crate::trace::format::{AllocFunction, Record, FORMAT_VERSION};
use crate::trace::predict::{fresh_after, RECENT_STACKS};
use crate::trace::recent::{RECENT_ALLOCATIONS, RECENT_ALLOCATIONS_V4};
use crate::trace::stacks::StackId;
use crate::trace::varint::{unzigzag, Cursor};

/// Walks an inflated block, one record per call; any inconsistency is an error, never a panic.
pub struct BlockDecoder {
    data: Vec<u8>,
    /// (position, end) of each stream inside `data`.
    streams: [(usize, usize); STREAMS],
    pub(super) state: BlockState,
    remaining: u32,
}

impl BlockDecoder {
    /// A block of the current format version; see `with_version`.
    pub fn new(data: Vec<u8>, records: u32) -> Result<BlockDecoder, String> {
        BlockDecoder::with_version(data, records, FORMAT_VERSION)
    }

    /// Checks the stream table against the block's length and its record count; `version`
    /// (3 or later) is the file's, whose rules the block follows.
    pub fn with_version(data: Vec<u8>, records: u32, version: u32) -> Result<BlockDecoder, String> {
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
        let state = BlockState {
            version_3: version == 3,
            ..BlockState::default()
        };
        Ok(BlockDecoder {
            data,
            streams,
            state,
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
        match (kind, tag & !KIND_MASK) {
            (KIND_OTHER, 0) => self.other().map(Some),
            (KIND_STACK_NODE, 0) => self.stack_node().map(Some),
            (KIND_SYMBOL, 0) => self.symbol().map(Some),
            (KIND_ALLOC | KIND_FREE | KIND_REALLOC | KIND_STATUS, flags)
                if flags & !(SAME_THREAD | TIME_FRACTION) == 0 =>
            {
                self.threaded(tag).map(Some)
            }
            _ => Err(format!("unknown record tag {tag:#x}")),
        }
    }

    fn threaded(&mut self, tag: u8) -> Result<Record, String> {
        let kind = tag & KIND_MASK;
        let fraction = match tag & TIME_FRACTION {
            0 => 0,
            _ => self.unsigned(Stream::Fractions)?,
        };
        let thread = match (tag & SAME_THREAD != 0, self.state.previous_thread) {
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
        let units = (state.time_ns / TIME_UNIT_NS).wrapping_add(delta as u64);
        let time_ns = units
            .checked_mul(TIME_UNIT_NS)
            .and_then(|whole| whole.checked_add(fraction))
            .filter(|_| fraction < TIME_UNIT_NS)
            .ok_or("a time out of range")?;
        state.time_ns = time_ns;
        Ok(match kind {
            KIND_ALLOC => {
                let stack = self.stack(thread)?;
                let (function, size) = self.call(stack)?;
                Record::Alloc {
                    time_ns,
                    pid,
                    tid,
                    function,
                    address: self.allocated(thread, size)?,
                    size,
                    stack,
                }
            }
            KIND_FREE => Record::Free {
                time_ns,
                pid,
                tid,
                address: self.freed(thread)?,
            },
            KIND_REALLOC => {
                let stack = self.stack(thread)?;
                let (function, size) = self.call(stack)?;
                Record::Realloc {
                    time_ns,
                    pid,
                    tid,
                    function,
                    old_address: self.freed(thread)?,
                    new_address: self.allocated(thread, size)?,
                    size,
                    stack,
                }
            }
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
            .checked_add(self.signed(Stream::NodeLinks)?)
            .and_then(|id| StackId::try_from(id).ok())
            .ok_or("a stack node id out of range")?;
        let parent = i64::from(id)
            .checked_sub(self.signed(Stream::NodeLinks)?)
            .and_then(|parent| StackId::try_from(parent).ok())
            .ok_or("a stack node parent out of range")?;
        let delta = self.signed(Stream::NodeAddresses)? as u64;
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
            | Record::Symbol { .. }
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

    pub(super) fn byte(&mut self, stream: Stream) -> Result<u8, String> {
        let byte = self.cursor(stream).byte()?;
        self.advance(stream, 1);
        Ok(byte)
    }

    pub(super) fn unsigned(&mut self, stream: Stream) -> Result<u64, String> {
        let mut cursor = self.cursor(stream);
        let value = cursor.unsigned()?;
        let used = cursor.position();
        self.advance(stream, used);
        Ok(value)
    }

    /// Bytes of the inflated block.
    pub(super) fn block_length(&self) -> usize {
        self.data.len()
    }

    /// The next `length` bytes of a stream, refused when the stream has fewer.
    pub(super) fn bytes(&mut self, stream: Stream, length: u64) -> Result<Vec<u8>, String> {
        let (position, end) = self.streams[stream as usize];
        let length = usize::try_from(length)
            .ok()
            .filter(|&length| length <= end - position)
            .ok_or("a string runs past its stream")?;
        self.advance(stream, length);
        Ok(self.data[position..position + length].to_vec())
    }

    pub(super) fn unsigned_u32(&mut self, stream: Stream) -> Result<u32, String> {
        u32::try_from(self.unsigned(stream)?).map_err(|_| "an id past 32 bits".to_string())
    }

    fn aligned(&mut self, stream: Stream) -> Result<i64, String> {
        let mut cursor = self.cursor(stream);
        let value = cursor.aligned()?;
        let used = cursor.position();
        self.advance(stream, used);
        Ok(value)
    }

    pub(super) fn signed(&mut self, stream: Stream) -> Result<i64, String> {
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

    /// Version 4: an address stored against the thread's expected fresh chunk.
    fn fresh_address(&mut self, thread: (u32, u32), size: u64) -> Result<u64, String> {
        let delta = self.aligned(Stream::Addresses)?;
        let state = self.state.threads.get_mut(&thread).unwrap();
        let address = state.fresh.wrapping_add(delta as u64);
        if address != 0 {
            state.fresh = fresh_after(address, size);
        }
        Ok(address)
    }

    /// Version 4: a freed address stored against the thread's previous one.
    fn freed_address(&mut self, thread: (u32, u32)) -> Result<u64, String> {
        let delta = self.aligned(Stream::Addresses)?;
        let state = self.state.threads.get_mut(&thread).unwrap();
        let address = state.freed.wrapping_add(delta as u64);
        if address != 0 {
            state.freed = address;
        }
        Ok(address)
    }

    fn allocated(&mut self, thread: (u32, u32), size: u64) -> Result<u64, String> {
        let address = match self.unsigned(Stream::Reuses)? {
            0 if self.state.version_3 => self.address(thread)?,
            0 => self.fresh_address(thread, size)?,
            reuse => {
                let rank = usize::try_from(reuse - 1).map_err(|_| "a rank past the list")?;
                let address = self
                    .state
                    .reused
                    .take_rank(thread, size, rank)
                    .ok_or("an allocation reuses a block the thread did not free")?;
                self.state.threads.get_mut(&thread).unwrap().address = address;
                address
            }
        };
        if address != 0 {
            self.state.reused.allocated(address, size);
            let limit = match self.state.version_3 {
                true => RECENT_ALLOCATIONS,
                false => RECENT_ALLOCATIONS_V4,
            };
            let state = self.state.threads.get_mut(&thread).unwrap();
            state.recent.push_within(address, limit);
        }
        Ok(address)
    }

    fn freed(&mut self, thread: (u32, u32)) -> Result<u64, String> {
        let rank = match self.unsigned(Stream::References)? {
            0 => {
                let address = match self.state.version_3 {
                    true => self.address(thread)?,
                    false => self.freed_address(thread)?,
                };
                if address != 0 {
                    self.state.reused.freed(thread, address);
                }
                return Ok(address);
            }
            reference => usize::try_from(reference - 1).map_err(|_| "a rank past the list")?,
        };
        let state = self.state.threads.get_mut(&thread).unwrap();
        let address = state
            .recent
            .take_rank(rank)
            .ok_or("a free of a recent allocation the thread did not make")?;
        state.address = address;
        self.state.reused.freed(thread, address);
        Ok(address)
    }

    /// The allocator function and size of a call at `stack`.
    fn call(&mut self, stack: StackId) -> Result<(AllocFunction, u64), String> {
        if self.state.version_3 {
            return Ok((self.function()?, self.size_version_3()?));
        }
        let predicted = self.state.predictions.call(stack);
        let index = match self.byte(Stream::Values)? {
            0 => {
                predicted
                    .ok_or("a call predicted at a stack without one")?
                    .0
            }
            value => value - 1,
        };
        let function = AllocFunction::ALL
            .get(usize::from(index))
            .copied()
            .ok_or_else(|| format!("unknown allocator function {index}"))?;
        let size = match self.unsigned(Stream::Sizes)? {
            0 => {
                predicted
                    .ok_or("a call predicted at a stack without one")?
                    .1
            }
            1 => {
                let size = self.unsigned(Stream::Sizes)?;
                self.state.intern_size(size);
                size
            }
            index => self
                .state
                .size_list
                .get(index as usize - 2)
                .copied()
                .ok_or_else(|| format!("size {index} not in the block's table"))?,
        };
        self.state.predictions.called_at(stack, index, size);
        Ok((function, size))
    }

    fn size_version_3(&mut self) -> Result<u64, String> {
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
        if self.state.version_3 {
            return self.stack_version_3(thread);
        }
        let previous = self.state.threads[&thread].stack;
        let stack = match self.unsigned(Stream::Stacks)? {
            rank if rank < RECENT_STACKS as u64 => {
                self.state
                    .predictions
                    .stack_at(rank as usize)
                    .ok_or("a stack rank past the block's recent stacks")?
            }
            value => {
                let stack = i64::from(previous)
                    .checked_add(unzigzag(value - RECENT_STACKS as u64))
                    .and_then(|stack| StackId::try_from(stack).ok())
                    .ok_or("a stack id out of range")?;
                self.state.predictions.new_stack(stack);
                stack
            }
        };
        self.state.threads.get_mut(&thread).unwrap().stack = stack;
        Ok(stack)
    }

    fn stack_version_3(&mut self, thread: (u32, u32)) -> Result<StackId, String> {
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
