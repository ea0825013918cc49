//! The profile file: a versioned header followed by framed, compressed blocks of records.
//!
//! The framing (preamble, block frames, compression) is `trace/frame.rs`; the records inside
//! a block are coded in streams by `trace/codec.rs`. Version 2's unframed blocks are
//! `trace/reader_v2.rs`.
//! A block is only ever appended whole, so a profile cut short reads up to its last whole block.
//! New record variants are appended at the end of `Record`; old variants are never removed or
//! reordered, so older profiles stay readable.

use serde::{Deserialize, Serialize};

use crate::trace::stacks::StackId;

/// First bytes of every profile.
pub const MAGIC: [u8; 8] = *b"MEMSUP\0\0";
/// Version of the record encoding. Readers refuse newer versions with a clear message.
pub const FORMAT_VERSION: u32 = 9;
/// The first version whose block payloads are zstd frames; deflate before it.
pub const FIRST_ZSTD_VERSION: u32 = 9;

/// Recordings give times in whole microseconds. A time is taken when memsup handles a stop,
/// microseconds after the program's call and with as much jitter, and two records of one
/// thread lie more than 10 µs apart (each costs a ptrace stop), so the nanoseconds are noise;
/// dropping them keeps every order by time (truncation never reverses two times) and saves
/// more than a byte per record. The encoding itself keeps whatever nanoseconds a time has.
pub const RECORD_TIME_UNIT_NS: u64 = 1000;

/// The outermost frame of a stack whose walk stopped early (copy too short, an address
/// outside every module, too deep): reports show it as `[truncated]`.
pub const TRUNCATED_FRAME: u64 = u64::MAX;

/// One function at a call site as the profile stores it: an inlined one, or the real
/// function that contains it (the symboliser's frame, converted where it is written).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    /// Demangled name; empty when nothing names the function.
    pub function: String,
    /// The name as the file spells it (mangled for C++ and Rust).
    pub raw_name: String,
    /// Source file and position: for the innermost frame the address itself, for an outer
    /// frame the call that was inlined there.
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// True for every frame but the last (the real function).
    pub inlined: bool,
}

/// How the recording was made.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordMode {
    /// `memsup run`: memsup launched the program.
    Run,
    /// `memsup attach`: memsup joined running processes.
    Attach,
    /// `memsup snapshot`: memsup stopped running processes once, read their threads and
    /// memory, and let them go.
    Snapshot,
}

/// Written once at the start of the file.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub memsup_version: String,
    pub host: String,
    pub mode: RecordMode,
    /// The command memsup ran, or the PIDs it attached to.
    pub target: Vec<String>,
    /// Wall clock at time 0 of every `time_ns` in the records (ns since the Unix epoch).
    pub start_unix_ns: u64,
    /// Options that shaped the recording, as `name=value`.
    pub options: Vec<String>,
}

/// The allocator functions memsup probes. Aliases sharing one address are recorded under the
/// first name in this list that the module defines (glibc's `memalign` and `aligned_alloc`
/// are one function).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocFunction {
    Malloc,
    Calloc,
    Realloc,
    Reallocarray,
    Free,
    PosixMemalign,
    AlignedAlloc,
    Memalign,
    Valloc,
    Pvalloc,
}

impl AllocFunction {
    pub const ALL: [AllocFunction; 10] = [
        AllocFunction::Malloc,
        AllocFunction::Calloc,
        AllocFunction::Realloc,
        AllocFunction::Reallocarray,
        AllocFunction::Free,
        AllocFunction::PosixMemalign,
        AllocFunction::AlignedAlloc,
        AllocFunction::Memalign,
        AllocFunction::Valloc,
        AllocFunction::Pvalloc,
    ];

