//! The memory shared between injected hooks and memsup, byte by byte: the contract between
//! the machine code `code` assembles (the producer, inside the target) and the drain (the
//! consumer, in memsup). Both sides take every offset from here.
//!
//! One *area* per process image: a memfd mapped `MAP_SHARED` in the target and in memsup,
//! made of a header page and `ring_count` rings. A ring is a header (the producers' claim
//! counter and the consumer's position, each on its own cache line) and `capacity` fixed-size
//! records. A producer picks its ring by CPU (per-CPU rings keep claims on a mostly local
//! line), claims index `i` with a compare-and-swap on `head` only when `i - tail < capacity`
//! (so a claim never waits on a slot it cannot write), writes the record at `i % capacity`
//! and publishes it by storing `seq = i + 1` last. x86-TSO keeps the stores in order.

/// `MEMSUPHK`, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"MEMSUPHK");
pub const VERSION: u32 = 4;

/// Bytes of the area header (one page).
pub const AREA_HEADER_BYTES: u64 = 4096;

/// Area header fields (byte offsets; u64 unless stated).
pub mod header {
    pub const MAGIC: u64 = 0;
    /// u32 `VERSION`.
    pub const VERSION: u64 = 8;
    /// u32: number of rings, a power of two.
    pub const RING_COUNT: u64 = 12;
    /// Records per ring, a power of two.
    pub const CAPACITY: u64 = 16;
    /// u32: 1 while hooks record; 0 makes every hook pass straight through to the
    /// allocator. memsup clears it at detach; a producer clears it when nobody drains, and
    /// memsup's heartbeat sets it again if memsup was only slow.
    pub const ENABLED: u64 = 24;
    /// u32: what a producer does when its ring is full: `POLICY_WAIT` or `POLICY_DROP`.
    pub const POLICY: u64 = 28;
    /// TSC of the drain's last pass, written by memsup on every pass, busy or idle.
    pub const HEARTBEAT: u64 = 32;
    /// TSC ticks without a heartbeat after which a producer that finds its ring full
    /// decides memsup is gone: it clears `ENABLED` and drops its record.
    pub const STALE_TICKS: u64 = 40;
    /// TSC ticks a producer waits for room (policy wait) before it drops its record and
    /// counts it: the bound that makes a wait never a deadlock.
    pub const WAIT_LIMIT_TICKS: u64 = 48;
    /// Records dropped by producers (atomic increments).
    pub const DROPPED: u64 = 56;
    /// Times a producer found its ring full (atomic increments).
    pub const FULL_WAITS: u64 = 64;
    /// Rendezvous tickets taken: the dynamic linker's rendezvous hook takes the next one
    /// (atomic fetch-and-add) and waits until `RENDEZVOUS_DONE` passes it.
    pub const RENDEZVOUS_ASKED: u64 = 72;
    /// Tickets memsup has served: every module mapped when it read `RENDEZVOUS_ASKED` is
    /// probed or hooked. Written by memsup only, with every thread of the process stopped.
    pub const RENDEZVOUS_DONE: u64 = 80;
    /// u32: 1 while hooks walk call stacks (full stacks); 0 records the caller only.
    pub const STACKS: u64 = 88;
    /// The target address of the current module directory (`stacks::DIRECTORY_*`), 0 for
    /// none. memsup writes a new directory and then swaps this pointer; old ones stay.
    pub const DIRECTORY: u64 = 96;
    /// Bytes of the stack store claimed so far (atomic fetch-and-add by the hooks).
    pub const STORE_USED: u64 = 104;
    /// Walks whose frames did not fit in the store (atomic increments).
    pub const STACKS_LOST: u64 = 112;
    /// The target address of the current thread stack list (`stacks::STACK_LIST_*`), 0 for
    /// none; swapped like `DIRECTORY`.
    pub const THREAD_STACKS: u64 = 120;
    /// Byte offsets from the area's start of the stack section's known-stack set and store
    /// (`stacks::Section`), written by memsup before hooks run.
    pub const KNOWN_OFFSET: u64 = 128;
    pub const STORE_OFFSET: u64 = 136;
    /// Byte offset of the rule cache (`stacks::CACHE_*`); memsup clears it whenever it
    /// publishes a directory, with every thread stopped.
    pub const CACHE_OFFSET: u64 = 144;
    /// A `struct timespec` (seconds, nanoseconds): the longest a producer sleeps on a full
    /// ring before it looks at the heartbeat and its wait limit again.
    pub const SLEEP_TIMESPEC: u64 = 152;
    /// u32: a record is timed when its ring's head at entry, scrambled, has none of these
    /// bits set (`SAMPLE_BITS`; `code_record::sampled_head`).
    pub const SAMPLE_MASK: u64 = 168;
    /// Byte offset of the MPI section (`mpi`) from the area's start, 0 for none: MPI hooks
    /// then write a record at entry and at return.
    pub const MPI_OFFSET: u64 = 176;
    /// u32: 1 once memsup switched the hooks off for good (a detach, an earlier memsup's
    /// leftovers), written before `ENABLED`: its heartbeat switches hooks back on only
    /// where they switched themselves off. No hook reads it.
    pub const OFF_BY_MEMSUP: u64 = 184;
    /// Byte offset of the walk memories (`stacks::MEMORY_*`), written by memsup before
    /// hooks run.
    pub const MEMORY_OFFSET: u64 = 192;
    /// Bytes of the stack store (`stacks::Section::store_bytes`), written by memsup before
    /// hooks run: a walk whose frames would end past it is lost.
    pub const STORE_SIZE: u64 = 200;
    /// Counters the hooks add to now and then, on a cache line of their own (every hook
    /// reads the lines above): times a producer slept on a full ring, and the timed calls
    /// that did not wait for room with the TSC ticks they spent in the record routine (the
    /// walk, the claim and the record's write; not the ring's choice before them). Atomic
    /// additions.
    pub const FULL_SLEEPS: u64 = 256;
    pub const TIMED_CALLS: u64 = 264;
    pub const TIMED_TICKS: u64 = 272;
    /// u32: 1 once a thread has taken an MPI slot (`mpi`): from then on every record looks
    /// at its thread's slot, to mark a call pending there as one inside which something was
    /// recorded. A line of its own: every record reads it.
    pub const MPI_TAKEN: u64 = 320;
    /// A bit per MPI slot that a thread has taken (`mpi::SLOTS` bits), set once by the
    /// thread with a locked bit-test-and-set: the slots memsup reads.
    pub const MPI_OWNED: u64 = 328;
}

