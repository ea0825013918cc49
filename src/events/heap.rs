//! The one heap model: the live blocks of one process image and the rules by which allocator
//! calls change them, and the rule by which an exec ends an image. The recorder's peak
//! watcher, the report's replay and its component tracker all consume its outcomes, so they
//! cannot disagree on what a call did.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::trace::format::{AllocFunction, Record};
use crate::trace::stacks::{StackId, EMPTY_STACK};

/// An allocator call, as its result tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapCall {
    /// malloc, calloc, memalign and friends: `size` is the whole request (nmemb*size for
    /// calloc), `address` the result (0 when the allocator returned NULL).
    Alloc { address: u64, size: u64 },
    /// free(address); free(NULL) has address 0.
    Free { address: u64 },
    /// realloc / reallocarray from `old_address` (0: acts as malloc) to `new_address`.
    Realloc {
        old_address: u64,
        new_address: u64,
        size: u64,
    },
}

/// An allocator call of one image, when it happened and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapEvent {
    pub time_ns: u64,
    /// The allocator call's stack (frees carry none: `EMPTY_STACK`).
    pub stack: StackId,
    pub call: HeapCall,
}

/// A live block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub stack: StackId,
    pub time_ns: u64,
    /// Number of the image's event that created it (events are numbered from 0).
    pub sequence: u64,
}

/// What one allocator call did to the live blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Number of this event in the image.
    pub sequence: u64,
    /// The known block a free or a realloc released.
    pub released: Option<Block>,
    /// A block still thought live at the address the allocator handed out again: its free
    /// was missed, so it leaves with no known lifetime.
    pub replaced: Option<Block>,
    /// The block the call created (a realloc's new block included).
    pub created: Option<Block>,
    /// free(NULL).
    pub null_free: bool,
    /// A free (or a realloc's old pointer) of an address that was not live: allocated
    /// before attach, inherited, or never seen.
    pub unknown_free: Option<u64>,
    /// The allocator returned NULL for a non-zero request (a failed realloc keeps its block).
    pub failed: bool,
}

#[derive(Debug, Clone, Copy)]
struct LiveBlock {
    size: u64,
    stack: StackId,
    time_ns: u64,
    sequence: u64,
}

impl LiveBlock {
    fn at(self, address: u64) -> Block {
        Block {
            address,
            size: self.size,
            stack: self.stack,
            time_ns: self.time_ns,
            sequence: self.sequence,
        }
    }
}

/// The live blocks of one process image.
#[derive(Debug, Default)]
pub struct LiveHeap {
    live: IntegerMap<u64, LiveBlock>,
    live_bytes: u64,
    events: u64,
}

impl LiveHeap {
    /// Applies one call. A successful realloc releases the old block and creates the new one
    /// (in place or moved); NULL with size 0 only frees; NULL with a size fails and keeps the
    /// old block. An allocation of size 0 that returns NULL is no failure.
    pub fn apply(&mut self, event: HeapEvent) -> Outcome {
        let mut outcome = Outcome {
            sequence: self.events,
            ..Outcome::default()
        };
        self.events += 1;
        match event.call {
            HeapCall::Alloc { address, size } => {
                if address != 0 {
                    self.create(&mut outcome, address, size, event);
                } else {
                    outcome.failed = size > 0;
                }
            }
            HeapCall::Free { address } => {
                if address == 0 {
                    outcome.null_free = true;
                } else {
                    self.release(&mut outcome, address);
                }
            }
            HeapCall::Realloc {
                old_address,
                new_address,
                size,
            } => {
                let succeeded = new_address != 0;
                if (succeeded || size == 0) && old_address != 0 {
                    self.release(&mut outcome, old_address);
                }
                if succeeded {
                    self.create(&mut outcome, new_address, size, event);
                } else {
                    outcome.failed = size > 0;
                }
            }
        }
        outcome
    }