    /// The C name, as shown in reports.
    pub fn name(self) -> &'static str {
        match self {
            AllocFunction::Malloc => "malloc",
            AllocFunction::Calloc => "calloc",
            AllocFunction::Realloc => "realloc",
            AllocFunction::Reallocarray => "reallocarray",
            AllocFunction::Free => "free",
            AllocFunction::PosixMemalign => "posix_memalign",
            AllocFunction::AlignedAlloc => "aligned_alloc",
            AllocFunction::Memalign => "memalign",
            AllocFunction::Valloc => "valloc",
            AllocFunction::Pvalloc => "pvalloc",
        }
    }
}

/// The mapping system calls memsup records.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MapCall {
    /// args: addr, length, prot, flags, fd, offset; result: address or -errno
    Mmap,
    /// args: addr, length; result: 0 or -errno
    Munmap,
    /// args: old_address, old_size, new_size, flags, new_address; result: address or -errno
    Mremap,
    /// args: requested break; result: the new break
    Brk,
    /// args: shmid, shmaddr, shmflg; result: address or -errno
    Shmat,
    /// args: shmaddr; result: 0 or -errno
    Shmdt,
}

impl MapCall {
    pub fn name(self) -> &'static str {
        match self {
            MapCall::Mmap => "mmap",
            MapCall::Munmap => "munmap",
            MapCall::Mremap => "mremap",
            MapCall::Brk => "brk",
            MapCall::Shmat => "shmat",
            MapCall::Shmdt => "shmdt",
        }
    }
}

/// Where a process came from.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartCause {
    Launch,
    Fork,
    Vfork,
    Attach,
}

/// How a process's recording ended.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// exit(code)
    Code(i32),
    /// killed by signal N
    Signal(i32),
    /// memsup detached and the process ran on
    Detached,
    /// recording ended without seeing the end (memsup killed, profile truncated)
    Unknown,
}

/// What it cost to watch one process (one exec image).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeCounters {
    /// Every ptrace stop of this process's threads that memsup handled.
    pub stops: u64,
    /// int3 hits on allocator / mapping entry probes.
    pub entry_hits: u64,
    /// int3 hits on the return trampoline.
    pub return_hits: u64,
    /// Entry hits whose first instruction was emulated in the tracer.
    pub emulated: u64,
    /// Entry hits that ran a relocated copy of the first instruction(s) in the scratch page.
    pub out_of_line: u64,
    /// PTRACE_SINGLESTEP requests.
    pub single_steps: u64,
    /// Entry hits that had to stop every thread to step over the original instruction.
    pub stop_the_world: u64,
    /// seccomp and syscall-exit stops (mapping calls in run mode).
    pub syscall_stops: u64,
    /// Allocator calls made from inside another probed allocator call (recorded once, by the outer call).
    pub nested_calls: u64,
    /// Breakpoints found overwritten by someone else (runtime code patchers); never restored.
    pub foreign_patches: u64,
    /// Stacks copied at stops (`--stacks full`).
    pub stack_copies: u64,
    /// Time the tracer spent making those copies while the threads were stopped.
    pub stack_copy_ns: u64,
}

impl ProbeCounters {
    /// Field-wise sum (the costs of two images reported as one).
    pub fn plus(self, other: ProbeCounters) -> ProbeCounters {
        ProbeCounters {
            stops: self.stops + other.stops,
            entry_hits: self.entry_hits + other.entry_hits,
            return_hits: self.return_hits + other.return_hits,
            emulated: self.emulated + other.emulated,
            out_of_line: self.out_of_line + other.out_of_line,
            single_steps: self.single_steps + other.single_steps,
            stop_the_world: self.stop_the_world + other.stop_the_world,
            syscall_stops: self.syscall_stops + other.syscall_stops,
            nested_calls: self.nested_calls + other.nested_calls,
            foreign_patches: self.foreign_patches + other.foreign_patches,
            stack_copies: self.stack_copies + other.stack_copies,
            stack_copy_ns: self.stack_copy_ns + other.stack_copy_ns,
        }
    }
}