/// `header::SAMPLE_MASK` by default: all eight bits of the scrambled head, so about one
/// record in 256 is timed.
pub const SAMPLE_BITS: u32 = 0xff;

pub const POLICY_WAIT: u32 = 0;
pub const POLICY_DROP: u32 = 1;

/// Bytes of a ring's header: `head` and `tail` on separate cache lines.
pub const RING_HEADER_BYTES: u64 = 128;
/// Ring header fields (byte offsets from the ring's start).
pub mod ring {
    /// Next index to claim (producers, compare-and-swap).
    pub const HEAD: u64 = 0;
    /// Next index the drain reads (memsup; producers read it to see room).
    pub const TAIL: u64 = 64;
    /// u32: producers sleeping, or about to, for room in this ring (each adds itself with
    /// a locked increment and takes itself off after; memsup only reads it).
    pub const WAITERS: u64 = 72;
    /// u32: the word waiting producers sleep on (a shared futex): memsup bumps it and wakes
    /// them after it moves `TAIL` with `WAITERS` nonzero, and when it switches the hooks off.
    pub const WAKE: u64 = 76;
}

/// Bytes of one record: two cache lines.
pub const RECORD_BYTES: u64 = 128;
/// Record fields (byte offsets from the record's start; u64 unless stated).
pub mod record {
    /// `index + 1`, stored last: the record is published once `seq` equals it.
    pub const SEQ: u64 = 0;
    /// u32: an `Op` code.
    pub const OP: u64 = 8;
    /// Set in the operation a hook passes to the record routine: write the record but
    /// leave it unpublished, for the hook to publish after the call (`HookShape::Around`).
    pub const HOLD: u32 = 1 << 31;
    /// u32: the ring the producer chose (its CPU, masked) in the low 8 bits, for
    /// diagnostics; above them the walk's rule-cache misses and, from bit 20, its rule
    /// lookups (at most 2 × 256 each: two passes of at most 256 frames).
    pub const CPU: u64 = 12;
    pub const CPU_MISSES_SHIFT: u32 = 8;
    pub const CPU_LOOKUPS_SHIFT: u32 = 20;
    /// `rdtsc` when the event happened: before the call for a free, munmap and shmdt,
    /// after it returned for everything else.
    pub const TSC: u64 = 16;
    /// The thread's self pointer (`fs:[0]`, glibc and musl alike): which thread.
    pub const THREAD: u64 = 24;
    /// The return address at the function's entry: the caller.
    pub const CALLER: u64 = 32;
    /// rsp at the function's entry (it points at the return address).
    pub const STACK_POINTER: u64 = 40;
    /// rax after the call returned (0 for a free), written before `SEQ` by `Around` hooks.
    pub const RESULT: u64 = 48;
    /// The six integer arguments at entry: rdi, rsi, rdx, rcx, r8, r9 (6 × u64).
    pub const ARGUMENTS: u64 = 56;
    /// For `posix_memalign`: the pointer stored through its first argument when it returned
    /// 0, else 0. For `MpiEntry` and `MpiReturn`: the MPI function's number (`Hook`).
    /// Unused by other operations.
    pub const OUT: u64 = 104;
    /// `rdtsc` at an MPI call's entry, in the return record of a call kept in its slot (0
    /// in the others).
    pub const ENTRY_TSC: u64 = 112;
    /// The walked call stack (`stacks::StackRef`), 0 when none was walked.
    pub const STACK: u64 = 120;
}