    /// Sum of the requested sizes of the live blocks.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    pub fn live_blocks(&self) -> u64 {
        self.live.len() as u64
    }

    /// The live blocks, in no particular order.
    pub fn blocks(&self) -> impl Iterator<Item = Block> + '_ {
        self.live.iter().map(|(&address, block)| block.at(address))
    }

    /// Empties the heap (the image ended); returns the bytes that were live.
    pub fn clear(&mut self) -> u64 {
        self.live.clear();
        std::mem::take(&mut self.live_bytes)
    }

    fn release(&mut self, outcome: &mut Outcome, address: u64) {
        match self.take(address) {
            Some(block) => outcome.released = Some(block),
            None => outcome.unknown_free = Some(address),
        }
    }

    fn create(&mut self, outcome: &mut Outcome, address: u64, size: u64, event: HeapEvent) {
        outcome.replaced = self.take(address);
        let block = LiveBlock {
            size,
            stack: event.stack,
            time_ns: event.time_ns,
            sequence: outcome.sequence,
        };
        self.live.insert(address, block);
        self.live_bytes += size;
        outcome.created = Some(block.at(address));
    }

    fn take(&mut self, address: u64) -> Option<Block> {
        let block = self.live.remove(&address)?;
        self.live_bytes -= block.size;
        Some(block.at(address))
    }
}

/// What an exec does to the image it happens in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecEffect {
    /// The first exec of an image that has had no allocator or mapping event (a launched
    /// child, or a forked one that has not allocated yet) only names the image.
    Names,
    /// Any other exec ends the image; the same PID carries on in a new one.
    StartsImage,
}

/// Where a process image stands in its life, for the one rule of when an exec starts a new
/// image. Both sides of the rule see an empty heap after the exec: an image with no events
/// has no blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageLifecycle {
    had_exec: bool,
    had_events: bool,
}

impl ImageLifecycle {
    /// An allocator or mapping event happened in the image.
    pub fn event(&mut self) {
        self.had_events = true;
    }

    /// The image's process called exec; afterwards the lifecycle is the new program's.
    pub fn exec(&mut self) -> ExecEffect {
        let effect = if self.had_exec || self.had_events {
            ExecEffect::StartsImage
        } else {
            ExecEffect::Names
        };
        *self = ImageLifecycle {
            had_exec: true,
            had_events: false,
        };
        effect
    }

    /// The image's program came from an exec (it is not the one it started with).
    pub fn had_exec(&self) -> bool {
        self.had_exec
    }
}

/// A hash map keyed by addresses, PIDs or ids: hashed by one multiplication, several times
/// faster than the default SipHash, which guards against keys chosen by an attacker (these
/// come from memsup's own recordings).
pub type IntegerMap<K, V> = HashMap<K, V, BuildHasherDefault<IntegerHasher>>;

/// A set of such keys, hashed the same way.
pub type IntegerSet<K> = HashSet<K, BuildHasherDefault<IntegerHasher>>;

/// Fibonacci hashing, rotated so that the bits that vary in aligned addresses reach the low
/// bits the table indexes by.
#[derive(Debug, Default, Clone, Copy)]
pub struct IntegerHasher(u64);

impl Hasher for IntegerHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }

    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
}

/// The PID, function and model event of a heap record.
pub fn heap_event(record: &Record) -> Option<(u32, AllocFunction, HeapEvent)> {
    let (time_ns, pid, function, stack, call) = match *record {
        Record::Alloc {
            time_ns,
            pid,
            function,
            address,
            size,
            stack,
            ..
        } => (
            time_ns,
            pid,
            function,
            stack,
            HeapCall::Alloc { address, size },
        ),
        Record::Free {
            time_ns,
            pid,
            address,
            ..
        } => {
            let call = HeapCall::Free { address };
            (time_ns, pid, AllocFunction::Free, EMPTY_STACK, call)
        }
        Record::Realloc {
            time_ns,
            pid,
            function,
            old_address,
            new_address,
            size,
            stack,
            ..
        } => {
            let call = HeapCall::Realloc {
                old_address,
                new_address,
                size,
            };
            (time_ns, pid, function, stack, call)
        }
        _ => return None,
    };
    let event = HeapEvent {
        time_ns,
        stack,
        call,
    };
    Some((pid, function, event))
}

#[cfg(test)]
mod tests;