/// One thing that happened. Every record carries the process (thread-group) id it belongs to.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Record {
    /// A process came under supervision.
    ProcessStart {
        time_ns: u64,
        pid: u32,
        parent_pid: Option<u32>,
        cause: StartCause,
    },
    /// The process now runs this program (after launch, exec or attach). Starts a new image:
    /// symbols and modules of earlier images of the same pid no longer apply.
    Exec {
        time_ns: u64,
        pid: u32,
        exe: String,
        argv: Vec<String>,
    },
    ThreadStart {
        time_ns: u64,
        pid: u32,
        tid: u32,
    },
    ThreadExit {
        time_ns: u64,
        pid: u32,
        tid: u32,
    },
    /// A file mapped into the process image (one record per module, covering all its segments).
    Module {
        time_ns: u64,
        pid: u32,
        path: String,
        /// Lowest and highest runtime addresses of the module's mappings.
        start: u64,
        end: u64,
        /// runtime address - ELF virtual address.
        bias: u64,
    },
    /// A block was allocated. `stack` is the call stack of the allocator call, its first
    /// frame the return address into the code that called the allocator.
    Alloc {
        time_ns: u64,
        pid: u32,
        tid: u32,
        function: AllocFunction,
        address: u64,
        size: u64,
        stack: StackId,
    },
    /// free(address). free(NULL) is recorded with address 0.
    Free {
        time_ns: u64,
        pid: u32,
        tid: u32,
        address: u64,
    },
    /// realloc / reallocarray. `new_address` 0 with size 0 frees the old block;
    /// `new_address` 0 with size > 0 is a failure that leaves the old block alive.
    Realloc {
        time_ns: u64,
        pid: u32,
        tid: u32,
        function: AllocFunction,
        old_address: u64,
        new_address: u64,
        size: u64,
        stack: StackId,
    },
    /// A mapping system call and its result. The stack of a call caught at the system call
    /// starts in the libc wrapper; of a probed wrapper, at the return address into its caller.
    Mapping {
        time_ns: u64,
        pid: u32,
        tid: u32,
        call: MapCall,
        args: [u64; 6],
        result: i64,
        stack: StackId,
    },
    /// What a code address of this process image is, resolved once at the end of the image.
    Symbol {
        pid: u32,
        address: u64,
        /// The function symbol containing the address ("" when none) and `address` minus its start.
        function: String,
        offset: u64,
        module: String,
        /// Innermost inlined function first, with file:line where DWARF has it.
        frames: Vec<SourceFrame>,
    },
    /// Something the user should know about this process (e.g. no allocator symbols found).
    Warning {
        time_ns: u64,
        pid: u32,
        message: String,
    },
    /// The end of a process's recording, with what watching it cost.
    ProcessExit {
        time_ns: u64,
        pid: u32,
        status: ExitKind,
        counters: ProbeCounters,
    },
    /// Last record of a complete profile.
    End {
        time_ns: u64,
    },
    /// A probed call that never returned: the thread left it by longjmp, or died in it.
    AbandonedCall {
        time_ns: u64,
        pid: u32,
        tid: u32,
        function: AllocFunction,
    },
    /// What watching the current image cost, written just before an Exec replaces it.
    ImageCounters {
        pid: u32,
        counters: ProbeCounters,
    },
    /// A node of the image's stack tree (see `trace::stacks`), written before the first
    /// record that names it.
    StackNode {
        pid: u32,
        id: StackId,
        parent: StackId,
        address: u64,
    },
    /// What capturing and unwinding stacks cost over the whole recording, written by the
    /// interpret stage just before `End`.
    UnwindCosts(UnwindCosts),
    /// The memory counters of /proc/PID/status at `time_ns` (bytes), sampled without ptrace
    /// at the fixed `--interval`. From format version 3 a process's records, samples
    /// included, are in time order; in version 2 samples may precede tracer records of
    /// earlier times (order by `time_ns`).
    StatusSample {
        time_ns: u64,
        pid: u32,
        /// VmRSS, and its parts RssAnon, RssFile, RssShmem.
        rss: u64,
        anon: u64,
        file: u64,
        shmem: u64,
        /// VmSwap
        swap: u64,
    },
    /// /proc/PID/smaps_rollup at `time_ns` (bytes), sampled at a rate that keeps the
    /// sampler's CPU time within its budget.
    RollupSample {
        time_ns: u64,
        pid: u32,
        rss: u64,
        pss: u64,
        pss_anon: u64,
        pss_file: u64,
        pss_shmem: u64,
        swap: u64,
        swap_pss: u64,
    },
    /// What the residency sampler cost over the whole recording, written when it stops,
    /// before `End`.
    SamplerCosts(SamplerCosts),
    /// Every mapping of /proc/PID/smaps at `time_ns`, with its residency: taken at key
    /// moments (see `SnapshotReason`), for attributing resident memory to components.
    SmapsSnapshot {
        time_ns: u64,
        pid: u32,
        reason: SnapshotReason,
        /// CPU time memsup spent reading and parsing this snapshot.
        cost_ns: u64,
        mappings: Vec<MappingResidency>,
    },
    /// memsup's scratch page (return trampoline, relocated instructions, system call stub)
    /// was mapped at `address` in this process: one page that belongs to memsup, not to the
    /// program. A fork child inherits it at the same address and gets its own record.
    ScratchPage {
        time_ns: u64,
        pid: u32,
        address: u64,
    },
    /// Where a thread's stack is: the stack pointer its clone call gave it, or its stack
    /// pointer when memsup attached. The mapping holding `address - 1` is that thread's stack.
    ThreadStack {
        time_ns: u64,
        pid: u32,
        tid: u32,
        address: u64,
    },
    /// How this process image's allocator calls were recorded, written at the image's end:
    /// by which engine, each probe site's implementation, and what the hook rings counted.
    ProbeSites {
        time_ns: u64,
        pid: u32,
        engine: Engine,
        sites: Vec<ProbeSite>,
        hooks: HookCounters,
    },
    /// A thread as `memsup snapshot` found it: what it was doing, the kernel's view of it
    /// read just before it was stopped, and its call stack (innermost frame: the instruction
    /// it was stopped at).
    ThreadState {
        time_ns: u64,
        pid: u32,
        tid: u32,
        activity: ThreadActivity,
        /// The state letter of /proc/PID/task/TID/stat before the stop (`R`, `S`, `D`, `T`
        /// ...); `?` when the thread was born during the snapshot.
        kernel_state: char,
        /// /proc/PID/task/TID/wchan before the stop: the kernel function it slept in ("" when
        /// running, or hidden by the kernel).
        wchan: String,
        stack: StackId,
    },
    /// How long `memsup snapshot` held the process stopped: from the first thread seized to
    /// the last one let go.
    SnapshotStop {
        time_ns: u64,
        pid: u32,
        stopped_ns: u64,
        /// Threads whose state was recorded.
        threads: u32,
    },
    /// Who the process image is in an MPI job: a rank, or a launcher of ranks. Written when
    /// the image starts running its program (launch, exec, attach), from its environment and
    /// program name, and again when the program confirms or learns its rank.
    ProcessRole {
        time_ns: u64,
        pid: u32,
        role: ProcessRole,
    },
    /// The name of an MPI function of this process image (`MPI_Init`), written before the
    /// first `MpiCall` that names it by `function`. The numbers are the recording's: one
    /// name has one number in every image.
    MpiFunction {
        pid: u32,
        function: u32,
        name: String,
    },
    /// A thread entered (`entry`) or left an MPI function: outermost calls only (an MPI
    /// function called inside another, such as `MPI_X` calling `PMPI_Y`, is part of the
    /// outer call). A call the thread never returned from (it ended inside) is left at the
    /// time memsup saw it end.
    MpiCall {
        time_ns: u64,
        pid: u32,
        tid: u32,
        function: u32,
        entry: bool,
    },
    /// The glibc heap census `memsup snapshot` took while the process was stopped
    /// (`census`), or why it could not.
    HeapCensus {
        time_ns: u64,
        pid: u32,
        census: crate::trace::census_format::HeapCensus,
    },
    /// What the hooks' stack walks of this process image cost, written at its end after
    /// `ProbeSites` (hook engine, full stacks).
    HookStacks {
        time_ns: u64,
        pid: u32,
        costs: HookStackCosts,
    },
    /// What the hooks' calls of this process image cost: rule lookups of their walks and
    /// the time timed calls spent in the hook, written at its end after `ProbeSites`.
    HookCalls {
        time_ns: u64,
        pid: u32,
        costs: HookCallCosts,
    },
    /// What memsup itself used over the recording, written just before `End`.
    RecorderCosts(RecorderCosts),
    /// The blocks the heap census at an attach found in use (after its `HeapCensus`), so
    /// that their frees are known by size.
    BlocksAtAttach {
        time_ns: u64,
        pid: u32,
        blocks: crate::trace::census_format::LiveBlocks,
    },
    /// `calls` outermost calls of an MPI function by one thread, written instead of their
    /// `MpiCall` pairs, in which nothing happened: no record of the image (an allocator
    /// call or mapping of any thread) came between the entry and the return (hook engine).
    /// `inside_ns` sums their time from entry to return, in nanoseconds. Written before the
    /// thread's next `MpiCall`, so it lies where the thread's nesting is as it was during
    /// the calls.
    MpiCalls {
        time_ns: u64,
        pid: u32,
        tid: u32,
        function: u32,
        calls: u64,
        inside_ns: u64,
    },
}

