//! The record encoding of a version-3 block, before compression.
//!
//! A block's records are split into streams by kind of value, because each stream compresses
//! far better alone than interleaved: the tags (one byte per record), the process and thread
//! ids, times, addresses, sizes, stack ids, stack nodes, symbols, other numbers, and the rare
//! records in bincode. Times (in whole microseconds, the nanoseconds past them apart) are
//! stored as differences from the same thread's previous one; a freed or allocated address as
//! its rank among the thread's recent allocations or frees when it is one of them (`recent`),
//! else (format 4) in units of 16 against the thread's previous free, or against where its
//! previous fresh chunk ended; a stack as its rank among the block's recent stacks, else as a
//! difference; the allocator function and size as "the stack's last ones" when they are
//! (`predict`), else by the block's table of sizes; a symbol's strings by index after their
//! first time (`symbol_codec`). All of that state starts empty in every block, so a block
//! decodes without any block before it. Blocks of format 3 (addresses, stacks and sizes
//! without those predictions, 32 recent allocations) are still decoded by their rules.
//!
//! `block_decoder.rs` walks the streams back into records.
//!
//! Inflated layout: for each stream in `Stream` order its length (varint), then the streams.

use bincode::Options;

use crate::events::heap::IntegerMap;
use crate::trace::format::Record;
use crate::trace::predict::{fresh_after, Predictions, RECENT_STACKS};
use crate::trace::recent::{RecentAllocations, ReusedBlocks, RECENT_ALLOCATIONS_V4};
use crate::trace::stacks::StackId;
use crate::trace::symbol_codec::StringTable;
use crate::trace::varint::{put_aligned, put_signed, put_unsigned, zigzag};

/// Distinct threads one block may hold; the writer starts a new block before passing it.
pub const MAX_BLOCK_THREADS: usize = 4096;
/// Stack node addresses one block remembers.
const MAX_BLOCK_NODES: usize = 65536;
/// Distinct sizes one block interns; later new sizes are stored whole.
const MAX_BLOCK_SIZES: usize = 4096;

/// The streams of a block, in the order they are laid out.
#[derive(Clone, Copy)]
pub(super) enum Stream {
    Tags,
    Threads,
    /// Whole microseconds since the thread's previous record.
    Times,
    /// The nanoseconds past the microsecond, for the times that have any.
    Fractions,
    /// Differences of addresses not given by a rank (format 4: `varint::put_aligned`).
    Addresses,
    /// What a free releases: 1 + the rank of one of the thread's recent allocations, or 0
    /// when its address follows in `Addresses`.
    References,
    /// What an allocation reuses: 1 + the rank of a block of its rounded size the thread
    /// freed lately, or 0 when its address follows in `Addresses`.
    Reuses,
    /// Format 4: 0 for the stack's last size, 1 and a size, or 2 + its index in the table.
    Sizes,
    /// Format 4: the rank of a recent stack, or `RECENT_STACKS` + a zigzag difference.
    Stacks,
    /// A stack node's id and its parent's, as differences.
    NodeLinks,
    NodeAddresses,
    /// Allocator functions (format 4: 0 for the stack's last one, else 1 + its index) and
    /// the differences of status samples.
    Values,
    /// Numbers of symbol records: address differences, offsets, their frames' counts,
    /// flags, lines and columns.
    Symbols,
    /// 1 + the index of a string in the block's table, or 0 when it follows in `Strings`.
    StringRefs,
    /// Each new string of the block: its length, then its bytes.
    Strings,
    Other,
}
pub const STREAMS: usize = 16;
/// The streams' names, in `Stream` order, for measurements.
pub const STREAM_NAMES: [&str; STREAMS] = [
    "tags",
    "threads",
    "times",
    "fractions",
    "addresses",
    "references",
    "reuses",
    "sizes",
    "stacks",
    "node links",
    "node addrs",
    "values",
    "symbols",
    "string refs",
    "strings",
    "other",
];

/// Kinds of record in the tag byte's low bits; everything else goes to bincode.
pub(super) const KIND_OTHER: u8 = 0;
pub(super) const KIND_ALLOC: u8 = 1;
pub(super) const KIND_FREE: u8 = 2;
pub(super) const KIND_REALLOC: u8 = 3;
pub(super) const KIND_STACK_NODE: u8 = 4;
pub(super) const KIND_STATUS: u8 = 5;
pub(super) const KIND_SYMBOL: u8 = 6;
pub(super) const KIND_MASK: u8 = 0x1f;
/// Set when the record's process and thread are the previous record's.
pub(super) const SAME_THREAD: u8 = 0x80;
/// Set when the record's time is not a whole microsecond: the rest is in `Fractions`.
pub(super) const TIME_FRACTION: u8 = 0x40;
/// Nanoseconds in the unit of `Times`.
pub(super) const TIME_UNIT_NS: u64 = 1000;

/// The thread key of status samples: they come from the sampler, in their own time order.
pub(super) const SAMPLER_THREAD: u32 = u32::MAX;