/// What a record reports: the function whose hook wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Op {
    Malloc = 1,
    Calloc = 2,
    Realloc = 3,
    Reallocarray = 4,
    Free = 5,
    PosixMemalign = 6,
    AlignedAlloc = 7,
    Memalign = 8,
    Valloc = 9,
    Pvalloc = 10,
    Mmap = 11,
    Munmap = 12,
    Mremap = 13,
    Brk = 14,
    Shmat = 15,
    Shmdt = 16,
    /// The dynamic linker's rendezvous: writes no record (see `HookShape::Rendezvous`).
    Rendezvous = 17,
    /// A thread entered an MPI function (the hook of every MPI entry point).
    MpiEntry = 18,
    /// A thread left an MPI function: the second record of its hook, never a hook's own op.
    MpiReturn = 19,
}

impl Op {
    /// Every operation; the rendezvous last (it is the one hook that records nothing).
    pub const ALL: [Op; 19] = [
        Op::Malloc,
        Op::Calloc,
        Op::Realloc,
        Op::Reallocarray,
        Op::Free,
        Op::PosixMemalign,
        Op::AlignedAlloc,
        Op::Memalign,
        Op::Valloc,
        Op::Pvalloc,
        Op::Mmap,
        Op::Munmap,
        Op::Mremap,
        Op::Brk,
        Op::Shmat,
        Op::Shmdt,
        Op::MpiEntry,
        Op::MpiReturn,
        Op::Rendezvous,
    ];

    pub fn from_code(code: u32) -> Option<Op> {
        Op::ALL.into_iter().find(|op| *op as u32 == code)
    }

    /// How its hook is shaped.
    pub fn shape(self) -> HookShape {
        match self {
            Op::Free => HookShape::Before,
            Op::PosixMemalign => HookShape::AfterWithOutPointer,
            Op::Munmap | Op::Shmdt => HookShape::Around,
            Op::Rendezvous => HookShape::Rendezvous,
            Op::MpiEntry | Op::MpiReturn => HookShape::Mpi,
            _ => HookShape::After,
        }
    }

    /// Whether the record routine walks the caller's stack for this operation: not for a
    /// free (its block's stack is its allocation's) nor for MPI calls (their allocations
    /// carry the stacks).
    pub fn walks_stack(self) -> bool {
        !matches!(self, Op::Free | Op::MpiEntry | Op::MpiReturn)
    }
}