/// A process image's part in an MPI job.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum ProcessRole {
    Rank(MpiRank),
    /// A program that starts or serves ranks (mpirun, orted, hydra_pmi_proxy ...), by the
    /// name memsup recognised it by.
    Launcher {
        program: String,
    },
}

/// An MPI rank's identity.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MpiRank {
    /// Rank in MPI_COMM_WORLD.
    pub rank: u32,
    /// Ranks in MPI_COMM_WORLD, when known.
    pub world_size: Option<u32>,
    /// The job's id as its launcher names it ("" when none is known).
    pub job: String,
    /// Where the rank came from: the environment variable (`OMPI_COMM_WORLD_RANK`,
    /// `PMI_RANK` ...), `MPI_Comm_rank`, or `singleton`.
    pub source: String,
}

/// What a thread was doing when a snapshot stopped it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadActivity {
    /// Running or runnable in user code.
    Running,
    /// Inside this system call (x86-64 number), blocked or working in the kernel.
    SystemCall(u32),
    /// Stopped by job control (SIGSTOP, SIGTSTP, ...).
    Stopped,
}

/// What recorded a process image's allocator calls.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// A breakpoint on each allocator entry: a stop per call.
    Int3,
    /// Hooks injected at the entries, writing rings memsup drains: no stop per call.
    Hooks,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Int3 => "int3",
            Engine::Hooks => "hooks",
        }
    }
}