/// What the previous record of one thread left, to difference the next one against.
#[derive(Default, Clone, Copy)]
pub(super) struct ThreadState {
    pub(super) time_ns: u64,
    /// Version 3: the base of every address stored whole.
    pub(super) address: u64,
    /// Version 4: where the next fresh allocation is expected, and the base of a free stored
    /// by address (the previous one).
    pub(super) fresh: u64,
    pub(super) freed: u64,
    pub(super) stack: StackId,
    pub(super) recent: RecentAllocations<RECENT_ALLOCATIONS_V4>,
    /// For status samples: rss, anon, file, shmem, swap of the previous sample.
    pub(super) values: [u64; 5],
}

/// The state both sides keep while walking a block, identical on each side.
#[derive(Default)]
pub(super) struct BlockState {
    pub(super) threads: IntegerMap<(u32, u32), ThreadState>,
    pub(super) sizes: IntegerMap<u64, u32>,
    pub(super) size_list: Vec<u64>,
    pub(super) previous_thread: Option<(u32, u32)>,
    pub(super) previous_node: (StackId, u64),
    /// Addresses of the block's stack nodes by id (bounded): a node's address is stored as
    /// the difference from its parent's, which is often in the same function or module.
    pub(super) node_addresses: IntegerMap<StackId, u64>,
    pub(super) reused: ReusedBlocks,
    pub(super) strings: StringTable,
    pub(super) predictions: Predictions,
    /// A block of format version 3, decoded by its rules (the encoder writes the current one).
    pub(super) version_3: bool,
}

impl BlockState {
    /// The address a stack node's is differenced against: its parent's if the block holds
    /// it, else the previous node's.
    pub(super) fn node_base(&self, parent: StackId) -> u64 {
        match self.node_addresses.get(&parent) {
            Some(&address) => address,
            None => self.previous_node.1,
        }
    }

    pub(super) fn remember_node(&mut self, id: StackId, address: u64) {
        self.previous_node = (id, address);
        if self.node_addresses.len() < MAX_BLOCK_NODES {
            self.node_addresses.insert(id, address);
        }
    }

    pub(super) fn intern_size(&mut self, size: u64) {
        if self.size_list.len() < MAX_BLOCK_SIZES && !self.sizes.contains_key(&size) {
            self.sizes.insert(size, self.size_list.len() as u32);
            self.size_list.push(size);
        }
    }
}

/// The parts of an inflated block worth compressing apart: the stream table with the first
/// stream, then each stream of at least `MIN_PART_BYTES` with the small ones after it. A
/// block whose table does not parse is one part.
pub fn stream_parts(inflated: &[u8]) -> Vec<&[u8]> {
    let mut table = crate::trace::varint::Cursor::new(inflated);
    let mut lengths = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        match table
            .unsigned()
            .ok()
            .and_then(|length| usize::try_from(length).ok())
        {
            Some(length) => lengths.push(length),
            None => return vec![inflated],
        }
    }
    let mut parts = Vec::new();
    let (mut start, mut end) = (0, table.position());
    for length in lengths {
        if end - start >= MIN_PART_BYTES {
            parts.push(&inflated[start..end]);
            start = end;
        }
        end = end.saturating_add(length).min(inflated.len());
    }
    if start < inflated.len() || parts.is_empty() {
        parts.push(&inflated[start..]);
    }
    parts
}

/// Streams shorter than this share a compressed block with the next: a block's own entropy
/// tables cost more than they save on a few bytes.
const MIN_PART_BYTES: usize = 256;

/// Builds one block's streams record by record.
#[derive(Default)]
pub struct BlockEncoder {
    streams: [Vec<u8>; STREAMS],
    pub(super) state: BlockState,
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