/// One hook to assemble: its operation and, for an MPI entry point (`Op::MpiEntry`), the
/// number of its function, which both its records carry in `record::OUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hook {
    pub op: Op,
    pub function: u32,
}

impl From<Op> for Hook {
    fn from(op: Op) -> Hook {
        Hook { op, function: 0 }
    }
}

/// How a hook wraps its function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookShape {
    /// Records at entry, then continues into the function (free: the record must be
    /// published before the block can be reused by another thread).
    Before,
    /// Calls the function, then records with its result (the pointer is known only then).
    After,
    /// As `After`, and also reads the pointer the function stored through its first
    /// argument (posix_memalign).
    AfterWithOutPointer,
    /// Claims its slot and writes the record at entry (TSC and all), calls the function,
    /// then writes the result and publishes (munmap, shmdt: a range is released inside the
    /// call, and another thread may map it again before it returns, so the release must be
    /// ordered by its entry). The drain holds back every younger record of the ring, and of
    /// the others, while the slot is unpublished: a system call's time at most. A record
    /// dropped at entry (`--ring-full drop`) stays dropped.
    Around,
    /// The dynamic linker's rendezvous (a library was mapped or is going): takes a ticket in
    /// `RENDEZVOUS_ASKED` and waits, spinning then yielding, until memsup has served it in
    /// `RENDEZVOUS_DONE`, so a new library's entries are hooked before its code runs. It
    /// stops waiting when `ENABLED` is cleared, when the heartbeat is stale (clearing
    /// `ENABLED`) or after `WAIT_LIMIT_TICKS`. No record, no TLS: it runs before the dynamic
    /// linker has set up the thread pointer.
    Rendezvous,
    /// An MPI entry point: publishes `MpiEntry` at entry (so that what the call allocates
    /// comes after it), calls the function with a copy of the caller's stack arguments
    /// (MPI functions take up to 13 arguments) and publishes `MpiReturn` after.
    Mpi,
}

/// Bytes of an area's header and rings, which every hook touches: mapped populated.
pub fn rings_end(ring_count: u64, capacity: u64) -> u64 {
    AREA_HEADER_BYTES + ring_count * ring_bytes(capacity)
}

/// How large an area's parts are: `ring_count` rings of `capacity` records, then the stack
/// section (`stacks`) with its sparse table and store regions, then the MPI section (`mpi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub ring_count: u64,
    pub capacity: u64,
    pub table_bytes: u64,
    pub store_bytes: u64,
}

impl Shape {
    /// The rings with the table and store regions at their most (`stacks::TABLE_BYTES`,
    /// `stacks::STORE_BYTES`).
    pub fn full(ring_count: u64, capacity: u64) -> Shape {
        Shape {
            ring_count,
            capacity,
            table_bytes: stacks::TABLE_BYTES,
            store_bytes: stacks::STORE_BYTES,
        }
    }

    pub fn rings_end(&self) -> u64 {
        rings_end(self.ring_count, self.capacity)
    }

    pub fn section(&self) -> stacks::Section {
        stacks::Section::after(self.rings_end(), self.table_bytes, self.store_bytes)
    }

    /// Byte offset of the MPI section.
    pub fn mpi_offset(&self) -> u64 {
        self.section().end()
    }

    /// Bytes of the whole area, most of it never touched.
    pub fn bytes(&self) -> u64 {
        self.mpi_offset() + mpi::SECTION_BYTES
    }

    /// Bytes of every part but the table and store regions.
    pub fn fixed_bytes(&self) -> u64 {
        Shape {
            table_bytes: 0,
            store_bytes: 0,
            ..*self
        }
        .bytes()
    }
}

/// Bytes of one ring of `capacity` records, header included.
pub fn ring_bytes(capacity: u64) -> u64 {
    RING_HEADER_BYTES + capacity * RECORD_BYTES
}

/// Byte offset of ring `index` from the area's start.
pub fn ring_offset(index: u64, capacity: u64) -> u64 {
    AREA_HEADER_BYTES + index * ring_bytes(capacity)
}