/// One probed function and how its probe works.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ProbeSite {
    /// The function probed, by its standard name (`malloc`, `mmap`, `rendezvous`).
    pub function: String,
    pub address: u64,
    /// `hook`, or the int3 step-over (`emulated`, `out of line`, ...), with the reason a
    /// hook could not be placed when there is one.
    pub implementation: String,
}

/// What an image's hook rings counted.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookCounters {
    /// Records read from the rings.
    pub records: u64,
    /// Records of calls made inside another allocator call (recorded once, by the outer one).
    pub nested: u64,
    /// Records the hooks dropped: ring full with `--ring-full drop`, a wait past its limit,
    /// or memsup gone.
    pub dropped: u64,
    /// Times a hook found its ring full.
    pub full_waits: u64,
    /// Slots claimed and never published (a thread that died inside a hook).
    pub torn: u64,
    /// Records that failed validation.
    pub invalid: u64,
    /// Records released after later ones (a producer preempted between its clock reading
    /// and its claim for longer than the drain's grace).
    pub late: u64,
}

/// What the hooks' stack walker did in one process image, counted by the drain from the
/// records and the area.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookStackCosts {
    /// Allocator and mapping calls whose stack the hook walked.
    pub walks: u64,
    /// Frames those walks gave (the truncation marks not counted).
    pub frames: u64,
    /// Walks that stopped before the outermost frame.
    pub truncated: u64,
    /// Calls the hook could not walk: its stack pointer on no stack memsup knew (a signal
    /// stack, a fiber), or the stack store full.
    pub unwalked: u64,
    /// Distinct stacks the hooks stored (each once; later walks of it find it known).
    pub stored_stacks: u64,
    /// Bytes of the stack store used.
    pub stored_bytes: u64,
    /// Walks whose frames did not fit in the store.
    pub lost: u64,
    /// Bytes of unwind tables, directories and thread stack lists memsup wrote.
    pub table_bytes: u64,
}