    /// The streams so far, in `STREAM_NAMES` order: what each kind of value costs.
    pub fn streams(&self) -> [&[u8]; STREAMS] {
        std::array::from_fn(|index| self.streams[index].as_slice())
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
                self.put_stack(thread, stack);
                self.put_call(stack, function as u8, size);
                self.put_allocated(thread, address, size);
            }
            Record::Free {
                time_ns,
                pid,
                tid,
                address,
            } => {
                let thread = self.begin(KIND_FREE, pid, tid, time_ns);
                self.put_freed(thread, address);
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
                self.put_stack(thread, stack);
                self.put_call(stack, function as u8, size);
                self.put_freed(thread, old_address);
                self.put_allocated(thread, new_address, size);
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
            Record::Symbol { .. } => self.push_symbol(record),
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

    pub(super) fn stream(&mut self, stream: Stream) -> &mut Vec<u8> {
        &mut self.streams[stream as usize]
    }

    pub(super) fn put_byte(&mut self, stream: Stream, byte: u8) {
        self.stream(stream).push(byte);
    }

    /// Writes the tag, the thread (unless it is the previous record's) and the time.
    fn begin(&mut self, kind: u8, pid: u32, tid: u32, time_ns: u64) -> (u32, u32) {
        let thread = (pid, tid);
        let fraction = time_ns % TIME_UNIT_NS;
        let mut tag = kind;
        if fraction != 0 {
            tag |= TIME_FRACTION;
            put_unsigned(self.stream(Stream::Fractions), fraction);
        }
        if self.state.previous_thread == Some(thread) {
            tag |= SAME_THREAD;
        } else {
            put_unsigned(self.stream(Stream::Threads), pid.into());
            put_unsigned(self.stream(Stream::Threads), tid.into());
            self.state.previous_thread = Some(thread);
        }
        self.put_byte(Stream::Tags, tag);
        let state = self.state.threads.entry(thread).or_default();
        let units = time_ns / TIME_UNIT_NS;
        let delta = units.wrapping_sub(state.time_ns / TIME_UNIT_NS) as i64;
        state.time_ns = time_ns;
        put_signed(self.stream(Stream::Times), delta);
        thread
    }

    /// An allocated address: a lately freed block's rank, or the address itself.
    fn put_allocated(&mut self, thread: (u32, u32), address: u64, size: u64) {
        match self.state.reused.take_address(thread, size, address) {
            Some(rank) => put_unsigned(self.stream(Stream::Reuses), rank as u64 + 1),
            None => {
                put_unsigned(self.stream(Stream::Reuses), 0);
                let state = self.state.threads.get_mut(&thread).unwrap();
                let delta = address.wrapping_sub(state.fresh) as i64;
                if address != 0 {
                    state.fresh = fresh_after(address, size);
                }
                put_aligned(self.stream(Stream::Addresses), delta);
            }
        }
        if address != 0 {
            self.state.reused.allocated(address, size);
            let state = self.state.threads.get_mut(&thread).unwrap();
            state.recent.push(address);
        }
    }

    /// A freed address: a recent allocation's rank, or the address itself.
    fn put_freed(&mut self, thread: (u32, u32), address: u64) {
        let state = self.state.threads.get_mut(&thread).unwrap();
        let rank = match address {
            0 => None,
            _ => state.recent.take_address(address),
        };
        match rank {
            Some(rank) => put_unsigned(self.stream(Stream::References), rank as u64 + 1),
            None => {
                let delta = address.wrapping_sub(state.freed) as i64;
                if address != 0 {
                    state.freed = address;
                }
                put_unsigned(self.stream(Stream::References), 0);
                put_aligned(self.stream(Stream::Addresses), delta);
            }
        }
        if address != 0 {
            self.state.reused.freed(thread, address);
        }
    }

    /// The function (in `Values`: 0 for the one the stack called last, else 1 + its index)
    /// and the size (0 for the one the stack asked last, else 1 and the size whole, or 2 + its
    /// index in the block's table of sizes).
    fn put_call(&mut self, stack: StackId, function: u8, size: u64) {
        let predicted = self.state.predictions.call(stack);
        self.state.predictions.called_at(stack, function, size);
        match predicted {
            Some((known, _)) if known == function => self.put_byte(Stream::Values, 0),
            _ => self.put_byte(Stream::Values, function + 1),
        }
        if predicted.is_some_and(|(_, known)| known == size) {
            return put_unsigned(self.stream(Stream::Sizes), 0);
        }
        match self.state.sizes.get(&size) {
            Some(&index) => put_unsigned(self.stream(Stream::Sizes), u64::from(index) + 2),
            None => {
                put_unsigned(self.stream(Stream::Sizes), 1);
                put_unsigned(self.stream(Stream::Sizes), size);
                self.state.intern_size(size);
            }
        }
    }

    /// The stack's rank among the block's recent stacks, else `RECENT_STACKS` + the zigzag
    /// difference from the thread's previous one.
    fn put_stack(&mut self, thread: (u32, u32), stack: StackId) {
        let state = self.state.threads.get_mut(&thread).unwrap();
        let previous = state.stack;
        state.stack = stack;
        let value = match self.state.predictions.stack_rank(stack) {
            Some(rank) => rank as u64,
            None => zigzag(i64::from(stack) - i64::from(previous)) + RECENT_STACKS as u64,
        };
        put_unsigned(self.stream(Stream::Stacks), value);
    }

    fn push_stack_node(&mut self, pid: u32, id: StackId, parent: StackId, address: u64) {
        self.put_byte(Stream::Tags, KIND_STACK_NODE);
        put_unsigned(self.stream(Stream::Threads), pid.into());
        let previous_id = self.state.previous_node.0;
        put_signed(
            self.stream(Stream::NodeLinks),
            i64::from(id) - i64::from(previous_id),
        );
        put_signed(
            self.stream(Stream::NodeLinks),
            i64::from(id) - i64::from(parent),
        );
        let delta = address.wrapping_sub(self.state.node_base(parent)) as i64;
        put_signed(self.stream(Stream::NodeAddresses), delta);
        self.state.remember_node(id, address);
        // A stack node names no thread: the next record writes its own.
        self.state.previous_thread = None;
    }
}