/// Byte offset of record slot `index` (any claim index; it wraps) from its ring's start.
pub fn record_offset(index: u64, capacity: u64) -> u64 {
    RING_HEADER_BYTES + (index & (capacity - 1)) * RECORD_BYTES
}

/// The stack section of an area, after the rings: what the hooks' stack walker reads
/// (the threads' stacks, the module directory and its tables, written by memsup) and writes
/// (the known-stack set and the stack store). memsup writes tables, directories and stack
/// lists once and never reuses their bytes, so a walker holding an old one reads valid memory.
pub mod stacks {
    /// A thread stack list: u64 count, then `count` (low, high) pairs sorted by low, the
    /// stacks of the image's live threads. A walker reads only within the one holding its rsp.
    pub const STACK_LIST_ENTRIES: u64 = 8;
    pub const STACK_LIST_ENTRY_BYTES: u64 = 16;

    /// Slots of the known-stack set: (hash, `StackRef`), 16 bytes each; the top bits of
    /// the hash pick the first slot.
    pub const KNOWN_BITS: u32 = 16;
    pub const KNOWN_SLOTS: u64 = 1 << KNOWN_BITS;
    pub const KNOWN_SLOT_BYTES: u64 = 16;
    pub const KNOWN_PROBES: u32 = 8;

    /// The rule cache: a direct-mapped cache of table lookups, (lookup address, rule | tag
    /// << 32) per 16-byte slot, the slot chosen by the top bits of the address times
    /// `CACHE_HASH`, the tag its top 32 bits (a slot torn by two writers fails the tag).
    pub const CACHE_BITS: u32 = 14;
    pub const CACHE_SLOTS: u64 = 1 << CACHE_BITS;
    pub const CACHE_SLOT_BYTES: u64 = 16;
    pub const CACHE_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

    /// The walk memories: a slot per thread stack (the top bits of its high bound less 8,
    /// times `CACHE_HASH`, pick the first of `MEMORY_PROBES`; a thread takes a free slot
    /// with a compare-and-swap of its key and keeps it), holding the thread's last complete
    /// walk in one of two buffers. A walk that reaches a frame state (sp, ip, rbp) of the
    /// last one takes the rest of its frames from it once it has read again every stack
    /// word that walk read from there (the rules are the same when the directory is), so
    /// the rest costs no rule lookup. Only the walk holding `MEMORY_BUSY` (taken with
    /// `xchg`) uses a slot: a signal handler's walk on the same thread, or a thread whose
    /// stack memsup has not told apart yet, walks without one.
    pub const MEMORY_BITS: u32 = 8;
    pub const MEMORY_SLOTS: u64 = 1 << MEMORY_BITS;
    pub const MEMORY_PROBES: u32 = 4;
    pub const MEMORY_SLOT_BYTES: u64 = 1 << 15;
    /// Slot fields (u64): the key (0: free), busy, the directory the memory was walked
    /// with, which buffer holds it (0 or 1) and its frames (0: none); then the thread's
    /// recently found stacks, (hash, `StackRef`) in `MEMORY_KNOWN_SLOTS` slots chosen by
    /// the hash's top bits, so that a stack the thread walks again and again costs no
    /// probe of the known-stack set, which is too large to stay in a CPU's caches; then
    /// the two buffers.
    pub const MEMORY_KEY: u64 = 0;
    pub const MEMORY_BUSY: u64 = 8;
    pub const MEMORY_DIRECTORY: u64 = 16;
    pub const MEMORY_CURRENT: u64 = 24;
    pub const MEMORY_FRAMES: u64 = 32;
    pub const MEMORY_KNOWN: u64 = 64;
    pub const MEMORY_KNOWN_BITS: u32 = 6;
    pub const MEMORY_KNOWN_SLOTS: u64 = 1 << MEMORY_KNOWN_BITS;
    pub const MEMORY_BUFFERS: u64 = MEMORY_KNOWN + MEMORY_KNOWN_SLOTS * KNOWN_SLOT_BYTES;
    /// A buffer: an entry per frame, (sp, ip, rbp, the address of the saved rbp read on
    /// the way to it, 0 for none), then the end entry (0, the address of the return
    /// address read as 0 or 0, the saved rbp's address or 0, 0).
    pub const MEMORY_ENTRY_BYTES: u64 = 32;
    pub const MEMORY_BUFFER_BYTES: u64 = (MAX_FRAMES + 1) * MEMORY_ENTRY_BYTES;
    const _: () = assert!(MEMORY_BUFFERS + 2 * MEMORY_BUFFER_BYTES <= MEMORY_SLOT_BYTES);