/// What the hooks' calls cost in one process image, counted by the drain.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookCallCosts {
    /// Rule lookups of the hooks' stack walks (one per frame stepped; a new stack is walked
    /// twice) and how many the rule cache did not answer.
    pub rule_lookups: u64,
    pub cache_misses: u64,
    /// Calls timed (about one in 256, picked by their ring's head; not those that waited
    /// for room in their ring or were dropped) and their time in the hook, in nanoseconds: the walk, the claim of a
    /// slot and the record's write.
    pub timed_calls: u64,
    pub timed_ns: u64,
}

/// What memsup's own process used over a recording.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecorderCosts {
    /// memsup's peak resident set (the kernel's high-water mark), in bytes.
    pub peak_rss_bytes: u64,
    /// CPU time of all of memsup's threads (user and system), in nanoseconds.
    pub cpu_ns: u64,
}

/// Why a full smaps snapshot was taken. Variants are only appended (format 5 added `Fork`,
/// `RequestedHigh` and `RssHigh`, format 6 `MpiEntry` and `MpiReturn`, format 8 the
/// estimates), so older profiles decode unchanged.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SnapshotReason {
    /// The process came under supervision.
    Start,
    /// It exec'd a new program.
    Exec,
    /// Its main thread is exiting (taken at the exit stop, before the memory is released).
    Exit,
    /// Its live requested bytes reached a new high, up to a second earlier (format 4 and
    /// before; how long before was not recorded).
    Peak,
    /// memsup received SIGUSR1.
    Signal,
    /// Every `--smaps-interval`.
    Interval,
    /// It was just forked (a copy of its parent's address space).
    Fork,
    /// Its live requested bytes reached a new high of `bytes`, `delay_ns` before the snapshot.
    RequestedHigh { bytes: u64, delay_ns: u64 },
    /// A status sample saw its RSS at a new high of `bytes`, `delay_ns` before the snapshot.
    RssHigh { bytes: u64, delay_ns: u64 },
    /// A thread stopped at the entry of MPI function `function` (its `MpiFunction` number):
    /// MPI_Init, MPI_Init_thread and MPI_Finalize, while the thread waits.
    MpiEntry { function: u32 },
    /// A thread stopped at the return of MPI function `function`.
    MpiReturn { function: u32 },
    /// An estimate for a new high of live requested bytes, taken while the full snapshot was
    /// too dear to take yet: the mappings as /proc/PID/maps lists them, the `sampled` ones
    /// that changed since the process's last snapshot counted from /proc/PID/pagemap, the
    /// others with the residency that snapshot gave them.
    RequestedHighEstimate {
        bytes: u64,
        delay_ns: u64,
        sampled: u32,
    },
    /// The same for a new high of RSS.
    RssHighEstimate {
        bytes: u64,
        delay_ns: u64,
        sampled: u32,
    },
}

impl SnapshotReason {
    /// As reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotReason::Start => "start",
            SnapshotReason::Exec => "exec",
            SnapshotReason::Exit => "exit",
            SnapshotReason::Peak
            | SnapshotReason::RequestedHigh { .. }
            | SnapshotReason::RequestedHighEstimate { .. } => "requested_high",
            SnapshotReason::Signal => "signal",
            SnapshotReason::Interval => "interval",
            SnapshotReason::Fork => "fork",
            SnapshotReason::RssHigh { .. } | SnapshotReason::RssHighEstimate { .. } => "rss_high",
            SnapshotReason::MpiEntry { .. } => "mpi_entry",
            SnapshotReason::MpiReturn { .. } => "mpi_return",
        }
    }

    /// For a snapshot taken for a new high (format 5): the high's bytes and how long before
    /// the snapshot it was seen.
    pub fn high(self) -> Option<(u64, u64)> {
        match self {
            SnapshotReason::RequestedHigh { bytes, delay_ns }
            | SnapshotReason::RssHigh { bytes, delay_ns }
            | SnapshotReason::RequestedHighEstimate {
                bytes, delay_ns, ..
            }
            | SnapshotReason::RssHighEstimate {
                bytes, delay_ns, ..
            } => Some((bytes, delay_ns)),
            _ => None,
        }
    }

    /// For an estimate: how many of its mappings were counted from pagemap.
    pub fn sampled_mappings(self) -> Option<u32> {
        match self {
            SnapshotReason::RequestedHighEstimate { sampled, .. }
            | SnapshotReason::RssHighEstimate { sampled, .. } => Some(sampled),
            _ => None,
        }
    }

    /// Whether the high is of live requested bytes (else of RSS); None for other reasons.
    pub fn high_is_requested(self) -> Option<bool> {
        match self {
            SnapshotReason::RequestedHigh { .. } | SnapshotReason::RequestedHighEstimate { .. } => {
                Some(true)
            }
            SnapshotReason::RssHigh { .. } | SnapshotReason::RssHighEstimate { .. } => Some(false),
            _ => None,
        }
    }
}

/// One mapping of a smaps snapshot (sizes in bytes).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct MappingResidency {
    pub start: u64,
    pub end: u64,
    /// `MAPPING_*` bits.
    pub flags: u8,
    pub offset: u64,
    pub inode: u64,
    /// The file, or a pseudo-name (`[heap]`, `[stack]`, `[vdso]`, `[anon:name]`), or "" for
    /// anonymous memory. " (deleted)" is kept.
    pub path: String,
    pub rss: u64,
    pub pss: u64,
    /// Shared_Clean + Shared_Dirty: resident pages other processes map too.
    pub shared: u64,
    pub private_dirty: u64,
    pub anonymous: u64,
    pub swap: u64,
    pub swap_pss: u64,
}

pub const MAPPING_READ: u8 = 1;
pub const MAPPING_WRITE: u8 = 2;
pub const MAPPING_EXECUTE: u8 = 4;
/// MAP_SHARED (the `s` of `rw-s`).
pub const MAPPING_SHARED: u8 = 8;

/// The residency sampler's own work: samples taken and the sampler thread's CPU time.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerCosts {
    /// Fixed interval between /proc/PID/status rounds.
    pub status_interval_ns: u64,
    pub status_samples: u64,
    /// CPU time of the sampler thread spent reading and parsing status files.
    pub status_cpu_ns: u64,
    pub rollup_samples: u64,
    pub rollup_cpu_ns: u64,
    /// The smaps_rollup interval the sampler had adapted to when it stopped.
    pub rollup_interval_ns: u64,
    /// How long the sampler ran (wall clock).
    pub elapsed_ns: u64,
}