    /// Bytes reserved for tables and directories at most (sparse: only what is written is
    /// memory; `Shape`).
    pub const TABLE_BYTES: u64 = 256 << 20;
    /// Bytes reserved for stack frames at most (sparse).
    pub const STORE_BYTES: u64 = 256 << 20;

    /// A directory: u64 count, then `count` entries sorted by `ENTRY_START`.
    pub const DIRECTORY_ENTRIES: u64 = 8;
    pub const ENTRY_BYTES: u64 = 64;
    /// Directory entry fields: an executable segment of a module and its module's table.
    pub const ENTRY_START: u64 = 0;
    pub const ENTRY_END: u64 = 8;
    /// Runtime address minus ELF virtual address.
    pub const ENTRY_BIAS: u64 = 16;
    /// Target address of the table's u32 row starts.
    pub const ENTRY_STARTS: u64 = 24;
    /// Target address of the table's u32 rules.
    pub const ENTRY_RULES: u64 = 32;
    pub const ENTRY_ROWS: u64 = 40;
    /// The segment's signal return trampoline, 0 for none.
    pub const ENTRY_SIGRETURN: u64 = 48;

    /// Frames a walk records at most (`unwind::MAX_DEPTH`, and the interrupted instruction
    /// after a signal frame).
    pub const MAX_FRAMES: u64 = crate::unwind::MAX_DEPTH as u64 + 1;
    /// Set in a stored frame: the instruction a signal interrupted (not a return address).
    pub const INTERRUPTED_FRAME: u64 = crate::events::stack::INTERRUPTED_MARK;

    /// Why a walk ended (the low byte of a `StackRef`): `END` is the outermost frame, every
    /// other reason truncates the stack.
    pub const STOP_END: u64 = 0;
    pub const STOP_TRUNCATED: u64 = 1;

    /// Where a walk's frames are: `offset << 24 | frames << 8 | stop`, `offset` in bytes
    /// from the store's start.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct StackRef(pub u64);

    impl StackRef {
        pub fn new(offset: u64, frames: u64, stop: u64) -> StackRef {
            StackRef(offset << 24 | frames << 8 | stop)
        }
        pub fn offset(self) -> u64 {
            self.0 >> 24
        }
        pub fn frames(self) -> u64 {
            (self.0 >> 8) & 0xffff
        }
        pub fn truncated(self) -> bool {
            self.0 & 0xff != STOP_END
        }
    }

    /// Byte offsets of the section's parts from the area's start.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Section {
        pub cache: u64,
        pub known: u64,
        pub memories: u64,
        pub tables: u64,
        pub table_bytes: u64,
        pub store: u64,
        pub store_bytes: u64,
    }

    impl Section {
        /// The section of an area whose rings end at `rings_end` (page-aligned parts), with
        /// `table_bytes` for tables and `store_bytes` for stacks (multiples of 4096).
        pub fn after(rings_end: u64, table_bytes: u64, store_bytes: u64) -> Section {
            let page = |bytes: u64| bytes.div_ceil(4096) * 4096;
            let cache = page(rings_end);
            let known = page(cache + CACHE_SLOTS * CACHE_SLOT_BYTES);
            let memories = page(known + KNOWN_SLOTS * KNOWN_SLOT_BYTES);
            let tables = memories + MEMORY_SLOTS * MEMORY_SLOT_BYTES;
            let store = tables + table_bytes;
            Section {
                cache,
                known,
                memories,
                tables,
                table_bytes,
                store,
                store_bytes,
            }
        }

        pub fn end(&self) -> u64 {
            self.store + self.store_bytes
        }
    }

    /// Multiplier and seed of the stack hash.
    pub const STACK_HASH: u64 = 0xff51_afd7_ed55_8ccd;
    pub const STACK_HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;
}