/// Totals of the stack work done off the stop path.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwindCosts {
    /// Stack copies unwound.
    pub stacks: u64,
    /// Frames they produced (markers of truncation not counted).
    pub frames: u64,
    /// Walks that stopped early.
    pub truncated: u64,
    /// Bytes of stack copied at the stops.
    pub copied_bytes: u64,
    /// Time spent walking copies, in the interpret stage.
    pub unwind_ns: u64,
    /// Time spent symbolising addresses at the ends of images.
    pub symbolize_ns: u64,
    /// Distinct addresses symbolised.
    pub addresses: u64,
}

impl Record {
    /// The process the record belongs to (None for `End`).
    pub fn pid(&self) -> Option<u32> {
        match self {
            Record::ProcessStart { pid, .. }
            | Record::Exec { pid, .. }
            | Record::ThreadStart { pid, .. }
            | Record::ThreadExit { pid, .. }
            | Record::Module { pid, .. }
            | Record::Alloc { pid, .. }
            | Record::Free { pid, .. }
            | Record::Realloc { pid, .. }
            | Record::Mapping { pid, .. }
            | Record::Symbol { pid, .. }
            | Record::Warning { pid, .. }
            | Record::ProcessExit { pid, .. }
            | Record::AbandonedCall { pid, .. }
            | Record::ImageCounters { pid, .. }
            | Record::StackNode { pid, .. }
            | Record::StatusSample { pid, .. }
            | Record::RollupSample { pid, .. }
            | Record::SmapsSnapshot { pid, .. }
            | Record::ScratchPage { pid, .. }
            | Record::ThreadStack { pid, .. }
            | Record::ProbeSites { pid, .. }
            | Record::ThreadState { pid, .. }
            | Record::SnapshotStop { pid, .. }
            | Record::ProcessRole { pid, .. }
            | Record::MpiFunction { pid, .. }
            | Record::MpiCall { pid, .. }
            | Record::MpiCalls { pid, .. }
            | Record::HeapCensus { pid, .. }
            | Record::BlocksAtAttach { pid, .. }
            | Record::HookStacks { pid, .. }
            | Record::HookCalls { pid, .. } => Some(*pid),
            Record::End { .. }
            | Record::UnwindCosts(_)
            | Record::SamplerCosts(_)
            | Record::RecorderCosts(_) => None,
        }
    }

    /// When the record's event happened (None for records that describe, not happen).
    pub fn time_ns(&self) -> Option<u64> {
        match self {
            Record::ProcessStart { time_ns, .. }
            | Record::Exec { time_ns, .. }
            | Record::ThreadStart { time_ns, .. }
            | Record::ThreadExit { time_ns, .. }
            | Record::Module { time_ns, .. }
            | Record::Alloc { time_ns, .. }
            | Record::Free { time_ns, .. }
            | Record::Realloc { time_ns, .. }
            | Record::Mapping { time_ns, .. }
            | Record::Warning { time_ns, .. }
            | Record::ProcessExit { time_ns, .. }
            | Record::End { time_ns }
            | Record::AbandonedCall { time_ns, .. }
            | Record::StatusSample { time_ns, .. }
            | Record::RollupSample { time_ns, .. }
            | Record::SmapsSnapshot { time_ns, .. }
            | Record::ScratchPage { time_ns, .. }
            | Record::ThreadStack { time_ns, .. }
            | Record::ProbeSites { time_ns, .. }
            | Record::ThreadState { time_ns, .. }
            | Record::SnapshotStop { time_ns, .. }
            | Record::ProcessRole { time_ns, .. }
            | Record::MpiCall { time_ns, .. }
            | Record::MpiCalls { time_ns, .. }
            | Record::HeapCensus { time_ns, .. }
            | Record::BlocksAtAttach { time_ns, .. }
            | Record::HookStacks { time_ns, .. }
            | Record::HookCalls { time_ns, .. } => Some(*time_ns),
            Record::Symbol { .. }
            | Record::RecorderCosts(_)
            | Record::MpiFunction { .. }
            | Record::ImageCounters { .. }
            | Record::StackNode { .. }
            | Record::UnwindCosts(_)
            | Record::SamplerCosts(_) => None,
        }
    }
}