/// The MPI section: a slot per thread (found by a hash of its thread pointer) where an MPI
/// hook keeps the call it is in instead of writing an entry record, and per slot the calls
/// summed in the hook. A call inside which its thread recorded nothing (every record of a
/// thread with a call in its slot marks the slot `DIRTY`) is added to its slot's counters at
/// return and writes no record at all. Otherwise its return record carries its entry TSC,
/// or memsup has already claimed the pending entry and sent it in its place in time. Slot
/// states: `IDLE` → `ENTERING` (the owner, compare-and-swap at entry, then the fields) →
/// `PENDING` → `IDLE` (the owner at return: summed) or `FLUSHING` (the owner at return:
/// writing its return record with the entry in it, then `IDLE`) or `CLAIMED` (memsup, which
/// sent the entry; the owner writes its return record, then `IDLE`); `RECORDED` while the
/// owner is in a call it records at both ends (a function numbered past `FUNCTIONS`), so
/// that calls inside it record too. Owner and memsup change `PENDING` only by
/// compare-and-swap.
pub mod mpi {
    pub const SLOT_BITS: u32 = 8;
    pub const SLOTS: u64 = 1 << SLOT_BITS;
    pub const SLOT_BYTES: u64 = 1024;
    /// Multiplier of the slot hash: the top `SLOT_BITS` of thread pointer × this.
    pub const SLOT_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

    /// Slot fields (byte offsets from the slot's start; u64 unless stated).
    /// The thread pointer of the thread that took the slot (compare-and-swap from 0); it
    /// keeps it for good. Another thread that hashes here records as without slots.
    pub const OWNER: u64 = 0;
    /// u32: `IDLE`, `ENTERING`, `PENDING`, `CLAIMED`, `FLUSHING` or `RECORDED`.
    pub const STATE: u64 = 8;
    /// u32 beside the state (one u64 with it): the owner adds one at each call it keeps, so
    /// that memsup's claim (a compare-and-swap of both) takes only the call whose fields it
    /// read.
    pub const SEQUENCE: u64 = 12;
    pub const ENTRY_TSC: u64 = 16;
    /// rsp at the function's entry (pointing at the return address).
    pub const STACK_POINTER: u64 = 24;
    /// u32: set by any record of the owner while its slot is not `IDLE`, cleared at entry.
    pub const DIRTY: u64 = 32;
    /// u32: the pending call's function number.
    pub const FUNCTION: u64 = 36;
    /// A bit per function number whose counters the owner has added to (`FUNCTIONS` bits),
    /// so that memsup reads only those.
    pub const TOUCHED: u64 = 64;

    pub const IDLE: u32 = 0;
    pub const ENTERING: u32 = 1;
    pub const PENDING: u32 = 2;
    pub const CLAIMED: u32 = 3;
    pub const FLUSHING: u32 = 4;
    pub const RECORDED: u32 = 5;

    /// Function numbers below this are summed in the hook; the others always record.
    pub const FUNCTIONS: u64 = 4096;
    /// Per slot and function: calls (u64), then TSC ticks inside them (u64). Written by the
    /// owner only, read by memsup.
    pub const COUNTER_BYTES: u64 = 16;
    pub const SLOT_COUNTERS_BYTES: u64 = FUNCTIONS * COUNTER_BYTES;
    /// Byte offset of slot 0's counters from the section's start.
    pub const COUNTERS: u64 = SLOTS * SLOT_BYTES;
    pub const SECTION_BYTES: u64 = COUNTERS + SLOTS * SLOT_COUNTERS_BYTES;

    const _: () = assert!(TOUCHED + FUNCTIONS / 8 <= SLOT_BYTES);

    /// The slot of a thread.
    pub fn slot_of(thread: u64) -> u64 {
        thread.wrapping_mul(SLOT_HASH) >> (64 - SLOT_BITS)
    }

    /// Byte offset from the section's start of `slot`'s counters of `function`.
    pub fn counters_of(slot: u64, function: u64) -> u64 {
        COUNTERS + slot * SLOT_COUNTERS_BYTES + function * COUNTER_BYTES
    }
}
